"""The lines `jp` prints for a tool call: `⚙ TITLE` when it starts and one deliberate
line when it ends (`✓ Read kv.py (1-40) 0.1s`, `✓ Edited kv.py (+1 -1) 0.1s`,
`✗ Ran python -m unittest: exit 1 2.3s`), or `✗ TITLE: cancelled`.

The title is the daemon's (`tool_call` `title`, protocol.md 7.1): one definition for
`jp` and editors. Nothing is flattened into the line: a multi-line title shows its first
line and how many more there are; control characters are escaped.
"""

from __future__ import annotations

import re
from typing import Any

from jpcli.callview import visible
from jpcli.render import TOOL_MARK, format_tool_call

_EXIT = re.compile(r"^exit code: (-?\d+)")
_DIFF_LINE = re.compile(r"^([+-])(?![+-]{2} )", re.MULTILINE)
_CREATED = re.compile(r"^Created .* \((\d+) lines?\)")
_DIFF = re.compile(r"```diff\n(.*?)```", re.DOTALL)


def title_of(event: dict[str, Any]) -> str:
    """A `tool_call` event's title in one line (the daemon's, else `name(args)`)."""
    title = event.get("title")
    arguments = event.get("arguments")
    if (not isinstance(title, str) or not title) and event.get("name") == "run_command":
        title = arguments.get("command") if isinstance(arguments, dict) else None
    if not isinstance(title, str) or not title:
        return format_tool_call(str(event.get("name", "?")), event.get("arguments"))[2:]
    lines = title.split("\n")
    first = visible(lines[0])
    more = len(lines) - 1
    return f"{first} … (+{more} line{'s' if more != 1 else ''})" if more else first


def call_line(event: dict[str, Any]) -> str:
    """`⚙ TITLE`."""
    return f"{TOOL_MARK} {title_of(event)}"


def exit_code(content: str) -> int | None:
    """The exit code a `run_command` result starts with (None: none, e.g. a timeout)."""
    found = _EXIT.match(content)
    return int(found.group(1)) if found else None


def _counts(content: str) -> str:
    """`(+A -R)` of the diff block in an edit's result ("" without one)."""
    block = _DIFF.search(content)
    if block is None:
        created = _CREATED.match(content)
        return f" (new, {created.group(1)} lines)" if created else ""
    signs = _DIFF_LINE.findall(block.group(1))
    return f" ({'+'}{signs.count('+')} -{signs.count('-')})"


def _past(title: str, name: str) -> str:
    """The title in the past tense, for the end line of a call that worked."""
    for now, done in (("Edit ", "Edited "), ("Write ", "Wrote ")):
        if name.startswith("fs_") and title.startswith(now):
            return done + title[len(now) :]
    return title


def end_line(name: str, title: str, content: str, is_error: bool, took: str) -> tuple[str, bool]:
    """(the line for a call's result, whether it failed). `took` is ` 0.4s` or ""."""
    if is_error:
        return f"✗ {title}{took}", True
    if name == "run_command":
        code = exit_code(content)
        if code is None:
            first = content.split("\n", 1)[0]
            return f"✗ Ran {title}: {visible(first)}{took}", True
        return f"{'✓' if code == 0 else '✗'} Ran {title}: exit {code}{took}", code != 0
    if name in ("fs_modify_file", "fs_create_file"):
        return f"✓ {_past(title, name)}{_counts(content)}{took}", False
    if name.startswith("fs_") or name in ("update_plan", "describe_tools"):
        return f"✓ {title}{took}", False
    first = next((line for line in content.splitlines() if line.strip()), "")
    shown = visible(first if len(first) <= 100 else first[:99] + "…")
    return (f"✓ {title}{took}: {shown}" if shown else f"✓ {title}{took}"), False
