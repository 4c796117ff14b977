"""`create_server(settings)`: the daemon process, wired together."""

from __future__ import annotations

import logging

import anyio

from jpd.core.daemon import Daemon
from jpd.rpc.stdio import serve_stdio
from jpd.settings import Settings

log = logging.getLogger(__name__)


class Server:
    """A daemon plus its transports."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings

    async def run_stdio(self, in_fd: int, out_fd: int) -> int:
        """Serve one client on stdio; cancel and record running turns at the end."""
        async with anyio.create_task_group() as tg:
            daemon = Daemon(self.settings, tg)
            try:
                code = await serve_stdio(daemon, in_fd, out_fd)
            finally:
                with anyio.CancelScope(shield=True):
                    await daemon.aclose()
            tg.cancel_scope.cancel()
        return code


def create_server(settings: Settings) -> Server:
    """Build a server for `settings` (no global state)."""
    return Server(settings)
