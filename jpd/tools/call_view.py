"""What clients are told about a tool call before it runs: its title, kind, the places it
works on and, for an edit, the whole file before and after (protocol.md 7.1, `tool_call`).

An edit's file is read (a file the workspace tools would refuse is not, and gets no
location): the diff is of the whole file, as ACP's diff content expects, and the
location is the line the edit starts on. When the file cannot be read or the old text
is not in it, the diff is the call's own fragment (the call will fail and say why).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jpd.protocol.turn_events import FileDiff, ToolLocation
from jpd.tools.confine import PathRefused, Workspace
from jpd.tools.kinds import tool_kind
from jpd.tools.titles import call_title

PREVIEW_BYTES = 2_000_000
"""Larger files are not read for a whole-file diff (the fragment is sent)."""


@dataclass(frozen=True)
class CallView:
    title: str
    kind: str
    locations: list[ToolLocation] = field(default_factory=list)
    diff: FileDiff | None = None


def _line(arguments: dict[str, Any], name: str) -> int | None:
    value = arguments.get(name)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _current(ws: Workspace, real: Path) -> str | None:
    """The file's text now; None when absent, too large, binary or unreadable."""
    try:
        if not real.is_file() or real.stat().st_size > PREVIEW_BYTES:
            return None
        data = ws.read_bytes(real)
        if b"\0" in data[:8192]:
            return None
        return data.decode("utf-8")
    except (OSError, PathRefused, UnicodeDecodeError):
        return None


def _line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def call_view(
    name: str, arguments: dict[str, Any], root: Path, extra_roots: Iterable[Path] = ()
) -> CallView:
    """The view of a call of `name` run in the workspace `root` (with `extra_roots`,
    the client's additional directories)."""
    title, kind = call_title(name, arguments, root), tool_kind(name)
    path = arguments.get("path")
    if not name.startswith("fs_") or not isinstance(path, str):
        return CallView(title, kind)
    ws = Workspace.of(root, None, extra_roots)
    try:
        real_path = ws.resolve(path)
    except PathRefused:
        return CallView(title, kind)
    real = str(real_path)
    line = _line(arguments, "start_line")
    diff = None
    if name == "fs_modify_file" and isinstance(arguments.get("new_text"), str):
        old, new = arguments.get("old_text"), arguments["new_text"]
        before = _current(ws, real_path)
        if isinstance(old, str) and old and before is not None and old in before:
            after = (
                before.replace(old, new)
                if arguments.get("replace_all") is True
                else before.replace(old, new, 1)
            )
            line = _line_of(before, before.index(old))
            diff = FileDiff(path=real, old_text=before, new_text=after)
        else:
            diff = FileDiff(path=real, old_text=old if isinstance(old, str) else None, new_text=new)
    elif name == "fs_create_file" and isinstance(arguments.get("content"), str):
        diff = FileDiff(path=real, old_text=_current(ws, real_path), new_text=arguments["content"])
        line = 1
    return CallView(title, kind, [ToolLocation(path=real, line=line)], diff)
