"""What the core knows of a connected client: an id, its capabilities, and two ways to talk.

The rpc layer implements `ClientLink`; the core never sees a transport.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field

from jpd.protocol.question import AnswerTypeName


class ClientCapabilities(BaseModel):
    """What a client said it can do in `initialize`."""

    model_config = ConfigDict(frozen=True)

    prompt_answer_types: frozenset[AnswerTypeName] = Field(default_factory=frozenset)
    permission: bool = False


class Notification:
    """A daemon-to-client notification, encoded once however many clients receive it."""

    __slots__ = ("__dict__", "method", "params")

    def __init__(self, method: str, params: dict[str, Any]) -> None:
        self.method = method
        self.params = params

    @functools.cached_property
    def body(self) -> bytes:
        """The JSON-RPC message, UTF-8 encoded (computed on first use, then shared)."""
        message = {"jsonrpc": "2.0", "method": self.method, "params": self.params}
        return json.dumps(message, separators=(",", ":")).encode()


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

    def notify(self, method: str, params: dict[str, Any]) -> None:
        """Queue a notification; never blocks, silently dropped if the client is gone."""
        ...

    def send(self, notification: Notification) -> None:
        """Queue a prepared notification (as `notify`; its encoding is shared)."""
        ...

    async def request(self, method: str, params: dict[str, Any]) -> Any:
        """Send a server-to-client request and await the client's result."""
        ...
