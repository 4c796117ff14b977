"""How the daemon's failures reach the editor: JSON-RPC errors with ACP's codes."""

from __future__ import annotations

from acp import RequestError

from jpcli.acp.link import LinkClosed, LinkError
from jpcli.daemon import DaemonError
from jpcli.rpc import INTERNAL_ERROR

BUSY = -32005  # the daemon's code for "the conversation already has a running turn"
RESOURCE_NOT_FOUND = -32002  # ACP's code for an unknown session
CONVERSATION_NOT_FOUND = -32001  # the daemon's (protocol.md 11)


def request_error(exc: LinkError | DaemonError | LinkClosed) -> RequestError:
    """A daemon failure as the JSON-RPC error the editor gets."""
    if isinstance(exc, LinkError):
        # The daemon's "no such conversation" is ACP's "resource not found".
        code = RESOURCE_NOT_FOUND if exc.code == CONVERSATION_NOT_FOUND else exc.code
        return RequestError(code, exc.message, exc.data)
    return RequestError(INTERNAL_ERROR, f"jpd: {exc}")
