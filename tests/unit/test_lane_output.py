"""The lane's output on a socket (jpd.rpc.lane_output, non-blocking like a Unix socket
client's): an answer that finds the output idle is written by the thread that made it,
with no writer thread started; one cut short is finished by the writer thread before
anything else; frames from the loop and from other threads never interleave; a writer
thread never started still lets go of the shared descriptor.

No timed assertions: waits have generous timeouts only so a broken output fails.
"""

from __future__ import annotations

import json
import os
import socket
import threading
from collections.abc import Iterator

import anyio
import pytest

from jpd.rpc.framing import FrameSplitter, Malformed, encode_frame
from jpd.rpc.lane_output import SharedFd, ThreadedOutput
from tests.unit.test_lane import _SAFETY, in_thread


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, SharedFd]]:
    """The client's end (blocking, with a timeout) and the daemon's (a non-blocking
    duplicate, as `LaneConnection` holds it)."""
    client, daemon = socket.socketpair()
    client.settimeout(_SAFETY)
    daemon.setblocking(False)
    shared = SharedFd(os.dup(daemon.fileno()))
    daemon.close()
    yield client, shared
    client.close()


def _writers() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("jpd-write-")]


def _read_frames(sock: socket.socket, count: int) -> list[bytes | Malformed]:
    splitter = FrameSplitter()
    frames: list[bytes | Malformed] = []
    while len(frames) < count:
        chunk = sock.recv(65536)
        assert chunk
        frames.extend(splitter.feed(chunk))
    return frames


def _closed(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return True
    return False


async def test_an_answer_on_an_idle_output_is_written_by_its_own_thread(
    pair: tuple[socket.socket, SharedFd],
) -> None:
    client, shared = pair
    before = _writers()
    output = ThreadedOutput(shared.fd, direct=True, shared=shared)
    output.start()
    frame = encode_frame(b'{"jsonrpc": "2.0", "id": 1, "result": {}}')
    await in_thread(lambda: output.send_first(frame))
    assert await in_thread(lambda: _read_frames(client, 1)) == [frame[frame.index(b"{") :]]
    assert _writers() == before  # no writer thread was needed
    output.close()
    shared.release()  # the creator's hold: the last one, as no thread took one
    assert _closed(shared.fd)


async def test_an_answer_cut_short_is_finished_before_the_next_batch(
    pair: tuple[socket.socket, SharedFd],
) -> None:
    client, shared = pair
    client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    output = ThreadedOutput(shared.fd, limit=1 << 30, direct=True, shared=shared)
    output.start()
    big = encode_frame(b'{"answer":1,"pad":"%s"}' % (b"a" * 2_000_000))
    await in_thread(lambda: output.send_first(big))  # the socket takes only part of it
    await output.send(encode_frame(b'{"n":1}'))
    output.send_first(encode_frame(b'{"answer":2}'))
    frames = await in_thread(lambda: _read_frames(client, 3))
    output.close()
    await output.drain()
    shared.release()
    decoded = [json.loads(f) for f in frames if isinstance(f, bytes)]
    assert [d.get("answer", "n") for d in decoded] == [1, 2, "n"]
    assert len(decoded[0]["pad"]) == 2_000_000


async def test_frames_from_the_loop_and_other_threads_never_interleave_on_a_socket(
    pair: tuple[socket.socket, SharedFd],
) -> None:
    client, shared = pair
    output = ThreadedOutput(shared.fd, limit=64 * 1024, direct=True, shared=shared)
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

    received: list[list[bytes | Malformed]] = []
    async with anyio.create_task_group() as tg:

        async def read() -> None:
            received.append(await in_thread(lambda: _read_frames(client, 200 * 20 + 300)))

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
    shared.release()
    frames = received[0]
    assert all(isinstance(f, bytes) for f in frames)
    decoded = [json.loads(f) for f in frames if isinstance(f, bytes)]
    events = [(d["batch"], d["n"]) for d in decoded if "batch" in d]
    assert events == [(b, n) for b in range(200) for n in range(20)]  # in order, whole
    assert sorted(d["answer"] for d in decoded if "answer" in d) == list(range(300))
