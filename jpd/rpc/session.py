"""Per-connection state: lifecycle flags, declared capabilities, and the `ClientLink` face.

The boundary module fills in how to send; this module knows no transport and no pygls.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import anyio

from jpd.protocol.base import WireModel
from jpd.protocol.client_port import ClientCapabilities, Notification
from jpd.protocol.method_table import ServerNotification, ServerRequest
from jpd.rpc.transport import Host

log = logging.getLogger(__name__)

_ids = itertools.count(1)

SendNotification = Callable[[Notification], None]
Request = Callable[[str, dict[str, Any]], Awaitable[Any]]

P = TypeVar("P", bound=WireModel)
R = TypeVar("R", bound=WireModel)


class Session:
    """One client connection, as seen by the daemon core (implements `ClientLink`)."""

    def __init__(self, send_notification: SendNotification, request: Request) -> None:
        self._link_id = next(_ids)
        self._send_notification = send_notification
        self._request = request
        self.capabilities_: ClientCapabilities = ClientCapabilities()
        self.workspace_root_: Path | None = None
        self.client_name: str = "?"
        self.initialized = False
        self.shutdown_requested = False
        self.closed = anyio.Event()
        self._open = True
        """`closed` not set yet (a plain flag: `send` reads it once per token)."""
        self.exit_code = 1
        self.peer_verified_ = False
        """Whether the transport vouched that the peer is an unsandboxed process of the
        user (jpd/tools/peer_rule.py); set by the rpc boundary."""
        self.host: Host | None = None
        """The process serving this connection (set by the rpc boundary)."""
        self.on_attach: Callable[[str], None] = lambda conversation_id: None
        """Called before `turn/attach` replays a conversation (the boundary resumes the
        events it stopped sending a lagging client)."""

    @property
    def link_id(self) -> int:
        return self._link_id

    @property
    def capabilities(self) -> ClientCapabilities:
        return self.capabilities_

    @property
    def workspace_root(self) -> Path | None:
        return self.workspace_root_

    @property
    def peer_verified(self) -> bool:
        return self.peer_verified_

    def notify(self, method: ServerNotification[P], params: P) -> None:
        """Queue a notification to this client (dropped once the connection closed)."""
        self.send(Notification(method, params))

    def send(self, notification: Notification) -> None:
        """Queue a prepared notification; its encoded body is shared with other clients."""
        if not self._open:
            return
        try:
            self._send_notification(notification)
        except Exception:  # a dead client must not break a turn
            name = notification.method.name
            log.warning("could not notify client %s of %s", self._link_id, name)

    async def request(self, method: ServerRequest[P, R], params: P) -> R:
        """Send a request to the client and await its result, validated."""
        return method.read_result(await self._request(method.name, params.to_wire()))

    def close(self, exit_code: int) -> None:
        """Mark the connection finished (after `exit` or end of input)."""
        self.exit_code = exit_code
        self._open = False
        self.closed.set()
