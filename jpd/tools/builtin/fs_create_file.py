"""`fs_create_file`: write a new file of the workspace (and its folders).

Over an existing file it first asks the question `overwrite` (boolean, only a human
answers); "no" leaves the file as it was. The change is recorded for `turn/undo`.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from jpd.config.tools import ToolConfig
from jpd.conversation import events as ev
from jpd.protocol.question import BooleanAnswer, Question
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
from jpd.tools.confine import PathRefused, Workspace, special_kind
from jpd.tools.outcome import Failure, NeedsInput, Success, ToolOutcome

# Loaded with the first write: every turn builds the registry that imports this module,
# and a turn answered in text records no change.
if TYPE_CHECKING:
    from jpd.tools.changes import ChangeRecorder
    from jpd.tools.protected import ProtectedGuard

NAME = "fs_create_file"
OVERWRITE = "overwrite"
"""The question asked before replacing an existing file."""


def _exists(ws: Workspace, path_arg: str) -> tuple[bool, str]:
    real = ws.resolve(path_arg)
    shown = ws.show(real)
    try:
        kind = special_kind(os.lstat(real).st_mode)
    except (FileNotFoundError, NotADirectoryError):
        return False, shown
    if kind is not None:
        raise PathRefused(f"{shown!r} is {kind}; only a regular file can be overwritten")
    return True, shown


def create(
    ws: Workspace,
    recorder: ChangeRecorder | None,
    path_arg: str,
    content: str,
    overwrite: bool,
    guard: ProtectedGuard | None = None,
) -> str:
    """Write the file; returns the result text. Blocking."""
    from jpd.tools.changes import write_change

    real = ws.resolve(path_arg)
    shown = ws.show(real)
    with WRITE_LOCK:
        before: bytes | None = None
        if os.path.lexists(real):
            if not overwrite:
                raise PathRefused(f"{shown!r} appeared meanwhile; call again to overwrite it")
            before = ws.read_bytes(real, MAX_FILE_BYTES)  # only a regular file is replaced
        if guard is not None:
            guard.check(ws, real)  # as resolved now, not as when the user was asked
        write_change(recorder, ws, real, before, content.encode("utf-8"))
    lines = len(content.splitlines())
    if before is None:
        return f"Created {shown} ({lines} lines)."
    old = decode_text(before)
    if old is None:
        return f"Overwrote {shown} (a binary file) with {lines} lines."
    return f"Overwrote {shown}.\n\n```diff\n{unified_diff(shown, old, content)}```"


class CreateFile:
    name = NAME

    def default_config(self) -> ToolConfig:
        return tool_config(
            summary="Create a file of the workspace with the given content.",
            description=(
                "Create a file of the workspace with `content`, making its folders as "
                "needed. If the file exists the user is asked whether to overwrite it; to "
                "change part of a file use fs_modify_file instead."
            ),
            parameters={
                "path": {
                    "type": "string",
                    "required": True,
                    "description": "File path relative to the workspace.",
                },
                "content": {"type": "string", "required": True, "description": "The text."},
            },
            writes=True,
        )

    def inquiry_source(self) -> ev.ToolSource | ev.AssistantSource:
        return ev.ToolSource(name=self.name)

    async def run(
        self, arguments: dict[str, Any], answers: dict[str, Any], ctx: BuiltinContext
    ) -> ToolOutcome:
        path, content = string_arg(arguments, "path"), string_arg(arguments, "content")
        if not path or content is None:
            return Failure(message="`path` and `content` are required strings")
        ws = workspace(ctx)
        try:
            exists, shown = await run_blocking(_exists, ws, path)
            if exists and OVERWRITE not in answers:
                return NeedsInput(
                    question=Question(
                        id=OVERWRITE,
                        text=f"{shown} exists. Overwrite it?",
                        answer_type=BooleanAnswer(),
                        exclusive=True,
                        persistence="none",
                    )
                )
            if exists and answers.get(OVERWRITE) is not True:
                return Failure(message=f"{shown} exists and the user chose not to overwrite it")
            result = await run_blocking(
                create, ws, ctx.changes, path, content, exists, ctx.protected, abandon=False
            )
        except PathRefused as exc:
            return Failure(message=str(exc))
        return Success(content=result)
