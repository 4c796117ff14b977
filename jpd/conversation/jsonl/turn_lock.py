"""Which daemon runs a conversation's turn, and finding turns a stopped daemon left open.

While a turn runs, the daemon running it holds an exclusive `flock` on the
conversation's `turn.lock`. The kernel drops the lock when that process ends, however
it ends, so a turn without a `turn_end` whose lock can be taken was cut by a daemon
that stopped: it is safe to recover (protocol.md section 12.4). Two daemons on one data
dir never run turns in the same conversation at once.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

LOCK_FILE = "turn.lock"
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


def try_lock(directory: Path) -> TurnLock | None:
    """Take the turn lock of the conversation in `directory`; None if another holds it."""
    fd = os.open(directory / LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    except BaseException:
        os.close(fd)
        raise
    return TurnLock(fd)


def last_turn_is_open(log: Path) -> bool:
    """Whether the log's last `turn_start` (or `turn_resume`) has no `turn_end` after it.

    Reads the log backwards from its end, so checking a long conversation costs a
    chunk, not the whole file. Event lines are compact JSON, where these markers
    cannot appear inside a string (its quotes would be escaped).
    """
    try:
        with open(log, "rb") as fh:
            end = fh.seek(0, os.SEEK_END)
            position = end
            carry = b""
            while position > 0:
                start = max(0, position - _TAIL_CHUNK)
                fh.seek(start)
                chunk = fh.read(position - start) + carry
                last_start = max(chunk.rfind(_START), chunk.rfind(_RESUME))
                last_end = chunk.rfind(_END)
                if last_start != -1 or last_end != -1:
                    return last_start > last_end
                carry = chunk[: len(_RESUME)]
                position = start
    except FileNotFoundError:
        return False
    return False


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
