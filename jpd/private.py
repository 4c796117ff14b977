"""Private by default (protocol.md section 13, "Permissions"): what the daemon writes is
readable by its user only, and it never serves from a directory another user controls.
"""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

log = logging.getLogger(__name__)

PRIVATE_UMASK = 0o077
"""New files 0600, new directories 0700."""


def restrict_umask() -> int:
    """Set the process umask to `PRIVATE_UMASK`; returns the previous one (for tools)."""
    return os.umask(PRIVATE_UMASK)


def make_private_dir(directory: Path) -> None:
    """Create `directory` (and missing parents) with mode 0700, and narrow an existing one
    that we own to 0700: it holds every question and answer ever recorded.

    Raises `OSError` when it cannot be created.
    """
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    info = os.stat(directory)
    if info.st_uid != os.getuid():
        log.warning("%s is owned by uid %d; leaving its mode as it is", directory, info.st_uid)
    elif stat.S_IMODE(info.st_mode) & 0o077:
        log.info("narrowing %s to mode 0700", directory)
        os.chmod(directory, 0o700)


def socket_dir_problem(info: os.stat_result, uid: int) -> str | None:
    """Why a directory described by `info` is not safe for user `uid` to keep a socket
    in, or None: owned by another user (root excepted: root can read everything anyway),
    or writable by everyone without the sticky bit (anyone could replace the socket).
    """
    if info.st_uid not in (uid, 0):
        return f"is owned by another user (uid {info.st_uid})"
    if info.st_mode & stat.S_IWOTH and not info.st_mode & stat.S_ISVTX:
        return "is writable by other users (and not sticky)"
    return None
