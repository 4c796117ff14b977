"""What the rest of the daemon sees of MCP servers, free of SDK types.

The tool coordinator calls MCP tools through `McpCaller` and lends each call a
`CallHooks`, through which the server's questions (elicitation), sampling requests
and progress reach the inquiry router, the permission gate and the turn's events.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from jpd.config.mcp import McpServerConfig
from jpd.protocol.question import Question


@dataclass(frozen=True)
class McpToolInfo:
    """One tool as a server lists it."""

    name: str
    description: str
    input_schema: dict[str, Any]


@dataclass(frozen=True)
class ServerListing:
    """The tools of one server, or why it could not be asked for them."""

    server: str
    tools: tuple[McpToolInfo, ...] = ()
    error: str | None = None


@dataclass(frozen=True)
class McpToolRef:
    """Which server tool an effective tool calls."""

    server: str
    tool: str
    config: McpServerConfig


@dataclass(frozen=True)
class McpResult:
    """What a call gave: the text the model reads, and whether it is an error."""

    content: str
    is_error: bool
    structured: dict[str, Any] | None = None
    images: tuple[tuple[str, str], ...] = ()
    """(MIME type, base64 data) of the image blocks, for providers that take images."""


@dataclass(frozen=True)
class Asked:
    """The outcome of one question: an answer, or why there is none."""

    answered: bool
    value: Any = None
    reason: str = ""
    """For no answer: the recorded cancel reason (`user`, `no_prompt_backend`, ...)."""
    message: str = ""


@dataclass(frozen=True)
class SamplingRequest:
    """A server's `sampling/createMessage`, reduced to what the inquiry model needs."""

    messages: tuple[tuple[str, str], ...]
    """(role, text) pairs."""
    system: str | None = None
    max_tokens: int = 1024
    temperature: float | None = None
    server: str = ""
    ask_permission: bool = True
    """The server's `sampling` setting is `ask`."""


class SamplingError(Exception):
    """The model could not complete a sampling request."""


class CallHooks(Protocol):
    """What one running MCP tool call may ask of the turn it belongs to."""

    @property
    def call_id(self) -> str: ...

    async def ask(self, question: Question) -> Asked:
        """Route `question` as a question of this call (recorded, exclusive as set)."""
        ...

    async def sample(self, request: SamplingRequest) -> str | None:
        """Permission, then the inquiry model's text; None when refused; raises
        `SamplingError` when the model fails."""
        ...

    def progress(self, progress: float, total: float | None, message: str | None) -> None:
        """A progress notification of this call."""
        ...


class McpCaller(Protocol):
    """Calls tools of MCP servers (the daemon's `McpManager`, bound to a workspace)."""

    async def call(
        self,
        ref: McpToolRef,
        arguments: dict[str, Any],
        hooks: CallHooks,
        timeout: float | None,  # noqa: ASYNC109 (a per-tool setting passed through)
    ) -> McpResult:
        """Call one tool; every failure comes back as an error result naming the server."""
        ...
