"""`jp`: the thin command-line client of the `jpd` daemon (standard library only)."""

__version__ = "0.1.0"
