"""The socket claim of `jpd --listen`: pid-file lock, stale and live sockets, modes."""

from __future__ import annotations

import os
import socket
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from jpd.rpc.listener import (
    ListenError,
    SocketClaim,
    SocketInUse,
    default_socket_path,
    pid_path,
)


def exists(path: Path) -> bool:
    return path.exists()


@pytest.fixture
def sock_path(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path / "run" / "jpd.sock"


def test_pid_path_sits_beside_the_socket() -> None:
    assert pid_path(Path("/r/jpd.sock")) == Path("/r/jpd.pid")
    assert pid_path(Path("/r/socket")) == Path("/r/socket.pid")
    assert pid_path(Path("/r/x.pid")) == Path("/r/x.pid.pid")  # never the socket itself


def test_default_socket_path() -> None:
    assert default_socket_path({"JP_SOCKET": "/x/y.sock"}) == Path("/x/y.sock")
    default = default_socket_path({})
    assert default.name == "jpd.sock" and default.parent.name == "jp"


async def test_claim_writes_pid_creates_private_dirs_and_release_cleans_up(
    sock_path: Path,
) -> None:
    claim = await SocketClaim.acquire(sock_path)
    try:
        assert claim.pid_file.read_text() == f"{os.getpid()}\n"
        assert stat.S_IMODE(os.stat(sock_path.parent).st_mode) == 0o700
        listener = await claim.bind()
        assert stat.S_ISSOCK(os.stat(sock_path).st_mode)
        assert stat.S_IMODE(os.stat(sock_path).st_mode) == 0o600
        await listener.aclose()
    finally:
        claim.release()
    assert not exists(sock_path) and not exists(claim.pid_file)
    claim.release()  # idempotent


async def test_second_claim_is_refused_while_the_first_holds_the_lock(sock_path: Path) -> None:
    first = await SocketClaim.acquire(sock_path)
    try:
        with pytest.raises(SocketInUse, match=rf"another jpd \(pid {os.getpid()}\)"):
            await SocketClaim.acquire(sock_path)
        assert first.pid_file.read_text() == f"{os.getpid()}\n"  # untouched
    finally:
        first.release()
    (await SocketClaim.acquire(sock_path)).release()  # free again


async def test_stale_socket_is_removed(sock_path: Path) -> None:
    sock_path.parent.mkdir(mode=0o700)
    with socket.socket(socket.AF_UNIX) as dead:
        dead.bind(str(sock_path))  # bound, never listening: nobody answers
    claim = await SocketClaim.acquire(sock_path)
    try:
        assert not exists(sock_path)
    finally:
        claim.release()


async def test_live_socket_is_refused_and_kept(sock_path: Path) -> None:
    sock_path.parent.mkdir(mode=0o700)
    with socket.socket(socket.AF_UNIX) as live:
        live.bind(str(sock_path))
        live.listen()
        with pytest.raises(SocketInUse, match="already listening"):
            await SocketClaim.acquire(sock_path)
        assert exists(sock_path)
    assert not exists(pid_path(sock_path))  # the refused claim left nothing behind


async def test_a_regular_file_is_never_replaced(tmp_path: Path) -> None:
    (tmp_path / "jpd.sock").write_text("data")
    with pytest.raises(ListenError, match="is not a socket"):
        await SocketClaim.acquire(tmp_path / "jpd.sock")
    assert (tmp_path / "jpd.sock").read_text() == "data"


async def test_an_existing_socket_directory_keeps_its_mode(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o755)
    os.chmod(shared, 0o755)
    claim = await SocketClaim.acquire(shared / "jpd.sock")
    claim.release()
    assert stat.S_IMODE(os.stat(shared).st_mode) == 0o755


async def test_unusable_directory_is_a_clear_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(ListenError, match="cannot create socket directory"):
        await SocketClaim.acquire(blocker / "sub" / "jpd.sock")
