"""What a turn changed, in the terminal: the list of changed files at the end of a turn
and `jp turn diff [TURN]` (both from `turn/changes`, protocol.md 5.24)."""
