"""Structured answers in `jp`: `jp query --schema JSON|FILE` (`schema`)."""
