"""`fs_read_file`: a text file of the workspace with line numbers, a window at a time."""

from __future__ import annotations

import os
from typing import Any

from jpd.config.tools import ToolConfig
from jpd.conversation import events as ev
from jpd.tools.builtin import BuiltinContext
from jpd.tools.builtin.fs_common import (
    MAX_FILE_BYTES,
    decode_text,
    run_blocking,
    string_arg,
    tool_config,
    workspace,
)
from jpd.tools.confine import PathRefused, Workspace
from jpd.tools.outcome import Failure, Success, ToolOutcome

NAME = "fs_read_file"
WINDOW = 400
"""Lines shown when no `end_line` is given."""
MAX_CHARS = 60_000
"""A window is cut short after this many characters (very long lines)."""
MAX_LINE = 2_000
"""Characters of one line shown; the rest is elided."""


def _line_arg(arguments: dict[str, Any], name: str) -> int | None:
    value = arguments.get(name)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def render(text: str, shown: str, start: int, end: int | None) -> str:
    """Lines `start`..`end` (1-based, inclusive) of `text`, numbered, with a last line
    saying how to read on when the file goes further."""
    lines = text.splitlines()
    total = len(lines)
    if total == 0:
        return f"{shown} is empty."
    if start > total:
        return f"{shown} has {total} lines; start_line {start} is past its end."
    last = min(total, end if end is not None else start + WINDOW - 1)
    out: list[str] = []
    size = 0
    number = start
    for number in range(start, last + 1):
        line = lines[number - 1]
        if len(line) > MAX_LINE:
            line = line[:MAX_LINE] + f" [... {len(line) - MAX_LINE} more characters]"
        entry = f"{number:>6}\t{line}"
        if out and size + len(entry) > MAX_CHARS:
            number -= 1
            break
        out.append(entry)
        size += len(entry) + 1
    else:
        number = last
    if number < total:
        out.append(f"[lines {start}-{number} of {total}; read on with start_line={number + 1}]")
    return "\n".join(out)


def _read(ws: Workspace, path_arg: str, start: int, end: int | None) -> str:
    real = ws.resolve(path_arg)
    shown = ws.show(real)
    if real.is_dir():
        raise PathRefused(f"{shown!r} is a folder; list it with fs_list_files")
    if not os.path.lexists(real):
        raise PathRefused(f"{shown!r} does not exist")
    data = ws.read_bytes(real, MAX_FILE_BYTES)  # a FIFO, device or socket is refused
    text = decode_text(data)
    if text is None:
        raise PathRefused(
            f"{shown!r} is a binary file ({len(data)} bytes); it is not shown as text"
        )
    return render(text, shown, start, end)


class ReadFile:
    name = NAME

    def default_config(self) -> ToolConfig:
        return tool_config(
            summary="Read a text file of the workspace, with line numbers.",
            description=(
                "Read a text file of the workspace. Each line is prefixed with its number "
                f"and a tab. Without `end_line` at most {WINDOW} lines are shown; the last "
                "line then says which `start_line` reads on. Binary files are refused."
            ),
            parameters={
                "path": {
                    "type": "string",
                    "required": True,
                    "description": "File path relative to the workspace.",
                },
                "start_line": {"type": "integer", "description": "First line (1-based)."},
                "end_line": {"type": "integer", "description": "Last line (inclusive)."},
            },
            writes=False,
        )

    def inquiry_source(self) -> ev.ToolSource | ev.AssistantSource:
        return ev.ToolSource(name=self.name)

    async def run(
        self, arguments: dict[str, Any], answers: dict[str, Any], ctx: BuiltinContext
    ) -> ToolOutcome:
        path = string_arg(arguments, "path")
        if not path:
            return Failure(message="`path` is required")
        start = _line_arg(arguments, "start_line") or 1
        end = _line_arg(arguments, "end_line")
        if start < 1 or (end is not None and end < start):
            return Failure(message="need 1 <= start_line <= end_line")
        try:
            text = await run_blocking(_read, workspace(ctx), path, start, end)
        except PathRefused as exc:
            return Failure(message=str(exc))
        return Success(content=text)
