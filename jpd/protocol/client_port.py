"""What the core knows of a connected client: an id, its capabilities, and typed ways to
talk, keyed by entries of the method table (`jpd.protocol.method_table`).

The rpc layer implements `ClientLink`; the core never sees a transport or a method name.
"""

import functools
import json
from pathlib import Path
from typing import Any, Protocol, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from jpd.protocol.base import WireModel
from jpd.protocol.method_table import ServerNotification, ServerRequest
from jpd.protocol.question import AnswerTypeName
from jpd.protocol.turn_events import TurnEventParams

P = TypeVar("P", bound=WireModel)
R = TypeVar("R", bound=WireModel)


class ClientCapabilities(BaseModel):
    """What a client said it can do in `initialize`."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    prompt_answer_types: frozenset[AnswerTypeName] = Field(default_factory=frozenset)
    permission: bool = False


_compact = json.JSONEncoder(separators=(",", ":")).encode
"""`json.dumps` with these separators builds an encoder per call: half its time for a delta."""


class Notification:
    """A daemon-to-client notification, encoded once however many clients receive it."""

    # No `__dict__`: the hub keeps thousands of these for replay, one tracked object each
    # for the garbage collector (`_body` and `_wire` cache the encodings).
    __slots__ = ("_body", "_params", "_wire", "method")

    def __init__(self, method: ServerNotification[P], params: P) -> None:
        self.method: ServerNotification[Any] = method
        self._params: WireModel | None = params
        self._wire: dict[str, Any] | None = None
        self._body: bytes | None = None

    @classmethod
    def from_wire(cls, method: ServerNotification[Any], wire: dict[str, Any]) -> "Notification":
        """A notification this daemon dumped before (e.g. filed for replay), sent as it is."""
        note = cls.__new__(cls)
        note.method, note._params, note._wire, note._body = method, None, wire, None
        return note

    @property
    def wire(self) -> dict[str, Any]:
        """The params as they go on the wire."""
        wire = self._wire
        if wire is None:
            assert self._params is not None
            wire = self._wire = self._params.to_wire()
        return wire

    @property
    def body(self) -> bytes:
        """The JSON-RPC message, UTF-8 encoded (computed on first use, then shared)."""
        body = self._body
        if body is None:
            body = self._body = self._encode()
        return body

    def params_json(self) -> bytes:
        """The params' JSON as sent: `json.dumps` of `wire`, compact and ASCII (a slice
        of `body`, which holds it already: no second encoding, e.g. to file the event
        for replay)."""
        body = self.body
        head = _params_head(self.method.name)
        if body.startswith(head) and body.endswith(b"}"):
            return body[len(head) : -1]
        return _compact(self.wire).encode()

    def _encode(self) -> bytes:
        params = self._params
        if type(params) is TurnEventParams:
            delta = params.delta_message(self.method.name)
            if delta is not None:
                return delta
        message = {"jsonrpc": "2.0", "method": self.method.name, "params": self.wire}
        return _compact(message).encode()


@functools.cache
def _params_head(method: str) -> bytes:
    """What precedes the params in the body of a `method` notification."""
    return b'{"jsonrpc":"2.0","method":' + _compact(method).encode() + b',"params":'


class ClientLink(Protocol):
    """One connected client, as the core sees it."""

    @property
    def link_id(self) -> int:
        """Unique per connection for the daemon's lifetime."""
        ...

    @property
    def capabilities(self) -> ClientCapabilities:
        """Declared in `initialize`."""
        ...

    @property
    def workspace_root(self) -> Path | None:
        """The client's workspace, used for `<workspace>/.jp/config.toml` and tools."""
        ...

    @property
    def peer_verified(self) -> bool:
        """Whether the peer is known to be an unsandboxed process of the user (the Unix
        socket's peer rule passed, or stdio): only then may its `environment.env` select
        config and state paths (protocol.md 5.5)."""
        ...

    def notify(self, method: ServerNotification[P], params: P) -> None:
        """Queue a notification; never blocks, silently dropped if the client is gone."""
        ...

    def send(self, notification: Notification) -> None:
        """Queue a prepared notification (as `notify`; its encoding is shared)."""
        ...

    async def request(self, method: ServerRequest[P, R], params: P) -> R:
        """Send a server-to-client request and await the client's result, validated with
        `method.result`. Raises `RequestCancelled` when the client cancelled it,
        `InvalidClientResult` when the result does not fit, `ClientError` for any other
        error answer, and `ConnectionLost` when the client went away."""
        ...
