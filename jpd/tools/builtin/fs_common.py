"""What the workspace tools (`fs_*`) share: their config shape, the confined workspace
of a call, text decoding, and the file listing that honours `.gitignore`."""

from __future__ import annotations

import fnmatch
import os
import stat
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import anyio
from anyio.lowlevel import RunVar

from jpd.config.tools import ToolConfig
from jpd.tools.builtin import BuiltinContext
from jpd.tools.confine import Workspace
from jpd.tools.inert_git import run_git

T = TypeVar("T")

WRITE_LOCK = threading.Lock()
"""Held across read-modify-write of a file, so parallel calls of one batch that edit
the same file apply one after the other instead of losing an edit."""

MAX_FILE_BYTES = 10_000_000
"""Files larger than this are not read as text by any workspace tool."""

WORKER_THREADS = 8
"""Threads the workspace tools' blocking work may hold at once: their own pool, so that
calls stuck on a slow file system cannot starve the daemon's other worker threads."""

_LIMITER: RunVar[anyio.CapacityLimiter] = RunVar("jpd_fs_limiter")
"""One pool per event loop (a limiter belongs to the loop it was made in)."""


async def run_blocking(func: Callable[..., T], *args: Any, abandon: bool = True) -> T:
    """Run the blocking `func(*args)` in a workspace-tool worker thread.

    With `abandon` (readers), a cancelled call returns at once and the thread is left to
    finish on its own: `turn/cancel` always ends the turn. Writers keep `abandon=False`
    so that a change is either recorded or not made (their work is bounded)."""
    try:
        limiter = _LIMITER.get()
    except LookupError:
        limiter = anyio.CapacityLimiter(WORKER_THREADS)
        _LIMITER.set(limiter)
    return await anyio.to_thread.run_sync(func, *args, abandon_on_cancel=abandon, limiter=limiter)


def tool_config(
    *, summary: str, description: str, parameters: dict[str, dict[str, Any]], writes: bool
) -> ToolConfig:
    """A workspace tool's defaults: readers run unattended, writers ask first."""
    return ToolConfig.model_validate(
        {
            "source": "builtin",
            "summary": summary,
            "description": description,
            "parameters": parameters,
            "run": "ask" if writes else "unattended",
        }
    )


def workspace(ctx: BuiltinContext) -> Workspace:
    """The folders this call may use: the turn's workspace, `options.roots` and the
    client's additional directories."""
    return Workspace.of(ctx.root, ctx.options, ctx.extra_roots, ctx.umask)


def decode_text(data: bytes) -> str | None:
    """`data` as text, or None when it looks binary (a NUL byte, or not UTF-8)."""
    if b"\0" in data[:8192]:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def string_arg(arguments: dict[str, Any], name: str) -> str | None:
    value = arguments.get(name)
    return value if isinstance(value, str) else None


# --- listing -------------------------------------------------------------------------


def _git_files(folder: Path, root: Path, env: Mapping[str, str]) -> list[str] | None:
    """Files under `folder` (relative to it) as git sees them: tracked and untracked,
    ignored ones left out; None when `root` is not the top of a git work tree. git runs
    inert (jpd/tools/inert_git.py): nothing of the repository's config executes."""
    done = run_git(
        ["ls-files", "-z", "--cached", "--others", "--exclude-standard", "--", "."],
        workspace=root,
        cwd=folder,
        env=env,
    )
    if done is None or done.returncode != 0:
        return None
    names = {n for n in done.stdout.decode("utf-8", "surrogateescape").split("\0") if n}
    # --cached also lists files deleted from the work tree.
    return sorted(n for n in names if os.path.lexists(folder / n))


def _read_small(path: str, limit: int = 1_000_000) -> str:
    """A small regular file's text; a FIFO or device (which could block) is an OSError."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{path} is not a regular file")
        return handle.read(limit).decode("utf-8")


class _Ignores:
    """A simple reading of `.gitignore` files (no negation) for folders outside git."""

    def __init__(self) -> None:
        self._rules: list[tuple[str, str, bool]] = []  # (base, pattern, folders only)

    def load(self, folder: str, base: str) -> None:
        try:
            lines = _read_small(os.path.join(folder, ".gitignore")).splitlines()
        except (OSError, UnicodeDecodeError):
            return
        for line in lines:
            line = line.strip()
            if not line or line.startswith(("#", "!")):
                continue
            only_dirs = line.endswith("/")
            self._rules.append((base, line.strip("/"), only_dirs))

    def ignored(self, relative: str, is_dir: bool) -> bool:
        name = relative.rsplit("/", 1)[-1]
        for base, pattern, only_dirs in self._rules:
            if only_dirs and not is_dir:
                continue
            if base and not relative.startswith(base + "/"):
                continue
            inner = relative[len(base) + 1 :] if base else relative
            if "/" in pattern:
                if fnmatch.fnmatchcase(inner, pattern):
                    return True
            elif fnmatch.fnmatchcase(name, pattern):
                return True
        return False


def _walk_files(folder: Path) -> list[str]:
    """Files under `folder` (relative to it), skipping `.git` and `.gitignore`d ones;
    symlinked folders are not entered."""
    ignores = _Ignores()
    found: list[str] = []
    for current, dirs, files in os.walk(folder, followlinks=False):
        base = os.path.relpath(current, folder)
        base = "" if base == "." else base.replace(os.sep, "/")
        ignores.load(current, base)
        keep = []
        for d in sorted(dirs):
            rel = f"{base}/{d}" if base else d
            if d != ".git" and not ignores.ignored(rel, True):
                keep.append(d)
        dirs[:] = keep
        for f in files:
            rel = f"{base}/{f}" if base else f
            if not ignores.ignored(rel, False):
                found.append(rel)
    return sorted(found)


def list_files(
    folder: Path,
    pattern: str | None = None,
    *,
    root: Path | None = None,
    env: Mapping[str, str] | None = None,
) -> list[str]:
    """Files under `folder`, relative to it, `.gitignore`d ones left out; with
    `pattern`, those whose path or name matches that glob. git's rules apply when
    `root` (the workspace root holding `folder`) is the top of a repository; `env` is
    the tool environment git sees (allow-listed again). Blocking."""
    names: list[str] | None
    if folder.is_file():
        names = [folder.name]
    else:
        names = _git_files(folder, root, env or {}) if root is not None else None
        if names is None:
            names = _walk_files(folder)
    if pattern:
        names = [
            n
            for n in names
            if fnmatch.fnmatchcase(n, pattern) or fnmatch.fnmatchcase(n.rsplit("/", 1)[-1], pattern)
        ]
    return names


def root_of(ws: Workspace, real: Path) -> Path:
    """The allowed root `real` lies in (the workspace when in several)."""
    text = str(real)
    for root in ws.roots:
        if text == root or text.startswith(root.rstrip(os.sep) + os.sep):
            return Path(root)
    return ws.root


def capped(lines: list[str], limit: int, what: str) -> str:
    """`lines` joined, at most `limit` of them, then a line saying how many more."""
    shown = lines[:limit]
    more = len(lines) - len(shown)
    if more > 0:
        shown.append(f"... and {more} more {what} (narrow with `path` or a pattern)")
    return "\n".join(shown)


def unified_diff(shown: str, before: str | None, after: str) -> str:
    """The change from `before` (None: a new file) to `after` as a unified diff."""
    import difflib

    old = (before or "").splitlines(keepends=True)
    new = after.splitlines(keepends=True)
    lines = difflib.unified_diff(
        old, new, "/dev/null" if before is None else f"a/{shown}", f"b/{shown}"
    )
    return "".join(
        line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines
    )
