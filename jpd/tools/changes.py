"""Every file a tool changes is recorded, and a turn's changes can be undone.

Before a tool writes, the file's old content goes to the conversation's `snapshots/`
folder under its sha256; after the write a `file_changed` event names the file and
both hashes. `undo_turn` reads those events back (so undo survives a restart), checks
that every file still holds what the turn left there, and only then restores them all:
a file someone changed since is named and nothing is touched.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from jpd.conversation import events as ev
from jpd.tools.confine import PathRefused, Workspace


def digest(data: bytes) -> str:
    import hashlib  # not a start-up import (protocol.md section 4, "Start-up")

    return hashlib.sha256(data).hexdigest()


class UndoRefused(Exception):
    """The turn's changes cannot be undone; the message says why, naming files."""


DELETED = ""
"""`file_changed` `after` of a file the turn deleted (a command did)."""


def keep(snapshots: Path, data: bytes) -> str:
    """Store `data` under its hash (durably, before the tool writes); returns the hash."""
    name = digest(data)
    target = snapshots / name
    if target.exists():
        return name
    snapshots.mkdir(parents=True, exist_ok=True, mode=0o700)
    temp = snapshots / f".{name}.{secrets.token_hex(4)}"
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temp, target)
    return name


@dataclass(frozen=True)
class ChangeRecorder:
    """Records the file changes of one tool call of a turn."""

    snapshots: Path
    record: Callable[[ev.Event], None]
    turn_id: str
    tool_call_id: str | None
    share: Callable[[], None] | None = None
    """In a fleet: makes the kept snapshot readable by the other members, before the
    file changes (a member taking over a turn cut mid-tool undoes the change)."""

    def write(self, workspace: Workspace, path: Path, before: bytes | None, after: bytes) -> None:
        """Keep `before`, write `after` to `path` (confined), record the change."""
        before_hash = keep(self.snapshots, before) if before is not None else None
        if before_hash is not None and self.share is not None:
            self.share()
        made = _missing_dirs(path.parent) if before is None else []
        workspace.write_file(path, after, create_dirs=before is None)
        self.record(
            ev.FileChanged(
                turn_id=self.turn_id,
                tool_call_id=self.tool_call_id,
                path=str(path),
                before=before_hash,
                after=digest(after),
                created_dirs=[str(folder) for folder in made] or None,
            )
        )


def _missing_dirs(folder: Path) -> list[Path]:
    """The folders of `folder`'s chain that do not exist yet, outermost first."""
    missing: list[Path] = []
    while not folder.exists() and folder != folder.parent:
        missing.append(folder)
        folder = folder.parent
    return missing[::-1]


def write_change(
    recorder: ChangeRecorder | None,
    workspace: Workspace,
    path: Path,
    before: bytes | None,
    after: bytes,
) -> None:
    """Write through `recorder` when there is one (a turn), else just write."""
    if recorder is not None:
        recorder.write(workspace, path, before, after)
    else:
        workspace.write_file(path, after, create_dirs=before is None)


@dataclass(frozen=True)
class Restore:
    """One file to put back: `before` None means remove it (the turn created it)."""

    path: Path
    before: str | None
    after: str
    created_dirs: tuple[str, ...] = ()


def turn_changes(events: Sequence[ev.Event], turn_id: str) -> list[Restore]:
    """The files `turn_id` changed, in the order first changed: each with its content
    before the turn's first change and after its last."""
    firsts: dict[str, ev.FileChanged] = {}
    lasts: dict[str, ev.FileChanged] = {}
    for event in events:
        if isinstance(event, ev.FileChanged) and event.turn_id == turn_id:
            firsts.setdefault(event.path, event)
            lasts[event.path] = event
    return [
        Restore(
            path=Path(p),
            before=firsts[p].before,
            after=lasts[p].after,
            created_dirs=tuple(firsts[p].created_dirs or ()),
        )
        for p in firsts
    ]


def last_changing_turn(events: Sequence[ev.Event]) -> str | None:
    """The latest turn that changed files (what `undo` without a turn means)."""
    for event in reversed(events):
        if isinstance(event, ev.FileChanged):
            return event.turn_id
    return None


def plan_undo(events: Sequence[ev.Event], turn_id: str) -> list[Restore]:
    """`turn_changes`, or `UndoRefused` if the turn changed nothing or is undone already."""
    if any(isinstance(e, ev.TurnUndone) and e.turn_id == turn_id for e in events):
        raise UndoRefused(f"turn {turn_id} is undone already")
    plan = turn_changes(events, turn_id)
    if not plan:
        raise UndoRefused(f"turn {turn_id} changed no files")
    return plan


def saved_text(snapshots: Path, ref: str | None) -> str | None:
    """The saved content `ref` as text (None: no content, the file was created)."""
    if ref is None:
        return None
    try:
        return (snapshots / ref).read_bytes().decode("utf-8", "replace")
    except OSError:
        return None


def _current(path: Path) -> str | None:
    workspace = Workspace((str(path.parent),))
    try:
        return digest(workspace.read_bytes(path))
    except PathRefused:
        return None


def _remove_empty(folders: Sequence[str]) -> list[str]:
    """Remove the folders a turn made (innermost first) that are empty again."""
    removed = []
    for folder in reversed(folders):
        try:
            os.rmdir(folder)  # only an empty folder; a symlink is refused (ENOTDIR)
        except OSError:
            break  # not empty (or gone): its parents are not empty either
        removed.append(folder + os.sep)
    return removed


def undo(plan: Sequence[Restore], snapshots: Path, turn_id: str) -> ev.TurnUndone:
    """Put every file of `plan` back, or none: files changed since the turn are named in
    `UndoRefused`. Returns the event to record. Blocking: run it in a worker thread."""
    changed = [
        str(r.path) for r in plan if _current(r.path) != (None if r.after == DELETED else r.after)
    ]
    if changed:
        raise UndoRefused(
            "changed since the turn, so not overwritten: "
            + ", ".join(changed)
            + "; undo nothing (restore or revert these by hand first)"
        )
    missing = [r.before for r in plan if r.before and not (snapshots / r.before).is_file()]
    if missing:
        raise UndoRefused(f"the saved copies are missing ({', '.join(missing)}); undo nothing")
    restored: list[str] = []
    removed: list[str] = []
    for item in plan:
        # The recorded folder (a real path when recorded) is the only root: a folder
        # swapped for a symlink since cannot redirect the restore.
        workspace = Workspace((str(item.path.parent),))
        if item.before is None:
            workspace.remove_file(item.path)
            removed.append(str(item.path))
            removed += _remove_empty(item.created_dirs)
        else:
            # A file a command deleted may have lost its folder too.
            data = (snapshots / item.before).read_bytes()
            workspace.write_file(item.path, data, create_dirs=item.after == DELETED)
            restored.append(str(item.path))
    return ev.TurnUndone(turn_id=turn_id, restored=restored, removed=removed)
