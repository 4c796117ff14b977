"""The stdio transport: one client on the daemon's stdin/stdout."""

from __future__ import annotations

import math
import os
import stat
import sys

import anyio

from jpd.core.daemon import Daemon
from jpd.rpc.boundary import serve_connection
from jpd.rpc.lane import ThreadedInput
from jpd.rpc.lane_output import ThreadedOutput
from jpd.rpc.outbox import ConnectionLimits

_FLUSH_TIMEOUT = 5.0
"""Seconds the writer thread gets to write the last frames once the connection ended."""


def _is_pipe(fd: int) -> bool:
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


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

    # Threads read and write the fds (jpd.rpc.lane): the reader answers control requests
    # at once, ahead of the writer's next batch, however busy the event loop is.
    output = ThreadedOutput(out_fd, direct=_is_pipe(out_fd))
    output.start()
    try:
        reader = ThreadedInput(in_fd, output)
        return await serve_connection(daemon, reader, output.send, limits=limits)
    finally:
        output.close()
        with anyio.move_on_after(_FLUSH_TIMEOUT, shield=True):
            await output.drain()
