"""The control lane of a Unix socket client (jpd.rpc.socket_lane, protocol.md section 3):
its reader thread answers control requests and a first `initialize` while the event loop
is blocked; what it answers sees the effects of what was answered before, and what was
sent before it keeps its place; the boundary's rules (peer refusals, disconnects, the
daemon's stop) hold on the threads' path.

The daemon side is a `SocketServer` in this event loop; clients are blocking sockets in
threads (the loop is blocked on purpose). No timed assertions: waits have generous
timeouts only so a broken lane fails instead of hanging.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import socket
import tempfile
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import anyio
import pytest

from jpd.protocol.errors import NotFound
from jpd.rpc import loop_yield
from jpd.rpc import socket_lane as socket_lane_module
from jpd.rpc.framing import encode_frame
from jpd.rpc.listener import SocketServer
from jpd.tools.peer_rule import Verdict
from tests.unit.test_boundary import INIT, NoInquiries
from tests.unit.test_lane import _SAFETY, LoopBlockingDaemon, PipeClient, in_thread


class _Tools:
    def tool_launchers(self) -> dict[int, int]:
        return {}


class _Inquiries(NoInquiries):
    """One question pending (`q-1`); claims are recorded with the thread they came on,
    and so is the step that applies them."""

    def __init__(self, daemon: SocketDaemon) -> None:
        self._daemon = daemon

    def claim_here(
        self,
        link: Any,
        inquiry_id: str,
        answer: Any,
        remember: bool,
        conversation_id: str | None = None,
        turn_id: str | None = None,
    ) -> Callable[[], None]:
        daemon = self._daemon
        daemon.handled.append(f"answer {inquiry_id}")
        if inquiry_id != "q-1" or any(done == "q-1" for done, _, _ in daemon.answered):
            raise NotFound(f"no pending inquiry {inquiry_id}")  # first valid answer wins
        daemon.answered.append((inquiry_id, answer, threading.current_thread()))
        return lambda: daemon.settled.append(threading.current_thread())


class SocketDaemon(LoopBlockingDaemon):
    """What `SocketServer` asks of the core besides the boundary's part."""

    tools = _Tools()
    settings = SimpleNamespace(data_dir=Path("/data"), env={}, log_file=None)
    shared = None
    """No fleet member: `inquiry/answer` needs no wait."""

    def __init__(self) -> None:
        super().__init__()
        self.changed = anyio.Event()
        self.answered = []
        self.settled: list[threading.Thread] = []
        self.handled: list[str] = []
        self.inquiries = _Inquiries(self)

    answered: list[tuple[str, Any, threading.Thread]]

    async def list_conversations(self, params: Any = None) -> list[Any]:
        self.handled.append("list")
        return await super().list_conversations(params)

    def connected(self, session: Any) -> None:
        super().connected(session)
        self.changed.set()

    def disconnected(self, session: Any) -> None:
        super().disconnected(session)
        self.changed.set()

    async def until(self, predicate: Callable[[], bool]) -> None:
        """Wait (on the loop) until a client connected or left and `predicate` holds."""
        with anyio.fail_after(_SAFETY):
            while not predicate():
                self.changed = anyio.Event()
                await self.changed.wait()

    async def aclose(self) -> None:
        pass


class SockClient(PipeClient):
    """A blocking JSON-RPC client on a Unix socket."""

    def __init__(self, path: Path) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(str(path))
        super().__init__(self.sock.fileno(), self.sock.fileno())

    def at_eof(self) -> bool:
        self.sock.settimeout(_SAFETY)
        try:
            return self.sock.recv(65536) == b""
        except ConnectionResetError:
            return True


@pytest.fixture
def sock_dir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="jl", dir="/tmp"))  # a short path: sun_path limit
    yield path
    shutil.rmtree(path, ignore_errors=True)


@asynccontextmanager
async def listening(
    core: SocketDaemon, sock_dir: Path
) -> AsyncIterator[tuple[SocketServer, Callable[[], SockClient]]]:
    path = sock_dir / "s.sock"
    listener = await anyio.create_unix_listener(path)
    server = SocketServer(core, path)  # type: ignore[arg-type]
    clients: list[SockClient] = []

    def connect() -> SockClient:
        clients.append(SockClient(path))
        return clients[-1]

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(server.serve, listener)
            yield server, connect
            server.stop("the test ended")
    finally:
        for client in clients:
            client.sock.close()


async def _sessions(core: SocketDaemon, count: int) -> None:
    await core.until(lambda: len(core.sessions) >= count)


async def test_turn_list_is_answered_while_the_event_loop_is_blocked(sock_dir: Path) -> None:
    core = SocketDaemon()
    async with listening(core, sock_dir) as (_, connect):

        def scenario() -> list[Any]:
            client = connect()
            client.call(1, "initialize", INIT)
            client.request(2, "conversation/list", {})
            assert core.blocked.wait(_SAFETY)
            listed = client.call(3, "turn/list")  # the loop is blocked until `release`
            cancelled = client.call(4, "turn/cancel", {"turnId": "t-1"})
            released_before = core.release.is_set()
            core.release.set()
            listing = client.receive()
            return [listed, cancelled, released_before, listing]

        listed, cancelled, released_before, listing = await in_thread(scenario)
    assert listed["result"] == {"turns": [], "inquiries": []}
    assert cancelled["result"] == {"cancelled": True}
    assert released_before is False
    assert listing["id"] == 2 and listing["result"] == {"conversations": []}
    assert [turn for turn, _ in core.cancelled] == ["t-1"]


async def test_a_new_client_is_initialized_by_its_thread_and_the_loop_applies_it(
    sock_dir: Path,
) -> None:
    core = SocketDaemon()
    async with listening(core, sock_dir) as (_, connect):
        busy = await in_thread(connect)
        newcomer = await in_thread(connect)
        await _sessions(core, 2)

        def scenario() -> list[Any]:
            busy.call(1, "initialize", INIT)
            busy.request(2, "conversation/list", {})
            assert core.blocked.wait(_SAFETY)
            init = {**INIT, "clientInfo": {"name": "newcomer"}, "workspaceRoot": "/w"}
            initialized = newcomer.call(1, "initialize", init)
            listed = newcomer.call(2, "turn/list")
            released_before = core.release.is_set()
            core.release.set()
            busy.receive()
            # The loop's path: admitted only if the loop applied `initialize` first.
            listing = newcomer.call(3, "conversation/list", {})
            return [initialized, listed, released_before, listing]

        initialized, listed, released_before, listing = await in_thread(scenario)
        session = core.sessions[1]
        assert session.initialized and session.client_name == "newcomer"
        assert session.workspace_root == Path("/w")
    assert initialized["result"]["serverInfo"]["name"] == "jpd"
    assert "turn/list" in initialized["result"]["capabilities"]["methods"]
    assert listed["result"] == {"turns": [], "inquiries": []}
    assert released_before is False
    assert listing["result"] == {"conversations": []}


async def test_a_client_connecting_while_the_loop_is_blocked_is_initialized_at_once(
    sock_dir: Path,
) -> None:
    core = SocketDaemon()
    async with listening(core, sock_dir) as (_, connect):
        busy = await in_thread(connect)

        def scenario() -> list[Any]:
            busy.call(1, "initialize", INIT)
            busy.request(2, "conversation/list", {})
            assert core.blocked.wait(_SAFETY)
            # Accepted, checked and answered by threads: the loop is blocked throughout.
            newcomer = connect()
            init = {**INIT, "clientInfo": {"name": "late"}}
            initialized = newcomer.call(1, "initialize", init)
            newcomer.request(2, "turn/list")  # no session yet: the loop's, in order
            newcomer.request(3, "conversation/list", {})
            released_before = core.release.is_set()
            core.release.set()
            busy.receive()
            return [initialized, released_before, newcomer.receive(), newcomer.receive()]

        initialized, released_before, listed, listing = await in_thread(scenario)
        session = core.sessions[1]
        assert session.initialized and session.client_name == "late"
    assert "result" in initialized and released_before is False
    assert listed["id"] == 2 and listed["result"] == {"turns": [], "inquiries": []}
    assert listing["id"] == 3 and listing["result"] == {"conversations": []}


async def test_a_burst_sent_on_connecting_is_answered_in_order_and_the_client_counts(
    sock_dir: Path,
) -> None:
    """A client's first bytes (its `initialize` and more, in one write) are there by the
    time its peer is checked: `initialize` is answered while the loop is blocked, the
    rest goes to the loop in order, and `daemon/status` counts the client already."""
    core = SocketDaemon()
    async with listening(core, sock_dir) as (_, connect):
        busy = await in_thread(connect)

        def scenario() -> list[Any]:
            busy.call(1, "initialize", INIT)
            busy.request(2, "conversation/list", {})
            assert core.blocked.wait(_SAFETY)
            newcomer = connect()
            burst = [
                {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INIT},
                {"jsonrpc": "2.0", "id": 2, "method": "conversation/list", "params": {}},
                {"jsonrpc": "2.0", "id": 3, "method": "turn/list"},
            ]
            newcomer.send_raw(b"".join(encode_frame(json.dumps(m).encode()) for m in burst))
            initialized = newcomer.receive()
            status = busy.call(3, "daemon/status")
            released_before = core.release.is_set()
            core.release.set()
            busy.receive()
            return [initialized, status, released_before, newcomer.receive(), newcomer.receive()]

        initialized, status, released_before, listing, listed = await in_thread(scenario)
    assert initialized["id"] == 1 and "result" in initialized and released_before is False
    assert status["result"]["clients"] == 2
    by_id = {answer["id"]: answer for answer in (listing, listed)}  # handled concurrently
    assert by_id[2]["result"] == {"conversations": []}
    assert by_id[3]["result"] == {"turns": [], "inquiries": []}


async def test_a_client_that_hung_up_is_not_counted_though_the_loop_has_not_seen_it(
    sock_dir: Path,
) -> None:
    """The threads come first (jpd.rpc.loop_yield): `daemon/status` may be answered
    before the loop ended a session whose client left; its reader saw the end."""
    core = SocketDaemon()
    async with listening(core, sock_dir) as (_, connect):
        busy = await in_thread(connect)

        def scenario() -> tuple[list[int], bool]:
            busy.call(1, "initialize", INIT)
            busy.request(2, "conversation/list", {})
            assert core.blocked.wait(_SAFETY)
            leaver = connect()
            assert "result" in leaver.call(1, "initialize", INIT)
            counted = [busy.call(3, "daemon/status")["result"]["clients"]]
            leaver.sock.close()
            for attempt in range(int(_SAFETY / 0.01)):
                counted.append(busy.call(4 + attempt, "daemon/status")["result"]["clients"])
                if counted[-1] == 1:
                    break
                threading.Event().wait(0.01)
            released_before = core.release.is_set()
            core.release.set()
            busy.receive()
            return counted, released_before

        counted, released_before = await in_thread(scenario)
    assert counted[0] == 2 and counted[-1] == 1 and released_before is False


async def test_clients_that_hang_up_at_once_or_send_junk_leave_nothing_watched(
    sock_dir: Path,
) -> None:
    """An attacker's many short connections (some sending junk, a frame too large or
    half a frame) end their readers: the loop's thread no longer waits for any of them
    (jpd.rpc.loop_yield); the accept thread's socket alone is watched, and a client
    after them is served."""
    core = SocketDaemon()
    async with listening(core, sock_dir) as (_, connect):

        def scenario() -> tuple[int, dict[str, Any]]:
            junk = [b"", b"garbage\r\n\r\n", b"Content-Length: 99999999999\r\n\r\n{", b"Content-"]
            for index in range(24):
                client = connect()
                client.send_raw(junk[index % len(junk)])
                client.sock.close()
            for _ in range(int(_SAFETY / 0.01)):
                if len(loop_yield.YIELDING._watched) == 1:
                    break
                threading.Event().wait(0.01)
            watched = len(loop_yield.YIELDING._watched)
            return watched, connect().call(1, "initialize", INIT)

        watched, initialized = await in_thread(scenario)
    assert watched == 1 and "result" in initialized


async def test_an_initialize_after_a_message_the_loop_holds_waits_its_turn(
    sock_dir: Path,
) -> None:
    core = SocketDaemon()
    async with listening(core, sock_dir) as (_, connect):
        busy = await in_thread(connect)
        newcomer = await in_thread(connect)
        await _sessions(core, 2)

        def scenario() -> list[dict[str, Any]]:
            busy.call(1, "initialize", INIT)
            busy.request(2, "conversation/list", {})
            assert core.blocked.wait(_SAFETY)
            newcomer.request(1, "conversation/list", {})  # before initialize: -32002
            newcomer.request(2, "initialize", INIT)
            core.release.set()
            busy.receive()
            return [newcomer.receive(), newcomer.receive()]

        early, initialized = await in_thread(scenario)
    assert early["id"] == 1 and early["error"]["code"] == -32002
    assert initialized["id"] == 2 and "result" in initialized


async def test_an_inquiry_answer_is_claimed_by_the_reader_and_applied_on_the_loop(
    sock_dir: Path,
) -> None:
    core = SocketDaemon()
    loop_thread = threading.current_thread()
    async with listening(core, sock_dir) as (_, connect):

        def scenario() -> tuple[list[Any], list[dict[str, Any]]]:
            client = connect()
            client.call(1, "initialize", INIT)
            client.request(2, "conversation/list", {})
            assert core.blocked.wait(_SAFETY)
            client.request(3, "conversation/list", {})  # queued for the loop
            client.request(4, "inquiry/answer", {"inquiryId": "q-1", "answer": True})
            client.request(5, "inquiry/answer", {"inquiryId": "q-1", "answer": False})
            client.request(
                6, "inquiry/answer", {"inquiryId": "q-1", "answer": "x" * 3, "remember": 1}
            )
            # The reader thread answers both while the loop is still blocked.
            accepted, refused = client.receive(), client.receive()
            client.call(7, "turn/list")
            claimed_while_blocked = list(core.answered)
            settled_while_blocked = list(core.settled)
            core.release.set()
            rest = [client.receive() for _ in range(3)]
            return [claimed_while_blocked, settled_while_blocked], [accepted, refused, *rest]

        (claimed_while_blocked, settled_while_blocked), answers = await in_thread(scenario)
    [(inquiry, answer, thread)] = claimed_while_blocked
    assert (inquiry, answer) == ("q-1", True) and thread is not loop_thread
    assert settled_while_blocked == []  # applied on the loop, once it runs again
    assert core.settled == [loop_thread]
    accepted, refused, *rest = answers
    assert accepted == {"jsonrpc": "2.0", "id": 4, "result": {"accepted": True}}
    assert refused["id"] == 5 and refused["error"]["code"] == -32001  # the first won
    by_id = {a["id"]: a for a in rest}
    assert by_id[6]["error"]["code"] == -32602  # invalid params: the loop's usual way
    # Both answers were handled before the `conversation/list` read before them.
    assert core.handled == ["list", "answer q-1", "answer q-1", "list"]


async def test_bad_initialize_params_get_the_loops_error(sock_dir: Path) -> None:
    core = SocketDaemon()
    async with listening(core, sock_dir) as (_, connect):

        def scenario() -> list[dict[str, Any]]:
            client = connect()
            bad = client.call(1, "initialize", {"clientInfo": "not an object"})
            other_dir = client.call(2, "initialize", {**INIT, "dataDir": "/no/such/dir"})
            return [bad, other_dir]

        bad, other_dir = await in_thread(scenario)
    assert bad["error"]["code"] == -32602
    assert "data dir" in other_dir["error"]["message"]


async def test_a_disconnected_client_is_gone_and_others_are_served(sock_dir: Path) -> None:
    core = SocketDaemon()
    async with listening(core, sock_dir) as (_, connect):
        first = await in_thread(connect)
        await in_thread(lambda: first.call(1, "initialize", INIT))
        first.sock.close()
        await core.until(lambda: bool(core.gone))
        second = await in_thread(connect)
        answer = await in_thread(lambda: second.call(1, "initialize", INIT))
    assert "result" in answer
    assert core.gone[0] is core.sessions[0]


async def test_stopping_the_daemon_hangs_up_lane_clients(sock_dir: Path) -> None:
    core = SocketDaemon()
    async with listening(core, sock_dir) as (server, connect):
        client = await in_thread(connect)
        await in_thread(lambda: client.call(1, "initialize", INIT))
        server.stop("test")
        assert await in_thread(client.at_eof)
    assert core.gone == core.sessions


async def test_a_refused_peer_still_gets_its_error(
    sock_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    refusal = "jpd refuses this connection: a test said so"
    monkeypatch.setattr(
        socket_lane_module, "check_peer", lambda sock, tools: Verdict(refusal, False)
    )
    core = SocketDaemon()
    async with listening(core, sock_dir) as (_, connect):

        def scenario() -> tuple[dict[str, Any], bool]:
            client = connect()
            answer = client.call(1, "initialize", INIT)
            return answer, client.at_eof()

        answer, closed = await in_thread(scenario)
    assert answer["error"]["code"] == -32007 and answer["error"]["message"] == refusal
    assert closed and core.sessions == []


def test_the_threads_descriptor_closes_with_its_last_holder() -> None:
    import os

    from jpd.rpc.lane_output import SharedFd

    read_fd, write_fd = os.pipe()
    os.close(write_fd)
    shared = SharedFd(read_fd)
    shared.hold()
    shared.release()
    os.fstat(read_fd)  # still open: a thread holds it
    shared.release()
    with pytest.raises(OSError), contextlib.suppress(AssertionError):
        os.fstat(read_fd)
