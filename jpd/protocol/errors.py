"""Typed errors of the daemon core, each carrying its JSON-RPC error code.

The core raises these; the rpc boundary turns them into JSON-RPC errors without
tracebacks. Codes in -32099..-32000 are ours; the rest are JSON-RPC/LSP standard.
"""

from __future__ import annotations

from typing import Any


class JpdError(Exception):
    """Base of every error a client may see. `message` is one line."""

    code = -32603

    def __init__(self, message: str, *, data: Any = None) -> None:
        super().__init__(message)
        self.message = message
        self.data = data


class ParseError(JpdError):
    code = -32700


class InvalidRequest(JpdError):
    code = -32600


class MethodNotFound(JpdError):
    code = -32601


class InvalidParams(JpdError):
    code = -32602


class InternalError(JpdError):
    code = -32603


class NotInitialized(JpdError):
    code = -32002


class RequestCancelled(JpdError):
    code = -32800


class NotFound(JpdError):
    """A conversation, turn or inquiry does not exist."""

    code = -32001


class ConfigInvalid(JpdError):
    """Configuration (files, `-c`, or `turn/start` overrides) is invalid."""

    code = -32003


class ProviderUnavailableError(JpdError):
    """The selected model's provider cannot be used (missing extra or key)."""

    code = -32004


class Busy(JpdError):
    """The conversation already has a running turn."""

    code = -32005


class StoreUnavailableError(JpdError):
    """A fleet member cannot reach its conversation store (Postgres) within seconds."""

    code = -32008


class WrongDaemon(JpdError):
    """The client expects another data dir than the daemon serves (protocol.md 5.1)."""

    code = -32006


class ClientError(JpdError):
    """A client answered a server-to-client request with an error."""

    code = -32603


class InvalidClientResult(ClientError):
    """A client's result does not fit the method's result model."""

    code = -32602


class ConnectionLost(ClientError):
    """The client went away while the daemon awaited its answer."""

    code = -32603


class PeerRefused(JpdError):
    """The process on the other end of the socket may not use the daemon (protocol.md 2.1)."""

    code = -32007
