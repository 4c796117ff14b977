"""The socket claim of `jpd --listen`: pid-file lock, stale and live sockets, modes."""

from __future__ import annotations

import os
import socket
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from jpd.private import make_private_dir, socket_dir_problem
from jpd.rpc.socket_claim import (
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


def _stat(uid: int, mode: int) -> os.stat_result:
    return os.stat_result((mode, 0, 0, 1, uid, 0, 0, 0, 0, 0))


def test_socket_dir_problem_names_foreign_and_world_writable_dirs() -> None:
    me = 1000
    assert socket_dir_problem(_stat(me, stat.S_IFDIR | 0o700), me) is None
    assert socket_dir_problem(_stat(0, stat.S_IFDIR | 0o1777), me) is None  # /tmp
    assert socket_dir_problem(_stat(me, stat.S_IFDIR | 0o775), me) is None
    assert "owned by another user (uid 1001)" in str(
        socket_dir_problem(_stat(1001, stat.S_IFDIR | 0o700), me)
    )
    assert "writable by other users" in str(socket_dir_problem(_stat(me, stat.S_IFDIR | 0o777), me))


async def test_a_world_writable_socket_directory_is_refused(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)
    with pytest.raises(ListenError, match=r"refusing socket directory .*writable by other"):
        await SocketClaim.acquire(shared / "jpd.sock")
    assert not exists(shared / "jpd.pid")


@pytest.mark.skipif(os.getuid() != 0, reason="needs root to give a directory to another user")
async def test_a_socket_directory_owned_by_another_user_is_refused(tmp_path: Path) -> None:
    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o755)
    os.chown(theirs, 65534, 65534)
    with pytest.raises(ListenError, match=r"refusing socket directory .*owned by another user"):
        await SocketClaim.acquire(theirs / "jpd.sock")
    assert not exists(theirs / "jpd.pid")


def test_make_private_dir_creates_and_narrows(tmp_path: Path) -> None:
    fresh = tmp_path / "a" / "b"
    make_private_dir(fresh)
    assert stat.S_IMODE(os.stat(fresh).st_mode) == 0o700
    wide = tmp_path / "wide"
    wide.mkdir()
    os.chmod(wide, 0o755)
    make_private_dir(wide)
    assert stat.S_IMODE(os.stat(wide).st_mode) == 0o700
