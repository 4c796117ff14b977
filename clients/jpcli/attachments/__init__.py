"""Attachments in `jp`: `jp query -a SPEC` and `jp attachment add|ls|rm` (`cli`, `commands`).
The daemon reads them (protocol.md 5.5 `attachments`), so they work with `--remote` too."""
