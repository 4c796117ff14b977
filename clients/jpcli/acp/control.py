"""The bridge's daemon connection for requests of no session: `session/list`,
`session/delete` and the daemon's data folder (for a replay's images)."""

from __future__ import annotations

import logging
import os
from typing import Any

from acp.schema import SessionInfo

from jpcli.acp import link as daemon_link
from jpcli.acp.daemon_errors import request_error
from jpcli.acp.link import DaemonLink, LinkClosed, LinkError
from jpcli.daemon import DaemonError
from jpcli.remote import remote_from_env

log = logging.getLogger(__name__)


class Control:
    """One connection, made on first use and made again when the daemon went away."""

    def __init__(self, environ: dict[str, str] | None) -> None:
        self.environ = environ
        self._link: DaemonLink | None = None

    async def link(self) -> DaemonLink:
        if self._link is None or self._link.closed.is_set():
            self._link = await daemon_link.connect(os.getcwd(), {}, environ=self.environ)
        return self._link

    async def sessions(self, wanted: str | None) -> list[SessionInfo]:
        """Conversations with a known workspace, newest first, of `wanted` when given."""
        try:
            listed = await (await self.link()).request("conversation/list")
        except (LinkError, LinkClosed, DaemonError) as exc:
            raise request_error(exc) from None
        return _sessions(listed.get("conversations", []), wanted)

    async def delete(self, conversation_id: str) -> None:
        """`conversation/delete`."""
        try:
            control = await self.link()
            await control.request("conversation/delete", {"conversationId": conversation_id})
        except (LinkError, LinkClosed, DaemonError) as exc:
            raise request_error(exc) from None

    async def data_dir(self) -> str | None:
        """The daemon's data folder when it is on this machine (images of a replay)."""
        if remote_from_env(self.environ or os.environ) is not None:
            return None
        try:
            status = await (await self.link()).request("daemon/status")
        except (LinkError, LinkClosed, DaemonError) as exc:
            log.warning("daemon/status failed; replayed images are not shown: %s", exc)
            return None
        data_dir = status.get("dataDir") if isinstance(status, dict) else None
        return data_dir if isinstance(data_dir, str) else None

    async def close(self) -> None:
        if self._link is not None:
            await self._link.close()


def _sessions(conversations: list[dict[str, Any]], wanted: str | None) -> list[SessionInfo]:
    """The listed conversations with a known workspace (`wanted` when given), as sessions."""
    return [
        SessionInfo(
            session_id=c["conversationId"],
            cwd=c["workspace"],
            title=c.get("title") or None,
            updated_at=c.get("updatedAt"),
        )
        for c in conversations
        if c.get("workspace") and (wanted is None or os.path.normpath(c["workspace"]) == wanted)
    ]
