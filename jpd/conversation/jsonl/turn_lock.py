"""Which daemon runs a conversation's turn, and finding turns a stopped daemon left open.

While a turn runs, the daemon running it holds an exclusive `flock` on the
conversation's log, `events.jsonl` (a descriptor of its own, opened read-only: the
log's append handle comes and goes, and an `flock` belongs to the descriptor that took
it). The kernel drops the lock when that process ends, however it ends, so a turn
without a `turn_end` whose lock can be taken was cut by a daemon that stopped: it is
safe to recover (protocol.md section 12.4). Two daemons on one data dir never run turns
in the same conversation at once. The log is the lock's file because it exists already
and is never replaced: a lock file of its own cost a file creation per new conversation
(a quarter of a millisecond of CPU on the benched machine). Daemons before this one
locked `turn.lock`; a file of that name left in a conversation's folder is not used.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Callable, Iterator
from pathlib import Path

from jpd.conversation import events as ev
from jpd.conversation.paths import EVENTS_FILE

_TAIL_CHUNK = 64 * 1024
_START = b'"type":"turn_start"'
_END = b'"type":"turn_end"'
_RESUME = b'"type":"turn_resume"'


class TurnLock:
    """A held turn lock; `release` (or the process ending) gives it back."""

    def __init__(self, fd: int) -> None:
        self._fd: int | None = fd

    def release(self) -> None:
        """Give the lock back (idempotent)."""
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None

    def on_lost(self, callback: Callable[[], None]) -> None:
        """A `flock` held by a live process is never lost: `callback` is not called."""

    @property
    def seq_floor(self) -> None:
        """Seqs are this daemon's (its seq marks)."""
        return None

    def track_seqs(self, next_seq: Callable[[], int]) -> None:
        """Nothing to record."""


def try_lock(directory: Path) -> TurnLock | None:
    """Take the turn lock of the conversation in `directory`; None if another holds it.
    Raises `FileNotFoundError` when the conversation has no log."""
    fd = os.open(directory / EVENTS_FILE, os.O_RDONLY | os.O_CLOEXEC)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    except BaseException:
        os.close(fd)
        raise
    return TurnLock(fd)


def reverse_lines(log: Path) -> Iterator[bytes]:
    """The log's lines, last first, read backwards a chunk at a time (none if absent)."""
    try:
        fh = open(log, "rb")  # noqa: SIM115 - a generator keeps it open while iterated
    except FileNotFoundError:
        return
    with fh:
        position = fh.seek(0, os.SEEK_END)
        rest = b""
        while position > 0:
            start = max(0, position - _TAIL_CHUNK)
            fh.seek(start)
            lines = (fh.read(position - start) + rest).split(b"\n")
            position = start
            rest = lines.pop(0)
            for line in reversed(lines):
                if line.strip():
                    yield line
        if rest.strip():
            yield rest


def interrupted_turn(log_file: Path) -> ev.TurnStart | None:
    """The `turn_start` of the log's last turn when that turn ended `interrupted` (it can
    be resumed, protocol.md 12.4), else None. Reads the log backwards: a tail read."""
    return last_turn(log_file)[1]


def last_turn(log_file: Path) -> tuple[bool, ev.TurnStart | None]:
    """One tail read of the log's last turn: (open, resumable start). Open: no `turn_end`
    after its start (or its latest `turn_resume`). Resumable start: its `turn_start` when
    it ended `interrupted`, else None."""
    ended = False
    for line in reverse_lines(log_file):
        if _END in line:
            if not ended and b'"stop_reason":"interrupted"' not in line:
                return False, None
            ended = True
        elif _RESUME in line and not ended:
            return True, None  # running, or not recovered yet
        elif _START in line:
            if not ended:
                return True, None
            try:
                event = ev.parse_event(line)
            except ValueError:
                return False, None
            return False, event if isinstance(event, ev.TurnStart) else None
    return False, None
