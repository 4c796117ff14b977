"""The control lane of a stdio connection (jpd.rpc.lane, protocol.md section 3): control
requests are answered by the reader thread even while the event loop is blocked, ahead of
queued events; frames written from several threads never interleave; the lifecycle and
bad input keep their rules on the thread's path.

The daemon side runs `serve_stdio` in this event loop over two OS pipes; the client is
blocking code in a thread (the loop may be blocked on purpose). No timed assertions:
waits have generous timeouts only so a broken lane fails instead of hanging.
"""

from __future__ import annotations

import json
import os
import select
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import anyio.to_thread
import pytest

from jpd.rpc.framing import FrameSplitter, Malformed, encode_frame
from jpd.rpc.lane_output import ThreadedOutput
from jpd.rpc.outbox import ConnectionLimits
from jpd.rpc.stdio import serve_stdio
from tests.unit.test_boundary import INIT, FakeDaemon

_SAFETY = 30.0
"""Seconds a wait may take before the test fails (a safety net, not a measure)."""


class PipeClient:
    """A blocking JSON-RPC client on the daemon's stdin and stdout pipes."""

    def __init__(self, to_daemon: int, from_daemon: int) -> None:
        self.to_daemon = to_daemon
        self.from_daemon = from_daemon
        self._splitter = FrameSplitter()
        self._frames: list[bytes | Malformed] = []

    def send(self, message: dict[str, Any]) -> None:
        self.send_raw(encode_frame(json.dumps(message).encode()))

    def send_raw(self, data: bytes) -> None:
        os.write(self.to_daemon, data)

    def request(self, msg_id: int, method: str, params: Any = None) -> None:
        self.send({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params})

    def receive(self) -> dict[str, Any]:
        while not self._frames:
            ready, _, _ = select.select([self.from_daemon], [], [], _SAFETY)
            assert ready, "no answer from the daemon"
            chunk = os.read(self.from_daemon, 65536)
            assert chunk, "the daemon closed its output"
            self._frames.extend(self._splitter.feed(chunk))
        frame = self._frames.pop(0)
        assert isinstance(frame, bytes), frame
        message: dict[str, Any] = json.loads(frame)
        return message

    def call(self, msg_id: int, method: str, params: Any = None) -> dict[str, Any]:
        self.request(msg_id, method, params)
        answer = self.receive()
        assert answer.get("id") == msg_id, answer
        return answer


class LoopBlockingDaemon(FakeDaemon):
    """`conversation/list` blocks the whole event loop until the client releases it;
    turn `t-1` runs, and cancelling it is recorded with the thread that did it."""

    def __init__(self) -> None:
        super().__init__()
        self.blocked = threading.Event()
        self.release = threading.Event()
        self.cancelled: list[tuple[str, threading.Thread]] = []

    async def list_conversations(self, params: Any = None) -> list[Any]:
        self.blocked.set()
        self.release.wait(_SAFETY)  # synchronous: nothing else runs on the loop meanwhile
        return []

    def is_running(self, turn_id: str) -> bool:
        return turn_id == "t-1"

    def cancel_turn(self, turn_id: str) -> bool:
        self.cancelled.append((turn_id, threading.current_thread()))
        return True


@asynccontextmanager
async def serving(
    core: FakeDaemon, limits: ConnectionLimits | None = None
) -> AsyncIterator[tuple[PipeClient, list[int]]]:
    """Serve `core` on stdio pipes; the exit code lands in the list once it ended."""
    c2d_read, c2d_write = os.pipe()
    d2c_read, d2c_write = os.pipe()
    codes: list[int] = []
    ended = anyio.Event()

    async def serve() -> None:
        codes.append(await serve_stdio(core, c2d_read, d2c_write, limits))  # type: ignore[arg-type]
        ended.set()

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(serve)
            yield PipeClient(c2d_write, d2c_read), codes
            with anyio.fail_after(_SAFETY):
                await ended.wait()
    finally:
        os.close(c2d_write)  # the reader thread sees the end of its input and ends
        _wait_for_reader(c2d_read)
        for fd in (d2c_read, d2c_write, c2d_read):
            os.close(fd)


def _wait_for_reader(fd: int) -> None:
    """The daemon's reader thread of `fd` ends before the number is closed: a later
    test's pipe may get the same number, and its first frames would go to this thread."""
    for thread in threading.enumerate():
        if thread.name == f"jpd-read-{fd}":
            thread.join(_SAFETY)


async def in_thread(scenario: Callable[[], Any]) -> Any:
    return await anyio.to_thread.run_sync(scenario)


def _end(client: PipeClient, msg_id: int) -> None:
    assert "result" in client.call(msg_id, "shutdown")
    client.send({"jsonrpc": "2.0", "method": "exit"})


async def test_turn_list_is_answered_while_the_event_loop_is_blocked() -> None:
    core = LoopBlockingDaemon()
    async with serving(core) as (client, codes):

        def scenario() -> list[Any]:
            client.call(1, "initialize", INIT)
            client.request(2, "conversation/list", {})
            assert core.blocked.wait(_SAFETY)
            listed = client.call(3, "turn/list")  # the loop is blocked until `release`
            released_before = core.release.is_set()
            core.release.set()
            listing = client.receive()
            _end(client, 4)
            return [listed, released_before, listing]

        listed, released_before, listing = await in_thread(scenario)
    assert listed["result"] == {"turns": [], "inquiries": []}
    assert released_before is False
    assert listing["id"] == 2 and listing["result"] == {"conversations": []}
    assert codes == [0]


async def test_turn_cancel_answers_at_once_and_cancels_on_the_loop() -> None:
    core = LoopBlockingDaemon()
    loop_thread = threading.current_thread()
    async with serving(core) as (client, codes):

        def scenario() -> list[Any]:
            client.call(1, "initialize", INIT)
            client.request(2, "conversation/list", {})
            assert core.blocked.wait(_SAFETY)
            running = client.call(3, "turn/cancel", {"turnId": "t-1"})
            gone = client.call(4, "turn/cancel", {"turnId": "t-2"})
            cancelled_while_blocked = list(core.cancelled)
            core.release.set()
            assert client.receive()["id"] == 2
            _end(client, 5)  # answered by the loop: after the cancel it scheduled
            return [running, gone, cancelled_while_blocked]

        running, gone, cancelled_while_blocked = await in_thread(scenario)
    assert running["result"] == {"cancelled": True}
    assert gone["result"] == {"cancelled": False}
    assert cancelled_while_blocked == []
    assert core.cancelled == [("t-1", loop_thread)]
    assert codes == [0]


async def test_lifecycle_rules_hold_on_the_reader_path() -> None:
    async with serving(FakeDaemon()) as (client, codes):

        def scenario() -> list[dict[str, Any]]:
            early = client.call(1, "turn/list")
            client.call(2, "initialize", INIT)
            # Sent together: the reader thread must not answer the second one before the
            # loop handled `shutdown` (its effect comes first).
            client.send_raw(
                encode_frame(b'{"jsonrpc":"2.0","id":3,"method":"shutdown"}')
                + encode_frame(b'{"jsonrpc":"2.0","id":4,"method":"turn/list"}')
            )
            answers = sorted([client.receive(), client.receive()], key=lambda a: a["id"])
            client.send({"jsonrpc": "2.0", "method": "exit"})
            return [early, *answers]

        early, shutdown, late = await in_thread(scenario)
    assert early["error"]["code"] == -32002
    assert shutdown == {"jsonrpc": "2.0", "id": 3, "result": None}
    assert late["id"] == 4 and late["error"]["code"] == -32600
    assert codes == [0]


async def test_bad_input_on_the_reader_path_gets_errors_and_the_connection_serves_on() -> None:
    limits = ConnectionLimits(max_frame=4096, max_nesting=8)
    async with serving(FakeDaemon(), limits) as (client, codes):

        def scenario() -> list[dict[str, Any]]:
            client.call(1, "initialize", INIT)
            client.send_raw(b"garbage without a header\r\n\r\n")
            client.send_raw(encode_frame(b'{"jsonrpc":"2.0","id":2,"method":"turn/list"'))
            client.send_raw(b"Content-Length: 100000\r\n\r\n" + b"x" * 100000)
            deep = b'{"jsonrpc":"2.0","id":3,"method":"turn/list","params":' + b"[" * 20
            client.send_raw(encode_frame(deep + b"]" * 20 + b"}"))
            client.send_raw(encode_frame(b'{"jsonrpc":"2.0","id":true,"method":"turn/list"}'))
            client.request(4, "turn/list", {"unexpected": 1})
            answers = [client.receive() for _ in range(6)]
            answers.append(client.call(5, "turn/list"))
            return answers

        answers = await in_thread(scenario)
        client.send({"jsonrpc": "2.0", "method": "exit"})
    codes_of = [a.get("error", {}).get("code") for a in answers]
    assert codes_of == [-32700, -32700, -32700, -32700, -32600, -32602, None]
    assert answers[-1]["result"] == {"turns": [], "inquiries": []}
    assert codes == [1]  # exit without shutdown


async def test_end_of_input_ends_the_connection_with_code_1() -> None:
    async with serving(FakeDaemon()) as (client, codes):
        await in_thread(lambda: client.call(1, "initialize", INIT))
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, client.to_daemon)  # the pipe's only write end closes
        os.close(devnull)
    assert codes == [1]


async def test_exit_ends_the_connection_while_the_reader_waits_for_input() -> None:
    async with serving(FakeDaemon()) as (client, codes):
        await in_thread(lambda: client.call(1, "initialize", INIT))
        await in_thread(lambda: _end(client, 2))
        # The client's end of stdin stays open: the reader thread is still waiting.
    assert codes == [0]


# --- the writer thread -------------------------------------------------------------------


def _read_frames(fd: int, count: int) -> list[bytes | Malformed]:
    splitter = FrameSplitter()
    frames: list[bytes | Malformed] = []
    while len(frames) < count:
        chunk = os.read(fd, 65536)
        assert chunk
        frames.extend(splitter.feed(chunk))
    return frames


@pytest.mark.parametrize("direct", [False, True], ids=["thread", "loop-first"])
async def test_frames_from_the_loop_and_other_threads_never_interleave(direct: bool) -> None:
    read_fd, write_fd = os.pipe()
    output = ThreadedOutput(write_fd, limit=64 * 1024, direct=direct)
    output.start()
    batches = [
        b"".join(
            encode_frame(b'{"batch":%d,"n":%d,"pad":"%s"}' % (b, n, b"e" * 900)) for n in range(20)
        )
        for b in range(200)
    ]
    answers = [encode_frame(b'{"answer":%d,"pad":"%s"}' % (a, b"a" * 5000)) for a in range(300)]

    def answer_from(start: int) -> None:
        for frame in answers[start::3]:
            output.send_first(frame)

    try:
        async with anyio.create_task_group() as tg:
            received: list[list[bytes | Malformed]] = []

            async def read() -> None:
                received.append(await in_thread(lambda: _read_frames(read_fd, 200 * 20 + 300)))

            tg.start_soon(read)
            threads = [threading.Thread(target=answer_from, args=(i,)) for i in range(3)]
            for thread in threads:
                thread.start()
            for batch in batches:
                await output.send(batch)
            for thread in threads:
                await in_thread(thread.join)
            output.close()
            await output.drain()
    finally:
        os.close(read_fd)
        os.close(write_fd)
    frames = received[0]
    assert all(isinstance(f, bytes) for f in frames)
    decoded = [json.loads(f) for f in frames if isinstance(f, bytes)]
    events = [(d["batch"], d["n"]) for d in decoded if "batch" in d]
    assert events == [(b, n) for b in range(200) for n in range(20)]  # in order, whole
    assert sorted(d["answer"] for d in decoded if "answer" in d) == list(range(300))


@pytest.mark.parametrize("direct", [False, True], ids=["thread", "loop-first"])
async def test_an_answer_goes_ahead_of_the_queued_batches(direct: bool) -> None:
    read_fd, write_fd = os.pipe()
    output = ThreadedOutput(write_fd, limit=1 << 30, direct=direct)
    output.start()
    try:
        # Nobody reads yet: the first write fills the pipe and the rest stays queued.
        for n in range(50):
            await output.send(encode_frame(b'{"n":%d,"pad":"%s"}' % (n, b"e" * 30000)))
        output.send_first(encode_frame(b'{"answer":1}'))
        frames = await in_thread(lambda: _read_frames(read_fd, 51))
        output.close()
        await output.drain()
    finally:
        os.close(read_fd)
        os.close(write_fd)
    order = [json.loads(f).get("n", "answer") for f in frames if isinstance(f, bytes)]
    assert order.index("answer") < 10
    assert [n for n in order if n != "answer"] == list(range(50))


@pytest.mark.parametrize("direct", [False, True], ids=["thread", "loop-first"])
async def test_a_full_pipe_leaves_the_loop_running_and_the_wait_can_be_cancelled(
    direct: bool,
) -> None:
    read_fd, write_fd = os.pipe()
    output = ThreadedOutput(write_fd, limit=1024, direct=direct)
    output.start()
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await anyio.sleep(0.01)

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(tick)
            # Nobody reads: the queue stays full, and `send` waits for room without
            # blocking the loop, until the stall timeout's cancel scope gives up.
            with anyio.move_on_after(0.3) as scope:
                for _ in range(100):
                    await output.send(b"x" * 65536)
            tg.cancel_scope.cancel()
        assert scope.cancelled_caught
        assert ticks > 5
    finally:
        os.close(read_fd)  # the writer thread's write fails: it ends
        os.close(write_fd)
