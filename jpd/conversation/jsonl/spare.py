"""A new conversation's directory and empty log (`ConversationStore.create`): made at
once (`create_new`), or renamed from a spare made ahead in a worker thread (`Spare`).

Creating a directory and a file costs 150-1,000 µs of kernel time each on a filesystem
that allocates inodes slowly (ext4 without a journal, after deletions), and a new
conversation's were made on the event loop on the way to its first model request. A
rename allocates nothing. The spare is `<data dir>/spare/<pid>-<random>`, out of the
conversations' directory (which holds conversations only); one a killed daemon left is
removed by the next daemon that makes one. Where the two directories are on different
filesystems (a link), the rename fails and no spare is made again.

Blocking file I/O: `make` and `clear_stale` from a worker thread; `take` is one rename.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import secrets
import shutil
import threading

from jpd.conversation.paths import EVENTS_FILE
from jpd.conversation.port import ConversationExists

log = logging.getLogger(__name__)

CREATE_LOG = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND | getattr(os, "O_CLOEXEC", 0)
"""A new log: its creation fails if one exists (`ConversationExists`)."""


def create_new(directory: str) -> int:
    """A new conversation's directory and log, without a spare; its log's fd. Raises
    `ConversationExists` if it has a log."""
    try:
        os.mkdir(directory)  # one system call when it is new (it is, nearly always)
    except FileExistsError:
        pass  # a directory without a log (a crash mid-create) is created over
    except FileNotFoundError:
        os.makedirs(directory, exist_ok=True)  # the data dir's first conversation
    try:
        return os.open(os.path.join(directory, EVENTS_FILE), CREATE_LOG, 0o666)
    except FileExistsError:
        cid = os.path.basename(directory)
        raise ConversationExists(f"conversation already exists: {cid}") from None


class Spare:
    """At most one spare directory at a time, in `directory`."""

    def __init__(self, directory: str) -> None:
        self._dir = directory
        self._usable = True
        """False once a rename found the conversations on another filesystem."""
        self._lock = threading.Lock()
        self._ready: tuple[str, int] | None = None
        """The spare's path and its log's open fd."""
        self._cleared = False

    def make(self) -> None:
        """Make a spare if none is ready (in a worker thread)."""
        with self._lock:
            if self._ready is not None or not self._usable:
                return
        if not self._cleared:
            self._cleared = True
            os.makedirs(self._dir, mode=0o700, exist_ok=True)
            self.clear_stale()
        path = os.path.join(self._dir, f"{os.getpid()}-{secrets.token_hex(4)}")
        os.mkdir(path)
        try:
            fd = os.open(os.path.join(path, EVENTS_FILE), CREATE_LOG, 0o666)
        except OSError:
            os.rmdir(path)
            raise
        with self._lock:
            if self._ready is None:
                self._ready = (path, fd)
                return
        _remove(path, fd)  # another thread made one meanwhile

    def take(self, target: str) -> int | None:
        """Rename the spare to `target` (a new conversation's directory, or an empty one a
        crash left); its log's fd, or None: no spare, or `target` holds files (the caller
        creates the conversation as without a spare, which tells an existing one)."""
        with self._lock:
            ready, self._ready = self._ready, None
        if ready is None:
            return None
        path, fd = ready
        try:
            os.rename(path, target)  # over an empty directory too: atomic, as mkdir
        except OSError as exc:
            if exc.errno == errno.EXDEV:  # never usable: no spare made again
                self._usable = False
            elif exc.errno not in (errno.ENOTEMPTY, errno.EEXIST, errno.ENOTDIR):
                log.warning("could not use the spare conversation directory: %s", exc)
            with self._lock:
                if self._ready is None and self._usable:
                    self._ready, ready = ready, None  # kept for the next new conversation
            if ready is not None:
                _remove(path, fd)
            return None
        return fd

    def discard(self) -> None:
        """Remove the spare (the store closes)."""
        with self._lock:
            ready, self._ready = self._ready, None
        if ready is not None:
            _remove(*ready)

    def clear_stale(self) -> None:
        """Remove the spares of daemons that are gone (killed before removing theirs)."""
        try:
            names = os.listdir(self._dir)
        except OSError:
            return
        for name in names:
            pid_text = name.partition("-")[0]
            if not pid_text.isdigit() or not _alive(int(pid_text)):
                shutil.rmtree(os.path.join(self._dir, name), ignore_errors=True)


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True  # another store of this process (tests run several daemons)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _remove(path: str, fd: int) -> None:
    with contextlib.suppress(OSError):
        os.close(fd)
    shutil.rmtree(path, ignore_errors=True)
