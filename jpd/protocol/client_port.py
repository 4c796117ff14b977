"""What the core knows of a connected client: an id, its capabilities, and two ways to talk.

The rpc layer implements `ClientLink`; the core never sees a transport.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field

from jpd.protocol.question import AnswerTypeName


class ClientCapabilities(BaseModel):
    """What a client said it can do in `initialize`."""

    model_config = ConfigDict(frozen=True)

    prompt_answer_types: frozenset[AnswerTypeName] = Field(default_factory=frozenset)
    permission: bool = False


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

    async def request(self, method: str, params: dict[str, Any]) -> Any:
        """Send a server-to-client request and await the client's result."""
        ...
