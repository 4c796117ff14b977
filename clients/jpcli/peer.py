"""Whom `jp` talks to: the daemon's socket, its folder and the process behind it must
be the user's own before `jp` sends anything (its environment goes with every turn).

A socket in a folder someone else can write to could be swapped for theirs; a socket
owned by someone else, or a peer process of another user (SO_PEERCRED), is theirs.
`expected_uid` is a parameter so that tests (which run as root) can check the refusal.
Standard library only.
"""

from __future__ import annotations

import os
import socket
import stat
import struct


def path_problem(path: str, expected_uid: int | None = None) -> str | None:
    """Why the socket file `path` or its folder is not the user's own, or None."""
    uid = os.geteuid() if expected_uid is None else expected_uid
    folder = os.path.dirname(os.path.abspath(path))
    try:
        info = os.lstat(path)
        folder_info = os.stat(folder)
    except OSError as exc:
        return f"cannot check {path}: {exc.strerror or exc}"
    if not stat.S_ISSOCK(info.st_mode):
        return f"{path} is not a socket"
    if info.st_uid != uid:
        return f"{path} belongs to uid {info.st_uid}, not {uid}"
    if folder_info.st_uid != uid:
        return f"its folder {folder} belongs to uid {folder_info.st_uid}, not {uid}"
    if folder_info.st_mode & 0o022:
        mode = stat.S_IMODE(folder_info.st_mode)
        return f"its folder {folder} can be written by other users (mode {mode:o})"
    return None


def peer_uid(sock: socket.socket) -> int | None:
    """The uid of the process at the other end (SO_PEERCRED); None where unsupported."""
    option = getattr(socket, "SO_PEERCRED", None)
    if option is None:
        return None
    creds = sock.getsockopt(socket.SOL_SOCKET, option, struct.calcsize("3i"))
    _pid, uid, _gid = struct.unpack("3i", creds)
    return int(uid)


def problem(sock: socket.socket, path: str, expected_uid: int | None = None) -> str | None:
    """Why the daemon connected on `sock` (at `path`) is not to be trusted, or None."""
    found = path_problem(path, expected_uid)
    if found is not None:
        return found
    uid = os.geteuid() if expected_uid is None else expected_uid
    peer = peer_uid(sock)
    if peer is not None and peer != uid:
        return f"the process serving {path} runs as uid {peer}, not {uid}"
    return None
