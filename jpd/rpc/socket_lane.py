"""A Unix socket client served by the control lane (jpd.rpc.lane, protocol.md section 3):
threads read and write its socket, so its control requests are answered by the reader
thread however busy the event loop is, as on stdio.

A thread accepts the clients too (`LaneAcceptor`) and applies the peer rule: for a
client that passed, it answers at once what the client sent already (its first
`initialize`, usually there by the time the peer was checked), then starts its reader
thread; both answer before the loop has set up the session (`ThreadAnswers.bind` gives
it the session later). Every hand-over between threads may wait for the GIL (or for a
core of a busy machine), so the first answer takes none; and while these threads have
input, the event loop's thread lets them have the GIL (jpd.rpc.loop_yield).

The threads use a duplicate of the socket's descriptor, closed by the last of them (a
thread that outlives its connection never touches a number reused by the next client).
Ending the connection shuts the socket down, which wakes a thread blocked on it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import select
import socket
import threading
import time
from collections.abc import Callable, Mapping

import anyio

from jpd.protocol.errors import PeerRefused
from jpd.rpc.errors import error_body
from jpd.rpc.framing import FrameSplitter, encode_frame
from jpd.rpc.lane import Answer, ThreadedInput
from jpd.rpc.lane_output import SharedFd, ThreadedOutput
from jpd.rpc.loop_yield import YIELDING
from jpd.rpc.peer import check_peer

log = logging.getLogger(__name__)

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
        self.input.watched = self.watched = YIELDING.watch(self._shared.fd)
        self._started = False
        self.verified = False
        """The peer rule vouched for the process on the other end."""

    def start(self, loop: asyncio.AbstractEventLoop | None = None) -> None:
        """Start the writer thread (for the event loop; the reader starts with the
        session, or before it with `start_reading`)."""
        self.output.start(loop)
        self._started = True

    def start_reading(self, max_body: int, answer: Answer, loop: asyncio.AbstractEventLoop) -> None:
        """Start the reader thread before the session exists (from the accept thread),
        answering first, in the calling thread, what the client sent already (its
        `initialize`, usually there by the time its peer was checked)."""
        self.input.start(max_body, answer, loop, ready=True)

    async def send(self, data: bytes) -> None:
        await self.output.send(data)

    def hang_up(self) -> None:
        self.input.end()

    def abandon(self) -> None:
        """End a client never served (the daemon stopped first): no flush."""
        self.input.stop()
        self.watched.forget()
        self.output.close()
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)
        self._sock.close()
        self._shared.release()

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
            self.watched.forget()  # its thread does too, if it started
            with contextlib.suppress(OSError):
                self._sock.shutdown(socket.SHUT_RDWR)
            self._sock.close()  # the threads have their own descriptor
            self._shared.release()


_ACCEPT_POLL_MS = 250
"""How often the accept thread looks whether it should stop."""
_REFUSE_TIMEOUT = 5.0
"""Seconds a refused peer gets to send its first request (as `jpd.rpc.peer.refuse`)."""
_MAX_REFUSED_FRAME = 1 << 20

Accepted = Callable[[LaneConnection], None]
"""Called on the loop with each client whose peer passed (its threads started)."""


class LaneAcceptor:
    """Accepts clients in a thread (on a duplicate of the listening socket, closed when
    the thread ends) and applies the peer rule there; a refused peer gets its -32007 in
    a short thread of its own. `stop` ends the thread and waits for it."""

    def __init__(
        self,
        listening: socket.socket,
        tools: Callable[[], Mapping[int, int]],
        reader: Callable[[LaneConnection], tuple[int, Answer]],
        accepted: Accepted,
    ) -> None:
        self._sock = listening.dup()
        self._tools = tools
        self._reader = reader
        self._accepted = accepted
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._thread = threading.Thread(target=self._run, name="jpd-accept", daemon=True)
        self._thread.start()

    async def stop(self) -> None:
        """Accept no more (clients accepted already are still handed over)."""
        self._stopping.set()
        if self._thread is not None:
            await anyio.to_thread.run_sync(self._thread.join)

    def _run(self) -> None:
        poller = select.poll()
        poller.register(self._sock.fileno(), select.POLLIN)
        watched = YIELDING.watch(self._sock.fileno())
        try:
            while not self._stopping.is_set():
                watched.done()
                if not poller.poll(_ACCEPT_POLL_MS):
                    continue
                watched.woke()
                try:
                    client, _ = self._sock.accept()
                except BlockingIOError:
                    continue
                except OSError as exc:  # e.g. EMFILE: back off, keep serving
                    log.error("cannot accept a connection: %s", exc)
                    time.sleep(0.1)
                    continue
                self._admit(client)
        finally:
            watched.forget()
            self._sock.close()

    def _admit(self, client: socket.socket) -> None:
        assert self._loop is not None
        try:
            verdict = check_peer(client, self._tools())
        except Exception:  # the rule's own failure must not stop accepting
            log.exception("peer check failed")
            client.close()
            return
        if verdict.refusal is not None:
            log.warning("%s", verdict.refusal)
            threading.Thread(target=_refuse, args=(client, verdict.refusal), daemon=True).start()
            return
        client.setblocking(False)
        lane = LaneConnection(client)
        lane.verified = verdict.verified
        lane.start(self._loop)
        max_body, answer = self._reader(lane)
        lane.start_reading(max_body, answer, self._loop)
        try:
            self._loop.call_soon_threadsafe(self._accepted, lane)
        except RuntimeError:  # the loop is closed: the daemon is gone
            client.close()


def _refuse(client: socket.socket, reason: str) -> None:
    """Answer the peer's first request with -32007 and `reason`, then hang up."""
    with client:
        client.settimeout(_REFUSE_TIMEOUT)
        splitter = FrameSplitter(_MAX_REFUSED_FRAME)
        deadline = time.monotonic() + _REFUSE_TIMEOUT
        try:
            while time.monotonic() < deadline:
                chunk = client.recv(65536)
                for body in splitter.feed(chunk) if chunk else splitter.end():
                    if not isinstance(body, bytes):
                        return
                    message = json.loads(body)
                    if isinstance(message, dict) and "id" in message and "method" in message:
                        error = error_body(message["id"], PeerRefused(reason))
                        client.sendall(encode_frame(error))
                        return
                if not chunk:
                    return
        except (OSError, ValueError):
            return
