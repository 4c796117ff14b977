"""The Unix socket's path and this daemon's claim on it (protocol.md 2.1).

The socket's directory is created 0700 (one another user controls is refused) and the
socket itself is 0600, so only its owner can connect. One daemon per socket: a lock on
the pid file beside the socket (held for the daemon's life) decides between two daemons
starting at once, and a socket file left by a dead daemon (nobody accepts on it) is
replaced, while one that answers makes the newcomer give up with a clear message.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import logging
import os
import socket
import stat
import warnings
from collections.abc import Mapping
from pathlib import Path

import anyio
import anyio.abc
import platformdirs

from jpd.private import socket_dir_problem

log = logging.getLogger(__name__)

SOCKET_NAME = "jpd.sock"
_PROBE_TIMEOUT = 2.0  # seconds a live daemon has to accept a probe connection


class ListenError(Exception):
    """The daemon cannot listen on this socket; the message is one line for the user."""


class SocketInUse(ListenError):
    """Another daemon is serving this socket."""


def default_socket_path(env: Mapping[str, str]) -> Path:
    """`$JP_SOCKET`, else `platformdirs.user_runtime_dir("jp")/jpd.sock`: one daemon per
    data dir, so a `$JP_DATA_DIR` other than the default gets `jpd-<hash>.sock`
    (protocol.md 2.1)."""
    override = env.get("JP_SOCKET", "").strip()
    if override:
        return Path(override)
    with warnings.catch_warnings():
        # platformdirs warns when it falls back from XDG_RUNTIME_DIR; the path is what counts.
        warnings.simplefilter("ignore")
        runtime = Path(platformdirs.user_runtime_dir("jp"))
        default_data = platformdirs.user_data_dir("jp")
    return runtime / socket_name(env.get("JP_DATA_DIR", ""), default_data)


def socket_name(data_dir: str, default_data_dir: str) -> str:
    """`jpd.sock` for the default data dir, else `jpd-<12 hex of sha256(abs path)>.sock`."""
    if not data_dir.strip():
        return SOCKET_NAME
    path = os.path.abspath(os.path.expanduser(data_dir))
    if path == os.path.abspath(default_data_dir):
        return SOCKET_NAME
    return f"jpd-{hashlib.sha256(path.encode()).hexdigest()[:12]}.sock"


def pid_path(socket_path: Path) -> Path:
    """The pid (and lock) file beside a socket: `jpd.sock` -> `jpd.pid`."""
    if socket_path.suffix and socket_path.suffix != ".pid":
        return socket_path.with_suffix(".pid")
    return socket_path.with_name(socket_path.name + ".pid")


def _read_pid(path: Path) -> str:
    try:
        return path.read_text().strip() or "?"
    except OSError:
        return "?"


def _probe(path: Path) -> bool:
    """True if something accepts connections on `path` (blocking; run in a thread)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        probe.settimeout(_PROBE_TIMEOUT)
        try:
            probe.connect(str(path))
        except (ConnectionRefusedError, FileNotFoundError):
            return False
        except TimeoutError:
            return True  # a backlog so full it cannot accept: alive, and busy
        return True


class SocketClaim:
    """This daemon's hold on a socket path: the locked pid file, then the socket."""

    def __init__(self, path: Path, pid_fd: int) -> None:
        self.path = path
        self.pid_file = pid_path(path)
        self._pid_fd = pid_fd
        self._socket_inode: int | None = None

    @classmethod
    async def acquire(cls, path: Path) -> SocketClaim:
        """Lock the pid file and clear a stale socket; raises `ListenError`."""
        return await anyio.to_thread.run_sync(cls._acquire, path)

    @classmethod
    def _acquire(cls, path: Path) -> SocketClaim:
        path = Path(os.path.abspath(path))
        _make_private_dir(path.parent)
        claim = cls(path, _lock_pid_file(pid_path(path), path))
        try:
            claim._clear_stale_socket()
            os.ftruncate(claim._pid_fd, 0)
            os.pwrite(claim._pid_fd, f"{os.getpid()}\n".encode(), 0)
        except BaseException:
            claim.release()
            raise
        return claim

    def _clear_stale_socket(self) -> None:
        try:
            info = os.lstat(self.path)
        except FileNotFoundError:
            return
        if not stat.S_ISSOCK(info.st_mode):
            raise ListenError(f"{self.path} exists and is not a socket; remove it or pick a path")
        try:
            alive = _probe(self.path)
        except OSError as exc:
            raise ListenError(f"cannot check socket {self.path}: {exc.strerror}") from None
        if alive:
            raise SocketInUse(f"another daemon is already listening on {self.path}")
        log.info("replacing stale socket %s", self.path)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)

    async def bind(self) -> anyio.abc.SocketListener:
        """Create the listening socket with mode 0600 (never wider, even for a moment)."""
        previous = os.umask(0o177)  # only at start-up, before any other file is created
        try:
            listener = await anyio.create_unix_listener(self.path, mode=0o600)
        except OSError as exc:
            raise ListenError(f"cannot listen on {self.path}: {exc.strerror or exc}") from None
        finally:
            os.umask(previous)
        self._socket_inode = os.stat(self.path).st_ino
        return listener

    def release(self) -> None:
        """Remove our socket and pid file, then drop the lock."""
        if self._pid_fd < 0:
            return
        if self._socket_inode is not None:
            with contextlib.suppress(OSError):
                if os.stat(self.path).st_ino == self._socket_inode:
                    os.unlink(self.path)
        with contextlib.suppress(OSError):
            os.unlink(self.pid_file)
        os.close(self._pid_fd)  # closing releases the lock
        self._pid_fd = -1


def _make_private_dir(directory: Path) -> None:
    """Create the missing levels of the socket directory with mode 0700 (existing ones
    are left as they are: a custom path may live in a shared directory), and refuse one
    that another user controls."""
    missing: list[Path] = []
    level = directory
    while not level.is_dir():
        missing.append(level)
        if level.parent == level:
            break
        level = level.parent
    for level in reversed(missing):
        try:
            level.mkdir(mode=0o700)
            os.chmod(level, 0o700)  # mkdir's mode is narrowed by the umask, never widened
        except FileExistsError:
            pass
        except OSError as exc:
            raise ListenError(f"cannot create socket directory {level}: {exc.strerror}") from None
    try:
        problem = socket_dir_problem(os.stat(directory), os.getuid())
    except OSError as exc:
        raise ListenError(f"cannot check socket directory {directory}: {exc.strerror}") from None
    if problem is not None:
        # Whoever controls the directory could swap our socket for theirs (protocol.md 2.1).
        raise ListenError(f"refusing socket directory {directory}: it {problem}")


def _lock_pid_file(pid_file: Path, socket_path: Path) -> int:
    """Open and lock the pid file; raises `SocketInUse` if another daemon holds it."""
    for _ in range(5):
        try:
            fd = os.open(pid_file, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        except OSError as exc:
            raise ListenError(f"cannot open pid file {pid_file}: {exc.strerror}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno not in (errno.EAGAIN, errno.EWOULDBLOCK, errno.EACCES):
                raise ListenError(f"cannot lock pid file {pid_file}: {exc.strerror}") from None
            raise SocketInUse(
                f"another jpd (pid {_read_pid(pid_file)}) is already serving {socket_path}"
            ) from None
        # The previous owner may have unlinked the file between our open and our lock;
        # a lock on an unlinked file guards nothing, so start again on the new one.
        try:
            if os.stat(pid_file).st_ino == os.fstat(fd).st_ino:
                return fd
        except FileNotFoundError:
            pass
        os.close(fd)
    raise ListenError(f"cannot lock pid file {pid_file}: it keeps changing")
