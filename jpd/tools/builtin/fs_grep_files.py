"""`fs_grep_files`: lines of workspace files matching a regular expression.

ripgrep does the search when it is on PATH (it honours `.gitignore` and skips binary
files itself); otherwise the files `fs_list_files` would list are searched in Python.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Mapping
from pathlib import Path
from subprocess import DEVNULL, PIPE
from typing import Any

import anyio
from anyio.abc import ByteReceiveStream

from jpd.allowed_env import base_environment
from jpd.config.tools import ToolConfig
from jpd.conversation import events as ev
from jpd.tools.builtin import BuiltinContext
from jpd.tools.builtin.fs_common import (
    MAX_FILE_BYTES,
    capped,
    decode_text,
    list_files,
    root_of,
    run_blocking,
    string_arg,
    tool_config,
    workspace,
)
from jpd.tools.confine import PathRefused, Workspace, special_kind
from jpd.tools.outcome import Failure, Success, ToolOutcome

NAME = "fs_grep_files"
LIMIT = 200
"""Matching lines reported at most; the rest are counted."""
MAX_LINE = 300
"""Characters of a matching line shown."""
MAX_LINES = LIMIT * 5
"""Matching lines collected at most (the count of those not shown is then a floor)."""
TIMEOUT = 120.0
"""Seconds a search may take."""


def _line(shown: str, number: int, text: str) -> str:
    text = text.rstrip("\r\n")
    if len(text) > MAX_LINE:
        text = text[:MAX_LINE] + " [...]"
    return f"{shown}:{number}: {text}"


def _python_grep(
    ws: Workspace,
    target: Path,
    regex: re.Pattern[str],
    glob: str | None,
    env: Mapping[str, str],
) -> list[str]:
    base = target.parent if target.is_file() else target
    found: list[str] = []
    for name in list_files(target, glob, root=root_of(ws, target), env=env):
        path = base / name
        try:
            real = ws.resolve(str(path))  # a symlink out is skipped, never read
            if not real.is_file():  # FIFOs, devices, sockets are skipped
                continue
            text = decode_text(ws.read_bytes(real, MAX_FILE_BYTES))
        except (PathRefused, OSError):
            continue
        if text is None:
            continue
        shown = ws.show(path)
        for number, line in enumerate(text.splitlines(), 1):
            if regex.search(line):
                found.append(_line(shown, number, line))
                if len(found) > MAX_LINES:
                    return found
    return found


async def _ripgrep(
    rg: str, ws: Workspace, target: Path, pattern: str, glob: str | None, env: Mapping[str, str]
) -> list[str]:
    """ripgrep's matches, read as they come: it is stopped once there are more than can
    be shown (its output stays small however large the tree), and killed when the call
    is cancelled or times out."""
    # --no-require-git: `.gitignore` counts outside a repository too, as in the Python
    # search; --sort: the same order every time. --no-config and the allow-listed
    # environment: no RIPGREP_CONFIG_PATH can add a `--pre` command. ripgrep itself
    # skips FIFOs, devices and sockets it meets while walking folders.
    command = [rg, "--no-config", "--line-number", "--no-heading", "--with-filename"]
    command += ["--color=never"]
    command += ["--no-require-git", "--sort=path", "--no-messages", "--null"]
    command += ["--max-columns", str(MAX_LINE), "--max-count", str(LIMIT)]
    if glob:
        command += ["--glob", glob]
    command += ["--regexp", pattern, "--", ws.show(target)]
    process = await anyio.open_process(
        command, stdin=DEVNULL, stdout=PIPE, stderr=PIPE, cwd=ws.root, env=base_environment(env)
    )
    out, errors = bytearray(), bytearray()
    try:
        assert process.stdout is not None and process.stderr is not None

        async def read_errors(stream: ByteReceiveStream) -> None:
            async for chunk in stream:
                errors.extend(chunk[: max(0, 4096 - len(errors))])

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(read_errors, process.stderr)
            async for chunk in process.stdout:
                out += chunk
                if out.count(b"\n") > MAX_LINES:
                    process.kill()  # enough to show: the rest is only counted as "more"
                    break
        status = await process.wait()
    finally:
        with anyio.CancelScope(shield=True):
            if process.returncode is None:
                process.kill()
            await process.aclose()
    if status == 2 and len(out) == 0:
        raise PathRefused(f"ripgrep failed: {errors.decode('utf-8', 'replace').strip()}")
    found = []
    for raw in out.decode("utf-8", "replace").splitlines()[: MAX_LINES + 1]:
        path, _, rest = raw.partition("\0")  # --null: a NUL ends the path
        number, _, text = rest.partition(":")
        found.append(_line(path.removeprefix("./"), int(number or 0), text))
    return found


def ripgrep() -> str | None:
    """ripgrep's path, when it is on PATH."""
    return shutil.which("rg")


def prepare(ws: Workspace, path_arg: str | None, pattern: str) -> tuple[Path, re.Pattern[str]]:
    """The folder or file to search and the compiled expression. Blocking."""
    target = ws.resolve(path_arg)
    try:
        kind = special_kind(os.stat(target).st_mode)
    except OSError:
        raise PathRefused(f"{ws.show(target)!r} does not exist") from None
    if kind not in (None, "a folder"):
        raise PathRefused(f"{ws.show(target)!r} is {kind}; only files and folders are searched")
    try:
        regex = re.compile(pattern)
    except re.error as exc:
        raise PathRefused(f"invalid regular expression {pattern!r}: {exc}") from None
    return target, regex


async def grep(
    ws: Workspace, path_arg: str | None, pattern: str, glob: str | None, env: Mapping[str, str]
) -> list[str]:
    """Matching lines as `path:line: text` (more than `LIMIT` when there are more)."""
    target, regex = await run_blocking(prepare, ws, path_arg, pattern)
    rg = ripgrep()
    if rg is not None:
        return await _ripgrep(rg, ws, target, pattern, glob, env)
    return await run_blocking(_python_grep, ws, target, regex, glob, env)


class GrepFiles:
    name = NAME

    def default_config(self) -> ToolConfig:
        return tool_config(
            summary="Search the workspace's files for a regular expression.",
            description=(
                "Search the text files of the workspace (or of `path`, a folder or file) for "
                "lines matching the regular expression `pattern`; `glob` narrows the files "
                '(e.g. "*.py"). Each match is one line `path:line: text`; files ignored by '
                f".gitignore are skipped. At most {LIMIT} matches are shown."
            ),
            parameters={
                "pattern": {
                    "type": "string",
                    "required": True,
                    "description": "Regular expression to search for.",
                },
                "path": {
                    "type": "string",
                    "description": "Folder or file relative to the workspace (default: all).",
                },
                "glob": {"type": "string", "description": "Only files matching this glob."},
            },
            writes=False,
        )

    def inquiry_source(self) -> ev.ToolSource | ev.AssistantSource:
        return ev.ToolSource(name=self.name)

    async def run(
        self, arguments: dict[str, Any], answers: dict[str, Any], ctx: BuiltinContext
    ) -> ToolOutcome:
        pattern = string_arg(arguments, "pattern")
        if not pattern:
            return Failure(message="`pattern` is required")
        path, glob = string_arg(arguments, "path"), string_arg(arguments, "glob")
        found: list[str] = []
        try:
            with anyio.move_on_after(TIMEOUT) as scope:
                found = await grep(workspace(ctx), path, pattern, glob, ctx.env)
        except PathRefused as exc:
            return Failure(message=str(exc))
        if scope.cancelled_caught:
            return Failure(message="the search took too long; narrow it with `path` or `glob`")
        if not found:
            return Success(content=f"No matches for {pattern!r}.")
        if len(found) > MAX_LINES:  # the search stopped early: only a floor is known
            more = (
                f"... and more than {MAX_LINES - LIMIT} more matches (narrow with `path` or `glob`)"
            )
            return Success(content="\n".join([*found[:LIMIT], more]))
        return Success(content=capped(found, LIMIT, "matches"))
