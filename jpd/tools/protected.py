"""Protected paths: what a workspace tool never writes without the user saying so.

A file under a folder named `.git`, `.jp`, `.vscode` or `.idea` (at any depth of any
allowed root: a nested repository's `.git` too) configures programs the user runs
later (git hooks and `core.fsmonitor`, jp's own config, editor tasks), so a write there
is a way out of the cage. Writes to them ask permission in every permission mode
(`auto` and `accept-edits` included) and whatever the tool's `run` setting; an answer
is remembered for that one path only; a turn no client can answer for never writes
them (protocol.md 9.8). The list is `conversation.protected_paths.names`; globs in
`conversation.protected_paths.allow` (relative to the root, e.g. `.vscode/settings.json`)
are written as any other file.
"""

from __future__ import annotations

import fnmatch
import os
from dataclasses import dataclass, field
from pathlib import Path

from jpd.config.config import ProtectedPathsConfig
from jpd.tools.confine import PathRefused, Workspace

WRITE_TOOLS = {"fs_create_file": "path", "fs_modify_file": "path"}
"""The built-ins that write files, and the argument naming the file."""


@dataclass(frozen=True)
class ProtectedPaths:
    """`conversation.protected_paths` applied to one call's workspace."""

    names: frozenset[str]
    allow: tuple[str, ...] = ()

    @classmethod
    def of(cls, config: ProtectedPathsConfig) -> ProtectedPaths:
        return cls(frozenset(config.names), tuple(config.allow))

    @classmethod
    def default(cls) -> ProtectedPaths:
        return cls.of(ProtectedPathsConfig())

    def relative(self, ws: Workspace, real: Path) -> str | None:
        """`real` relative to the allowed root holding it (the innermost), or None."""
        text = str(real)
        best: str | None = None
        for root in ws.roots:
            if text == root or text.startswith(root.rstrip(os.sep) + os.sep):
                rel = os.path.relpath(text, root)
                if best is None or len(rel) < len(best):
                    best = rel
        return best

    def protected(self, ws: Workspace, real: Path) -> str | None:
        """The path shown to the user when the real path `real` is protected, else None."""
        rel = self.relative(ws, real)
        if rel is None:
            return None
        parts = Path(rel).parts
        # The file itself may be named so too (a `.jp` file replacing the folder).
        if not any(part in self.names for part in parts):
            return None
        if any(fnmatch.fnmatchcase(rel, pattern) for pattern in self.allow):
            return None
        return rel


@dataclass(frozen=True)
class ProtectedGuard:
    """Checked by a writing tool just before it writes: a protected path is written
    only when this call was allowed to write that very path."""

    paths: ProtectedPaths
    approved: frozenset[str] = field(default_factory=frozenset)
    """Real paths the user allowed this call to write."""

    def check(self, ws: Workspace, real: Path) -> None:
        shown = self.paths.protected(ws, real)
        if shown is not None and str(real) not in self.approved:
            raise PathRefused(
                f"{shown!r} is a protected path ({', '.join(sorted(self.paths.names))}): "
                "it changed since the user was asked, so nothing was written"
            )


def write_target(tool_name: str, arguments: dict[str, object], ws: Workspace) -> Path | None:
    """The real path of the file a writing built-in call names; None for another tool
    or a path the tool itself will refuse."""
    argument = WRITE_TOOLS.get(tool_name)
    if argument is None:
        return None
    value = arguments.get(argument)
    if not isinstance(value, str) or not value:
        return None
    try:
        real = ws.resolve(value)
    except PathRefused:
        return None
    return real
