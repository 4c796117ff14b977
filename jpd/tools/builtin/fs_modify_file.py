"""`fs_modify_file`: replace exact text in a workspace file; the result is the diff.

The old text must occur exactly once (or `replace_all`); otherwise nothing changes and
the error says whether it was absent or how often it occurs. The change is recorded for
`turn/undo` (jpd/tools/changes.py).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from jpd.config.tools import ToolConfig
from jpd.conversation import events as ev
from jpd.tools.builtin import BuiltinContext
from jpd.tools.builtin.fs_common import (
    MAX_FILE_BYTES,
    WRITE_LOCK,
    decode_text,
    run_blocking,
    string_arg,
    tool_config,
    unified_diff,
    workspace,
)
from jpd.tools.confine import PathRefused, Workspace
from jpd.tools.outcome import Failure, Success, ToolOutcome

# Loaded with the first write: every turn builds the registry that imports this module,
# and a turn answered in text records no change.
if TYPE_CHECKING:
    from jpd.tools.changes import ChangeRecorder
    from jpd.tools.protected import ProtectedGuard

NAME = "fs_modify_file"


def _arguments(arguments: dict[str, Any]) -> tuple[str, str, str, bool] | str:
    """(path, old, new, replace_all), or what is wrong with the arguments."""
    path = string_arg(arguments, "path")
    old, new = string_arg(arguments, "old_text"), string_arg(arguments, "new_text")
    if not path or old is None or new is None:
        return "`path`, `old_text` and `new_text` are required strings"
    if old == "":
        return "old_text is empty; to write a whole file use fs_create_file"
    if old == new:
        return "old_text and new_text are the same; nothing to change"
    return path, old, new, arguments.get("replace_all") is True


def _target(
    ws: Workspace, path_arg: str, old: str, replace_all: bool
) -> tuple[Path, bytes, str, int]:
    """(real path, bytes, text, occurrences) of the file to edit, or `PathRefused` saying
    why the edit cannot be made. Blocking."""
    real = ws.resolve(path_arg)
    shown = ws.show(real)
    if not os.path.lexists(real):
        raise PathRefused(f"{shown!r} does not exist; create it with fs_create_file")
    data = ws.read_bytes(real, MAX_FILE_BYTES)  # only a regular file is edited
    text = decode_text(data)
    if text is None:
        raise PathRefused(f"{shown!r} is a binary file; it cannot be edited as text")
    count = text.count(old)
    if count == 0:
        raise PathRefused(
            f"old_text not found in {shown!r}; nothing changed (read the file and copy "
            "the text exactly, including whitespace)"
        )
    if count > 1 and not replace_all:
        raise PathRefused(
            f"old_text occurs {count} times in {shown!r}; nothing changed (include more "
            "surrounding lines to make it unique, or set replace_all)"
        )
    return real, data, text, count


def precheck(ws: Workspace, arguments: dict[str, Any]) -> str | None:
    """Why the edit would fail, found before anyone is asked to allow it. Blocking."""
    parsed = _arguments(arguments)
    if isinstance(parsed, str):
        return parsed
    path, old, _new, replace_all = parsed
    try:
        _target(ws, path, old, replace_all)
    except PathRefused as exc:
        return str(exc)
    return None


def modify(
    ws: Workspace,
    recorder: ChangeRecorder | None,
    path_arg: str,
    old: str,
    new: str,
    replace_all: bool,
    guard: ProtectedGuard | None = None,
) -> str:
    """Apply the replacement; returns the result text. Blocking."""
    from jpd.tools.changes import write_change

    with WRITE_LOCK:
        real, data, text, count = _target(ws, path_arg, old, replace_all)
        shown = ws.show(real)
        changed = text.replace(old, new) if replace_all else text.replace(old, new, 1)
        if guard is not None:
            guard.check(ws, real)  # as resolved now, not as when the user was asked
        write_change(recorder, ws, real, data, changed.encode("utf-8"))
    diff = unified_diff(shown, text, changed)
    times = f"{count} replacements" if count > 1 else "1 replacement"
    return f"Modified {shown} ({times}).\n\n```diff\n{diff}```"


class ModifyFile:
    name = NAME

    def default_config(self) -> ToolConfig:
        return tool_config(
            summary="Replace exact text in a file of the workspace.",
            description=(
                "Replace `old_text` with `new_text` in a file of the workspace. `old_text` must "
                "match the file exactly (whitespace included) and occur once, unless "
                "`replace_all` is true; otherwise nothing changes and the error says why. "
                "Returns a unified diff of the change."
            ),
            parameters={
                "path": {
                    "type": "string",
                    "required": True,
                    "description": "File path relative to the workspace.",
                },
                "old_text": {"type": "string", "required": True, "description": "Text to replace."},
                "new_text": {"type": "string", "required": True, "description": "Replacement."},
                "replace_all": {
                    "type": "boolean",
                    "description": "Replace every occurrence (default false).",
                },
            },
            writes=True,
        )

    def inquiry_source(self) -> ev.ToolSource | ev.AssistantSource:
        return ev.ToolSource(name=self.name)

    async def precheck(self, arguments: dict[str, Any], ws: Workspace) -> str | None:
        """Why the call would fail (old_text absent or ambiguous, no such file), so that
        nobody is asked to allow an edit that cannot be made."""
        return await run_blocking(precheck, ws, arguments)

    async def run(
        self, arguments: dict[str, Any], answers: dict[str, Any], ctx: BuiltinContext
    ) -> ToolOutcome:
        parsed = _arguments(arguments)
        if isinstance(parsed, str):
            return Failure(message=parsed)
        path, old, new, replace_all = parsed
        try:
            result = await run_blocking(
                modify,
                workspace(ctx),
                ctx.changes,
                path,
                old,
                new,
                replace_all,
                ctx.protected,
                abandon=False,
            )
        except PathRefused as exc:
            return Failure(message=str(exc))
        return Success(content=result)
