"""The Unix socket transport: `jpd --listen` serves any number of clients at once.

Each accepted connection gets its own `serve_connection` (its own pygls protocol and
session) over one shared `Daemon`, once its peer passed the peer rule
(jpd/tools/peer_rule.py: never a process of a tool's cage or started by the daemon).
Threads accept, check and read the clients (jpd.rpc.socket_lane), so control requests
and a first `initialize` are answered however busy the event loop is. The socket's
path, and the claim on it that makes one daemon per socket: jpd.rpc.socket_claim.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import deque
from pathlib import Path
from typing import Protocol

import anyio
import anyio.abc

from jpd.core.daemon import Daemon
from jpd.rpc.answers import ThreadAnswers
from jpd.rpc.boundary import serve_connection
from jpd.rpc.loop_yield import YIELDING
from jpd.rpc.outbox import ConnectionLimits
from jpd.rpc.socket_lane import LaneAcceptor, LaneConnection
from jpd.rpc.transport import Requester

log = logging.getLogger(__name__)

_HANGUP_TIMEOUT = 5.0  # seconds connections get to flush their last frames on stop


class Client(Protocol):
    """A connected client as the session sees it: bytes in, bytes out, and a way to end it."""

    async def receive(self) -> bytes: ...

    async def send(self, data: bytes) -> None: ...

    def hang_up(self) -> None: ...


class SocketServer:
    """Accepts clients on a bound socket until stopped; implements `Host`.

    Stops on `stop()` (from `daemon/stop`, a signal, or idle time): it stops accepting,
    cancels running turns and waits until each has recorded its end (subscribed clients
    get their `turn_completed`), then hangs up every client.
    """

    def __init__(
        self,
        daemon: Daemon,
        path: Path,
        *,
        idle_timeout: float = 0.0,
        limits: ConnectionLimits | None = None,
    ) -> None:
        self.daemon = daemon
        self._limits = limits
        self._path = path
        self._idle_timeout = idle_timeout
        self._started = time.monotonic()
        self._connections: set[Client | LaneConnection] = set()
        self._none_left = anyio.Event()
        self._stop = anyio.Event()
        self.stop_reason: str | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._admitted: deque[LaneConnection] = deque()
        self._admitted_event = anyio.Event()
        self._arriving: set[LaneConnection] = set()
        """Clients the accept thread took (and may have answered) not yet served here:
        they count as connected (`daemon/status` after their `initialize`)."""
        self._arriving_lock = threading.Lock()

    # --- Host ------------------------------------------------------------------------

    @property
    def socket_path(self) -> Path | None:
        return self._path

    def uptime(self) -> float:
        return time.monotonic() - self._started

    def client_count(self) -> int:
        # A client whose end of input its reader thread read is gone, though the loop
        # may not have seen it yet (the threads come first: jpd.rpc.loop_yield).
        with self._arriving_lock:  # from the loop and from reader threads
            return sum(
                1
                for client in (*self._connections, *self._arriving)
                if not (isinstance(client, LaneConnection) and client.input.hung_up)
            )

    def request_stop(self, session: Requester) -> None:
        self.stop(f"daemon/stop from client {session.link_id} ({session.client_name})")

    # --- lifecycle -------------------------------------------------------------------

    def stop(self, reason: str) -> None:
        """Begin a clean stop (idempotent); `serve` returns once it is done."""
        if not self._stop.is_set():
            self.stop_reason = reason
            log.info("stopping: %s", reason)
            self._stop.set()

    async def serve(self, listener: anyio.abc.SocketListener) -> None:
        """Serve clients until `stop()`, then stop cleanly; closes `listener`."""
        self._loop = asyncio.get_running_loop()
        YIELDING.install()  # before the accept thread watches the listening socket
        raw = listener.extra(anyio.abc.SocketAttribute.raw_socket)
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._serve_admitted, tg)
            # Clients are accepted, checked and first answered by threads
            # (jpd.rpc.socket_lane): however busy the loop, `initialize` is answered.
            acceptor = LaneAcceptor(
                raw, self.daemon.tools.tool_launchers, self._reader, self._accepted
            )
            acceptor.start()
            if self._idle_timeout > 0:
                tg.start_soon(self._watch_idle)
            try:
                await self._stop.wait()
            finally:
                with anyio.CancelScope(shield=True):
                    await acceptor.stop()
                    await listener.aclose()
                    turns = self.daemon.running_turns()
                    if turns:
                        log.info("cancelling %d running turn(s)", len(turns))
                    await self.daemon.aclose()
                    await self._hang_up_all()
                tg.cancel_scope.cancel()
        while self._admitted:  # accepted as the daemon stopped, never served
            lane = self._admitted.popleft()
            self._arrived(lane)
            lane.abandon()

    async def _hang_up_all(self) -> None:
        for connection in list(self._connections):
            connection.hang_up()
        with anyio.move_on_after(_HANGUP_TIMEOUT):
            if self._connections:
                await self._none_left.wait()

    def _reader(self, lane: LaneConnection) -> tuple[int, ThreadAnswers]:
        """In the accept thread: what the new client's reader thread answers before its
        session exists (a first `initialize`)."""
        assert self._loop is not None
        with self._arriving_lock:
            self._arriving.add(lane)
        limits = self._limits if self._limits is not None else ConnectionLimits()
        answers = ThreadAnswers(
            self.daemon,
            None,
            limits.max_nesting,
            self._loop,
            lane.input.in_order,
        )
        return limits.max_frame, answers

    def _arrived(self, lane: LaneConnection) -> None:
        with self._arriving_lock:
            self._arriving.discard(lane)

    def _accepted(self, lane: LaneConnection) -> None:
        """On the loop (a callback): queue a client the accept thread admitted."""
        self._admitted.append(lane)
        self._admitted_event.set()

    async def _serve_admitted(self, tg: anyio.abc.TaskGroup) -> None:
        """Serve each admitted client in a task of its own."""
        while True:
            await self._admitted_event.wait()
            self._admitted_event = anyio.Event()
            while self._admitted:
                tg.start_soon(self._serve_lane, self._admitted.popleft())

    async def _serve_lane(self, lane: LaneConnection) -> None:
        try:
            await self.serve_client(lane, peer_verified=lane.verified)
        finally:
            await lane.close()

    async def serve_client(
        self, connection: Client | LaneConnection, *, peer_verified: bool = False
    ) -> None:
        """Serve one client (of this socket, or of another transport: jpd.rpc.websocket)
        until it leaves or the daemon stops. `peer_verified`: the peer rule vouched
        for the process on the other end (a WebSocket's cannot be known)."""
        if not self._connections:
            self._none_left = anyio.Event()
        with self._arriving_lock:
            self._connections.add(connection)
            self._arriving.discard(connection)
        log.info("client connected (%d open)", len(self._connections))
        try:
            if not self._stop.is_set():
                receive = (
                    connection.input
                    if isinstance(connection, LaneConnection)
                    else connection.receive
                )
                await serve_connection(
                    self.daemon,
                    receive,
                    connection.send,
                    self,
                    self._limits,
                    peer_verified=peer_verified,
                )
        except Exception:  # one broken connection must never take the daemon down
            log.exception("connection failed")
        finally:
            with self._arriving_lock:
                self._connections.discard(connection)
            log.info("client disconnected (%d open)", len(self._connections))
            if not self._connections:
                self._none_left.set()

    async def _watch_idle(self) -> None:
        """Stop after `idle_timeout` seconds with no client and no running turn."""
        tick = min(1.0, max(self._idle_timeout / 4, 0.01))
        idle_since: float | None = None
        while True:
            await anyio.sleep(tick)
            if self._connections or self.daemon.running_turns():
                idle_since = None
                continue
            now = time.monotonic()
            if idle_since is None:
                idle_since = now
            elif now - idle_since >= self._idle_timeout:
                self.stop(f"idle for {self._idle_timeout:g}s")
                return
