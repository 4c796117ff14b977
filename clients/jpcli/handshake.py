"""What every way of reaching a daemon shares: the `initialize` handshake and the
error a lost or missing daemon raises (the socket, the private stdio daemon, ssh)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from jpcli import __version__
from jpcli.rpc import Connection

PROTOCOL_VERSION = 1


class DaemonError(Exception):
    """The daemon could not be reached or went away; the message is one line for the user."""


class NotRunning(DaemonError):
    """No daemon answers on the socket (and `jp` was told not to start one)."""


def initialize(
    connection: Connection,
    workspace_root: str,
    capabilities: Mapping[str, Any],
    data_dir: str | None = None,
) -> dict[str, Any]:
    """The `initialize` handshake; returns the daemon's `serverInfo`. With `data_dir`,
    a daemon serving another data dir refuses (-32006)."""
    params: dict[str, Any] = {
        "protocolVersion": PROTOCOL_VERSION,
        "clientInfo": {"name": "jp", "version": __version__},
        "capabilities": dict(capabilities),
    }
    if workspace_root:  # empty: none (a remote daemon without a named workspace)
        params["workspaceRoot"] = workspace_root
    if data_dir is not None:
        params["dataDir"] = data_dir
    result = connection.request("initialize", params)
    connection.notify("initialized", {})
    info = result.get("serverInfo") if isinstance(result, dict) else None
    return info if isinstance(info, dict) else {}
