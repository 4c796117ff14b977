"""Edits as `jp` shows them, coloured on a terminal: the unified diff the workspace
tools put in their result (a ```diff block), printed under the tool's line, and the
text an edit replaces, shown when asking to allow it."""

from __future__ import annotations

import re
from typing import Any

_BLOCK = re.compile(r"```diff\n(.*?)```", re.DOTALL)
_RED, _GREEN, _CYAN, _BOLD, _RESET = "\033[31m", "\033[32m", "\033[36m", "\033[1m", "\033[0m"
MAX_LINES = 200
"""Diff lines printed at most (the model and the log have all of it)."""


def paint_diff(line: str) -> str:
    """A unified diff's line in the terminal's colours."""
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
    shown = [paint_diff(line) if color else line for line in lines]
    if more > 0:
        shown.append(f"... {more} more diff lines")
    return ["  " + line for line in shown]


PREVIEW_LINES = 20
"""Lines of old and of new text shown when asking to allow an edit."""


def edit_preview(tool: str, arguments: Any, *, color: bool) -> list[str]:
    """The edit a call of a workspace tool asks to make, for its permission prompt:
    `fs_modify_file`'s old text as `-` lines and new text as `+` lines, or the first
    lines of `fs_create_file`'s content (none for other tools)."""
    if not isinstance(arguments, dict):
        return []
    old, new = arguments.get("old_text"), arguments.get("new_text")
    if tool == "fs_create_file":
        old, new = None, arguments.get("content")
    elif tool != "fs_modify_file":
        return []
    lines: list[str] = []
    for sign, text in (("-", old), ("+", new)):
        if not isinstance(text, str):
            continue
        body = text.splitlines() or [""]
        lines += [f"{sign}{line}" for line in body[:PREVIEW_LINES]]
        if len(body) > PREVIEW_LINES:
            lines.append(f" ... {len(body) - PREVIEW_LINES} more lines")
    return ["  " + (paint_diff(line) if color else line) for line in lines]


CONTEXT = 3
"""Unchanged lines shown around each change in a permission prompt's diff."""


def numbered_diff(old: str | None, new: str, *, color: bool) -> list[str]:
    """The change from `old` (None: a new file) to `new` with a few lines of context
    and line numbers (the old file's for removed lines, the new file's otherwise), for
    a permission prompt: `  12 │ -text`."""
    import difflib

    before = (old or "").splitlines()
    after = new.splitlines()
    matcher = difflib.SequenceMatcher(None, before, after, autojunk=False)
    lines: list[str] = []
    for group in matcher.get_grouped_opcodes(CONTEXT):
        if lines:
            lines.append("     ┆")
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                lines += [f"{j + 1:5} │  {after[j]}" for j in range(j1, j2)]
                continue
            lines += [_paint(f"{i + 1:5} │ -{before[i]}", "-", color) for i in range(i1, i2)]
            lines += [_paint(f"{j + 1:5} │ +{after[j]}", "+", color) for j in range(j1, j2)]
    if len(lines) > MAX_LINES:
        lines = [*lines[:MAX_LINES], f"  ... {len(lines) - MAX_LINES} more diff lines"]
    return ["  " + line for line in lines]


def _paint(line: str, sign: str, color: bool) -> str:
    if not color:
        return line
    return f"{_GREEN if sign == '+' else _RED}{line}{_RESET}"
