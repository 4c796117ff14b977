"""jpd: a long-running LLM agent daemon speaking JSON-RPC (see protocol.md)."""

__version__ = "0.1.0"
"""The one definition of the version: pyproject.toml reads it (`jp` carries a copy that a
test keeps equal; it may not import `jpd`)."""
