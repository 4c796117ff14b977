"""`jp` refuses a daemon socket that is not the user's own (clients/jpcli/peer.py):
a socket or folder of another uid, a folder others can write to, a peer process of
another uid (SO_PEERCRED), before it sends anything."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from jpcli import peer
from jpcli.daemon import DaemonError, SocketDaemon

OTHER = 65534  # nobody
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to chown to another uid")


@pytest.fixture
def listening(tmp_path: Path) -> Iterator[tuple[Path, list[bytes]]]:
    """A Unix socket server in a private folder, recording what it receives."""
    folder = tmp_path / "run"
    folder.mkdir(mode=0o700)
    path = folder / "jpd.sock"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen()
    server.settimeout(0.2)
    received: list[bytes] = []
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with conn:
                conn.settimeout(1)
                try:
                    data = conn.recv(65536)
                except OSError:
                    data = b""
                if data:
                    received.append(data)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield path, received
    stop.set()
    server.close()
    thread.join(5)


def test_the_users_own_socket_passes(listening: tuple[Path, list[bytes]]) -> None:
    path, _ = listening
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.connect(str(path))
        assert peer.problem(sock, str(path)) is None
        assert peer.peer_uid(sock) == os.geteuid()


def test_another_expected_uid_is_refused(listening: tuple[Path, list[bytes]]) -> None:
    path, _ = listening
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.connect(str(path))
        found = peer.problem(sock, str(path), expected_uid=os.geteuid() + 1)
    assert found is not None and "belongs to uid" in found


@pytest.mark.parametrize("mode", [0o777, 0o770, 0o722, 0o702])
def test_a_folder_others_can_write_is_refused(
    listening: tuple[Path, list[bytes]], mode: int
) -> None:
    path, _ = listening
    path.parent.chmod(mode)
    assert "can be written by other users" in (peer.path_problem(str(path)) or "")


def test_not_a_socket_is_refused(tmp_path: Path) -> None:
    plain = tmp_path / "jpd.sock"
    plain.write_text("")
    tmp_path.chmod(0o700)
    assert "not a socket" in (peer.path_problem(str(plain)) or "")
    assert "cannot check" in (peer.path_problem(str(tmp_path / "missing")) or "")


@as_root
def test_jp_sends_nothing_to_a_socket_of_another_user(
    listening: tuple[Path, list[bytes]],
) -> None:
    path, received = listening
    os.chown(path, OTHER, OTHER)
    daemon = SocketDaemon(environ={"JP_SOCKET": str(path)}, autostart=False, workspace_root="/")
    with pytest.raises(DaemonError, match=r"refusing to talk to jpd.*belongs to uid 65534"):
        daemon.start()
    assert received == []  # refused before anything was sent


@as_root
def test_jp_refuses_a_folder_of_another_user(listening: tuple[Path, list[bytes]]) -> None:
    path, _ = listening
    os.chown(path.parent, OTHER, OTHER)
    found = peer.path_problem(str(path))
    assert found is not None and "its folder" in found and "65534" in found


@as_root
def test_jp_refuses_a_peer_process_of_another_user() -> None:
    """The socket file is ours, but the process behind it runs as another uid."""
    # Under the system temp dir: the other user must reach the folder to bind there.
    folder = Path(tempfile.mkdtemp(prefix="jp-peer-"))
    folder.chmod(0o777)
    path = folder / "jpd.sock"
    # A forked child, not a new interpreter: the other user may not reach this venv's
    # Python (root's home is 0700 on many machines).
    ready_r, ready_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            os.setgid(OTHER)
            os.setuid(OTHER)
            server = socket.socket(socket.AF_UNIX)
            server.bind(str(path))
            server.listen()
            os.write(ready_w, b"r")
            server.accept()
            time.sleep(5)
        finally:
            os._exit(0)
    os.close(ready_w)
    try:
        assert os.read(ready_r, 1) == b"r"
        os.chown(path, 0, 0)
        folder.chmod(0o700)
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.connect(str(path))
            assert peer.peer_uid(sock) == OTHER
            found = peer.problem(sock, str(path))
        assert found is not None and "runs as uid 65534" in found
    finally:
        os.close(ready_r)
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        shutil.rmtree(folder, ignore_errors=True)
