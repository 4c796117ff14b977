"""`fs_grep_files`: lines of workspace files matching a regular expression.

ripgrep does the search when it is on PATH (it honours `.gitignore` and skips binary
files itself); otherwise the files `fs_list_files` would list are searched in Python.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

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
                if len(found) > LIMIT * 5:
                    return found
    return found


def _ripgrep(
    rg: str, ws: Workspace, target: Path, pattern: str, glob: str | None, env: Mapping[str, str]
) -> list[str]:
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
    done = subprocess.run(
        command,
        cwd=ws.root,
        env=base_environment(env),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=120,
        check=False,
    )
    if done.returncode == 2:
        raise PathRefused(f"ripgrep failed: {done.stderr.decode('utf-8', 'replace').strip()}")
    found = []
    for raw in done.stdout.decode("utf-8", "replace").splitlines():
        path, _, rest = raw.partition("\0")  # --null: a NUL ends the path
        number, _, text = rest.partition(":")
        found.append(_line(path.removeprefix("./"), int(number or 0), text))
    return found


def ripgrep() -> str | None:
    """ripgrep's path, when it is on PATH."""
    return shutil.which("rg")


def grep(
    ws: Workspace,
    path_arg: str | None,
    pattern: str,
    glob: str | None,
    env: Mapping[str, str] | None = None,
) -> list[str]:
    """Matching lines as `path:line: text`. Blocking."""
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
    rg = ripgrep()
    if rg is not None:
        return _ripgrep(rg, ws, target, pattern, glob, env or {})
    return _python_grep(ws, target, regex, glob, env or {})


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
        try:
            found = await run_blocking(grep, workspace(ctx), path, pattern, glob, ctx.env)
        except PathRefused as exc:
            return Failure(message=str(exc))
        except subprocess.TimeoutExpired:
            return Failure(message="the search took too long; narrow it with `path` or `glob`")
        if not found:
            return Success(content=f"No matches for {pattern!r}.")
        return Success(content=capped(found, LIMIT, "matches"))
