"""`fs_list_files`: the files under a folder of the workspace, `.gitignore`d ones left out."""

from __future__ import annotations

from typing import Any

from jpd.config.tools import ToolConfig
from jpd.conversation import events as ev
from jpd.tools.builtin import BuiltinContext
from jpd.tools.builtin.fs_common import (
    capped,
    list_files,
    root_of,
    run_blocking,
    string_arg,
    tool_config,
    workspace,
)
from jpd.tools.confine import PathRefused
from jpd.tools.outcome import Failure, Success, ToolOutcome

NAME = "fs_list_files"
LIMIT = 500
"""Paths listed at most; the rest are counted."""


class ListFiles:
    name = NAME

    def default_config(self) -> ToolConfig:
        return tool_config(
            summary="List the files under a folder of the workspace.",
            description=(
                "List the files under a folder of the workspace (default: all of it), one "
                "path per line relative to the workspace; files ignored by .gitignore are "
                f"left out. `pattern` is a glob matched against the path or the file name "
                f'(e.g. "*.py", "src/*/test_*.py"). At most {LIMIT} paths are listed.'
            ),
            parameters={
                "path": {
                    "type": "string",
                    "description": "Folder relative to the workspace (default: the workspace).",
                },
                "pattern": {"type": "string", "description": "Glob the files must match."},
            },
            writes=False,
        )

    def inquiry_source(self) -> ev.ToolSource | ev.AssistantSource:
        return ev.ToolSource(name=self.name)

    async def run(
        self, arguments: dict[str, Any], answers: dict[str, Any], ctx: BuiltinContext
    ) -> ToolOutcome:
        ws = workspace(ctx)
        try:
            folder = ws.resolve(string_arg(arguments, "path"))
        except PathRefused as exc:
            return Failure(message=str(exc))
        if not folder.exists():
            return Failure(message=f"{ws.show(folder)!r} does not exist")
        pattern = string_arg(arguments, "pattern")
        names = await run_blocking(
            lambda: list_files(folder, pattern, root=root_of(ws, folder), env=ctx.env)
        )
        base = folder.parent if folder.is_file() else folder
        shown = [ws.show(base / n) for n in names]
        if not shown:
            where = ws.show(folder)
            return Success(
                content=f"No files under {where!r}" + (f" match {pattern!r}." if pattern else ".")
            )
        return Success(content=capped(shown, LIMIT, "files"))
