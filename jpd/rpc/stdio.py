"""The stdio transport: one client on the daemon's stdin/stdout."""

from __future__ import annotations

import math
import os
import select
import stat
import sys
import threading

import anyio
import anyio.from_thread
import anyio.lowlevel
from anyio.streams.memory import MemoryObjectSendStream

from jpd.core.daemon import Daemon
from jpd.rpc.boundary import serve_connection
from jpd.rpc.outbox import ConnectionLimits


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _start_reader(
    fd: int, chunks: MemoryObjectSendStream[bytes], token: anyio.lowlevel.EventLoopToken
) -> None:
    """Read `fd` in a daemon thread: a blocked read must never hold up process exit
    (a worker-pool thread would, since the event loop joins its pool on the way out)."""

    def pump() -> None:
        while True:
            try:
                data = os.read(fd, 65536)
            except OSError:
                data = b""
            try:
                anyio.from_thread.run(chunks.send, data, token=token)
            except Exception:  # the loop is gone or the connection closed
                return
            if not data:
                return

    threading.Thread(target=pump, name="jpd-stdin", daemon=True).start()


def _is_pipe(fd: int) -> bool:
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


def _writable(fd: int) -> bool:
    try:
        return bool(select.select([], [fd], [], 0)[1])
    except (OSError, ValueError):
        return False


async def write_pipe(fd: int, data: bytes) -> None:
    """Write `data` to a pipe or socket on the event loop, `PIPE_BUF` bytes at a time,
    each once the pipe has room: such a write never blocks. So no thread competes with
    the loop for the GIL while a turn streams, and waiting for a client that reads
    nothing can be cancelled (it is dropped after the stall timeout, protocol.md 7.3)."""
    view = memoryview(data)
    while view:
        if not _writable(fd):
            await anyio.wait_writable(fd)
        view = view[os.write(fd, view[: select.PIPE_BUF]) :]


def claim_stdout() -> int:
    """Keep the real stdout for the protocol and point fd 1 at stderr.

    Native libraries (llama.cpp) may print to fd 1; that must never corrupt frames.
    """
    sys.stdout.flush()
    protocol_fd = os.dup(1)
    os.dup2(2, 1)
    return protocol_fd


async def serve_stdio(
    daemon: Daemon, in_fd: int, out_fd: int, limits: ConnectionLimits | None = None
) -> int:
    """Serve one client over the given file descriptors; returns the exit code.

    Without `limits`, the defaults, except that a stalled client is waited for: it is the
    daemon's only client, and once it reads again it catches up (protocol.md 7.3).
    """
    if limits is None:
        limits = ConnectionLimits(stall_timeout=math.inf)

    if _is_pipe(in_fd):

        async def receive() -> bytes:
            # Readiness on the loop, then a read that returns what is there at once:
            # no thread hop per message, and nothing blocked to hold up process exit.
            await anyio.wait_readable(in_fd)
            try:
                return os.read(in_fd, 65536)
            except OSError:
                return b""

    else:  # a regular file or a terminal: epoll cannot wait on every kind of fd
        chunks_in, chunks_out = anyio.create_memory_object_stream[bytes](max_buffer_size=16)
        _start_reader(in_fd, chunks_in, anyio.lowlevel.current_token())

        async def receive() -> bytes:
            try:
                return await chunks_out.receive()
            except anyio.EndOfStream:
                return b""

    if _is_pipe(out_fd):

        async def send(data: bytes) -> None:
            await write_pipe(out_fd, data)

    else:  # a regular file or a terminal: a write may block, so it goes to a thread

        async def send(data: bytes) -> None:
            await anyio.to_thread.run_sync(_write_all, out_fd, data)

    return await serve_connection(daemon, receive, send, limits=limits)
