"""The stdio transport: one client on the daemon's stdin/stdout."""

from __future__ import annotations

import os
import sys
from functools import partial

import anyio

from jpd.core.daemon import Daemon
from jpd.rpc.boundary import serve_connection


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def claim_stdout() -> int:
    """Keep the real stdout for the protocol and point fd 1 at stderr.

    Native libraries (llama.cpp) may print to fd 1; that must never corrupt frames.
    """
    sys.stdout.flush()
    protocol_fd = os.dup(1)
    os.dup2(2, 1)
    return protocol_fd


async def serve_stdio(daemon: Daemon, in_fd: int, out_fd: int) -> int:
    """Serve one client over the given file descriptors; returns the exit code."""

    async def receive() -> bytes:
        return await anyio.to_thread.run_sync(
            partial(os.read, in_fd, 65536), abandon_on_cancel=True
        )

    async def send(data: bytes) -> None:
        await anyio.to_thread.run_sync(_write_all, out_fd, data)

    return await serve_connection(daemon, receive, send)
