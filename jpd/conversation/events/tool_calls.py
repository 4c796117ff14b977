"""A tool call, what it returned, whether it was allowed, and an MCP server's sampling
during it (protocol.md 12.1, 10.5, 9.7)."""

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from jpd.conversation.events.base import EventBase


class ToolCallRequest(EventBase):
    type: Literal["tool_call_request"] = "tool_call_request"
    id: str
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    title: str | None = None
    """The call in one line, as the `tool_call` turn event's `title` (absent in older
    logs), so a replay shows what the live turn showed."""


class ToolImage(BaseModel):
    """An image a tool returned (an MCP tool's image content), base64 encoded."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    mime_type: str
    data: str


class ToolCallResponse(EventBase):
    type: Literal["tool_call_response"] = "tool_call_response"
    id: str
    content: str
    is_error: bool = False
    images: list[ToolImage] | None = None
    """Images shown to the model beside `content` (absent: none)."""
    interrupted: bool | None = None
    """True for the response recovery writes for a call the daemon stopped during."""


class PermissionDecision(EventBase):
    """Whether a call was allowed to run (`run`) or its result to reach the model
    (`deliver`, `sampling`), and why not (protocol.md 10.5). Not sent to the model: the
    call's result says the same to it."""

    type: Literal["permission_decision"] = "permission_decision"
    tool_call_id: str
    tool_name: str
    kind: str
    allowed: bool
    refused_by: str | None = None
    """Who refused, as the model is told (`the user ("reason")`, a policy, the mode)."""


SamplingOutcome = Literal["completed", "refused", "failed"]


class SamplingMessage(BaseModel):
    model_config = ConfigDict(defer_build=True)
    role: Literal["user", "assistant"]
    text: str


class Sampling(EventBase):
    """An MCP server's `sampling/createMessage` during a tool call, and its outcome
    (protocol.md section 9.7)."""

    type: Literal["sampling"] = "sampling"
    id: str
    """`<tool_call_id>.sampling.<n>`."""
    server: str
    system: str | None = None
    messages: list[SamplingMessage]
    outcome: SamplingOutcome | str
    """One of `SamplingOutcome`; another value (a newer daemon's) is read, never written."""
    text: str | None = None
    """The model's answer (`completed`), or why not (`failed`)."""
