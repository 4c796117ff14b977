"""The files commands change, recorded like the workspace tools' edits so that
`turn/undo`, `turn/changes` and `jp turn diff` cover them (protocol.md 5.23).

Around a batch of tool calls that runs a command (`run_command`, a local tool), the
workspace's git working tree is snapshotted before and after (jpd/tools/git_snapshot.py);
every file that differs, and that no workspace tool of the batch recorded, gets a
`file_changed` event: its old content is kept in `snapshots/` as for an edit, and a file
the command deleted has `after: ""`. A workspace that is not in a git working tree (or
without git) is not watched: its commands' changes are not undoable.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import anyio

from jpd.conversation import events as ev
from jpd.tools import git_snapshot as gs
from jpd.tools.changes import DELETED, digest, keep

UNKNOWN = object()


@dataclass
class CommandChanges:
    """Watches one turn's workspace for changes made by commands."""

    root: Path
    env: Mapping[str, str]
    snapshots: Path
    record: Callable[[ev.Event], None]
    turn_id: str
    share: Callable[[], None] | None = None
    """In a fleet: shares the kept snapshots before their events are recorded."""
    recorded: set[str] = field(default_factory=set)
    """Files the workspace tools recorded meanwhile (their events say it already)."""
    _repo: object = UNKNOWN

    def _repository(self) -> gs.Repository | None:
        if self._repo is UNKNOWN:
            found = gs.repository(self.root, self.env)
            try:
                self._repo = gs.private(found, self.snapshots / "git", self.env) if found else None
            except gs.GitFailed:
                self._repo = None
        return self._repo if isinstance(self._repo, gs.Repository) else None

    async def before(self) -> str | None:
        """A snapshot before the batch (None: not watched)."""

        def take() -> str | None:
            repo = self._repository()
            if repo is None:
                return None
            try:
                return gs.snapshot(repo, self.env)
            except gs.GitFailed:
                return None

        self.recorded.clear()
        return await anyio.to_thread.run_sync(take)

    async def after(self, before: str) -> None:
        """Record what changed since `before`, besides what the workspace tools did."""
        await anyio.to_thread.run_sync(self._after, before)

    def _after(self, before: str) -> None:
        repo = self._repository()
        if repo is None:
            return
        try:
            after = gs.snapshot(repo, self.env)
            paths = gs.changed(repo, before, after, self.env)
        except gs.GitFailed:
            return
        changes: list[ev.Event] = []
        for name in paths:
            path = repo.top / name
            if str(path) in self.recorded:
                continue
            try:
                old = gs.content(repo, before, name, self.env)
                new = gs.content(repo, after, name, self.env)
            except gs.GitFailed:
                continue
            changes.append(
                ev.FileChanged(
                    turn_id=self.turn_id,
                    path=str(path),
                    before=keep(self.snapshots, old) if old is not None else None,
                    after=digest(new) if new is not None else DELETED,
                )
            )
        if changes and self.share is not None:
            self.share()  # the snapshots before the events that name them
        for change in changes:
            self.record(change)
