"""What editors are told about a tool call before it runs: its kind, the places it
works on and, for an edit, the text it replaces (protocol.md 7.1, `tool_call`).

Read from the call's arguments alone (no file is opened); a path the workspace tools
would refuse gets no location.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from jpd.protocol.turn_events import FileDiff, ToolLocation
from jpd.tools.confine import PathRefused, Workspace
from jpd.tools.kinds import tool_kind


def _line(arguments: dict[str, Any], name: str) -> int | None:
    value = arguments.get(name)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def call_view(
    name: str, arguments: dict[str, Any], root: Path
) -> tuple[str, list[ToolLocation], FileDiff | None]:
    """(tool kind, locations, diff) of a call of `name` run in the workspace `root`."""
    kind = tool_kind(name)
    path = arguments.get("path")
    if not name.startswith("fs_") or not isinstance(path, str):
        return kind, [], None
    try:
        real = str(Workspace.of(root).resolve(path))
    except PathRefused:
        return kind, [], None
    locations = [ToolLocation(path=real, line=_line(arguments, "start_line"))]
    diff = None
    if name == "fs_modify_file" and isinstance(arguments.get("new_text"), str):
        old = arguments.get("old_text")
        diff = FileDiff(
            path=real,
            old_text=old if isinstance(old, str) else None,
            new_text=arguments["new_text"],
        )
    elif name == "fs_create_file" and isinstance(arguments.get("content"), str):
        diff = FileDiff(path=real, new_text=arguments["content"])
    return kind, locations, diff
