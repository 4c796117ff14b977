"""`create_server(settings)`: the daemon process, wired together."""

from __future__ import annotations

import logging
import os
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING

import anyio

from jpd.core.daemon import Daemon
from jpd.private import make_private_dir
from jpd.protocol.errors import ConfigInvalid
from jpd.rpc.outbox import ConnectionLimits
from jpd.rpc.stdio import serve_stdio
from jpd.settings import Settings

if TYPE_CHECKING:
    from jpd.rpc.listener import SocketServer
    from jpd.rpc.websocket import WsListen

log = logging.getLogger(__name__)

DEFAULT_IDLE_TIMEOUT = 600.0
SWITCH_INTERVAL = 0.0005  # seconds


class Server:
    """A daemon plus its transports."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        # Worker threads (loading a long log, say) hand the GIL back to the event loop
        # within half a millisecond rather than five, so other clients' requests stay
        # quick while they run (protocol.md section 4, "Start-up").
        sys.setswitchinterval(SWITCH_INTERVAL)

    async def _private_data_dir(self) -> None:
        try:
            await anyio.to_thread.run_sync(make_private_dir, self.settings.data_dir)
        except OSError as exc:  # each turn that needs it reports the problem
            log.warning("cannot prepare data dir %s: %s", self.settings.data_dir, exc)
        # Tool process groups that a daemon killed with SIGKILL may have left behind.
        await anyio.to_thread.run_sync(_reap_orphans, self.settings.data_dir)

    async def run_stdio(self, in_fd: int, out_fd: int) -> int:
        """Serve one client on stdio; cancel and record running turns at the end."""
        await self._private_data_dir()
        async with anyio.create_task_group() as tg:
            daemon = Daemon(self.settings, tg)
            await daemon.store.open()  # a fleet's: connected and migrated, or no start
            try:
                # Default limits: reading the config here would cost every start-up.
                code = await serve_stdio(daemon, in_fd, out_fd)
            finally:
                with anyio.CancelScope(shield=True):
                    await daemon.aclose()
            tg.cancel_scope.cancel()
        return code

    async def run_listen(
        self, path: Path | None = None, ws_url: str | None = None, ws_token: Path | None = None
    ) -> int:
        """Serve any number of clients on a Unix socket until stopped; returns 0.

        `path` defaults to `$JP_SOCKET` or the platform runtime dir. Stops cleanly on
        `daemon/stop`, SIGTERM, SIGINT or SIGHUP, and after `daemon.idle_timeout`
        seconds with no client and no running turn (0: never). Raises `ListenError`
        when the socket cannot be had (e.g. another daemon serves it).
        """
        # The socket's modules load here: a daemon on stdio never needs them.
        from jpd.rpc.listener import SocketServer
        from jpd.rpc.socket_claim import SocketClaim, default_socket_path

        socket_path = path if path is not None else default_socket_path(self.settings.env)
        # Handle signals before the socket exists: a client that sees the socket may
        # signal the daemon at once, and the default action would skip the clean stop.
        with anyio.open_signal_receiver(*STOP_SIGNALS) as signals:
            await self._private_data_dir()
            claim = await SocketClaim.acquire(socket_path)
            try:
                ws = _ws_settings(ws_url, ws_token, claim.path)
                listener = await claim.bind()
                async with anyio.create_task_group() as tg:
                    daemon = Daemon(self.settings, tg)
                    await daemon.store.open()  # a fleet's: connected and migrated, or no start
                    idle = self._idle_timeout(daemon)
                    server = SocketServer(
                        daemon, claim.path, idle_timeout=idle, limits=self._limits(daemon)
                    )
                    tg.start_soon(_stop_on_signals, server, signals)
                    if ws is not None:
                        from jpd.rpc.websocket import serve_ws

                        limits = self._limits(daemon)
                        tg.start_soon(
                            serve_ws, ws, server.serve_client, limits.max_frame, server.stop
                        )
                    log.info("jpd (pid %d) listening on %s", os.getpid(), claim.path)
                    await server.serve(listener)
                    tg.cancel_scope.cancel()
            finally:
                claim.release()
        log.info("jpd (pid %d) stopped: %s", os.getpid(), server.stop_reason)
        return 0

    @staticmethod
    def _limits(daemon: Daemon) -> ConnectionLimits:
        try:
            cfg = daemon.configs.load(None).daemon
        except ConfigInvalid as exc:
            log.warning("%s; default connection limits", exc.message)
            return ConnectionLimits()
        return ConnectionLimits(
            max_frame=cfg.max_frame_bytes,
            send_queue=cfg.send_queue_bytes,
            stall_timeout=cfg.client_stall_timeout,
        )

    @staticmethod
    def _idle_timeout(daemon: Daemon) -> float:
        try:
            return daemon.configs.load(None).daemon.idle_timeout
        except ConfigInvalid as exc:
            # A broken config file must not stop the daemon; each turn reports it.
            log.warning("%s; idle timeout %gs", exc.message, DEFAULT_IDLE_TIMEOUT)
            return DEFAULT_IDLE_TIMEOUT


def _ws_settings(url: str | None, token: Path | None, socket_path: Path) -> WsListen | None:
    """`--listen-ws`: checked before anything listens (jpd.rpc.websocket)."""
    if url is None:
        return None
    from jpd.rpc.socket_claim import ListenError
    from jpd.rpc.websocket import WsConfigError, configure

    try:
        return configure(url, token, socket_path)
    except (WsConfigError, OSError) as exc:
        raise ListenError(f"--listen-ws: {exc}") from None


def _reap_orphans(data_dir: Path) -> None:
    from jpd.process_groups import reap_orphans

    reap_orphans(data_dir)


STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


async def _stop_on_signals(server: SocketServer, signals: AsyncIterator[int]) -> None:
    """SIGTERM, SIGINT and SIGHUP stop the listening daemon cleanly."""
    async for signum in signals:
        server.stop(f"signal {signal.Signals(signum).name}")


def create_server(settings: Settings) -> Server:
    """Build a server for `settings` (no global state)."""
    return Server(settings)
