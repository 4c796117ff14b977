"""A Unix socket client served by the control lane (jpd.rpc.lane, protocol.md section 3):
threads read and write its socket, so its control requests are answered by the reader
thread however busy the event loop is, as on stdio.

The threads use a duplicate of the socket's descriptor, closed by the last of them (a
thread that outlives its connection never touches a number reused by the next client).
Ending the connection shuts the socket down, which wakes a thread blocked on it.
"""

from __future__ import annotations

import contextlib
import os
import socket

import anyio

from jpd.rpc.lane import SharedFd, ThreadedInput, ThreadedOutput

_SEND_BYTES = 64 * 1024
"""Bytes the writer thread may hold beyond the socket's buffer before `send` waits: kept
small, so a client that stops reading is seen by the stall timeout (protocol.md 7.3) as
soon as without the thread."""
_FLUSH_TIMEOUT = 5.0
"""Seconds the writer thread gets to write the last frames once the connection ended."""


class LaneConnection:
    """One accepted client whose socket the lane's threads read and write. `input` is
    what `serve_connection` reads, `send` what it writes with; `hang_up` ends the input
    (the session closes cleanly); `close` flushes and wakes the threads."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self._shared = SharedFd(os.dup(sock.fileno()))
        self.output = ThreadedOutput(self._shared.fd, _SEND_BYTES, direct=True, shared=self._shared)
        self.input = ThreadedInput(self._shared.fd, self.output, self._shared)
        self._started = False

    def start(self) -> None:
        """Start the writer thread (on the event loop; the reader starts with the
        session)."""
        self.output.start()
        self._started = True

    async def send(self, data: bytes) -> None:
        await self.output.send(data)

    def hang_up(self) -> None:
        self.input.end()

    async def close(self) -> None:
        """Write what is queued (for a while), then shut the socket down and let go of
        the descriptor (closed once the threads ended too)."""
        try:
            if self._started:
                self.output.close()
                with anyio.move_on_after(_FLUSH_TIMEOUT, shield=True):
                    await self.output.drain()
            self.input.stop()
        finally:
            with contextlib.suppress(OSError):
                self._sock.shutdown(socket.SHUT_RDWR)
            self._shared.release()
