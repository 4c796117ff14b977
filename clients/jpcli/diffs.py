"""The diff of an edit, as `jp` prints it under the tool's line: the unified diff the
workspace tools put in their result (a ```diff block), coloured on a terminal."""

from __future__ import annotations

import re

_BLOCK = re.compile(r"```diff\n(.*?)```", re.DOTALL)
_RED, _GREEN, _CYAN, _BOLD, _RESET = "\033[31m", "\033[32m", "\033[36m", "\033[1m", "\033[0m"
MAX_LINES = 200
"""Diff lines printed at most (the model and the log have all of it)."""


def _paint(line: str) -> str:
    if line.startswith(("+++", "---")):
        return f"{_BOLD}{line}{_RESET}"
    if line.startswith("+"):
        return f"{_GREEN}{line}{_RESET}"
    if line.startswith("-"):
        return f"{_RED}{line}{_RESET}"
    if line.startswith("@@"):
        return f"{_CYAN}{line}{_RESET}"
    return line


def edit_diff(content: str, *, color: bool) -> list[str]:
    """The lines of the diff in a tool result (none when it has no diff block)."""
    match = _BLOCK.search(content)
    if match is None:
        return []
    lines = match.group(1).splitlines()
    more = len(lines) - MAX_LINES
    lines = lines[:MAX_LINES]
    shown = [_paint(line) if color else line for line in lines]
    if more > 0:
        shown.append(f"... {more} more diff lines")
    return ["  " + line for line in shown]
