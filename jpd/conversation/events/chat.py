"""The exchange with the model: the user's message, the model's output (and its
checkpoints while it streams), and the retry of a forced tool choice (protocol.md 12.1,
12.4, 9.2)."""

from typing import Literal

from pydantic import BaseModel, ConfigDict

from jpd.conversation.events.base import EventBase
from jpd.protocol.usage import TokenUsage


class ImageFile(BaseModel):
    """An image of a user message, kept as a file in the conversation's folder (never
    base64 in the log)."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    file: str
    """Path relative to the conversation's folder: `images/<sha256>.<ext>`."""
    mime_type: str


class ChatRequest(EventBase):
    type: Literal["chat_request"] = "chat_request"
    content: str
    images: list[ImageFile] | None = None
    """Images sent with the message (absent: none)."""


class ChatResponse(EventBase):
    """Assistant output: a `message` or a `reasoning` block (one per event)."""

    type: Literal["chat_response"] = "chat_response"
    message: str | None = None
    reasoning: str | None = None
    signature: str | None = None
    """Provider signature of a reasoning block (Anthropic), needed to send it back."""
    usage: TokenUsage | None = None
    cost: float | None = None
    """The cost of `usage` at the model's `[prices]` then (absent without a price)."""
    interrupted: bool | None = None
    """True when the daemon stopped while this output streamed: it is what the last
    checkpoints held (written by recovery, protocol.md section 12.4)."""


class ChatCheckpoint(EventBase):
    """Assistant output saved while it streams, so a crash loses at most a moment of it.

    `message`/`reasoning` are the text streamed since the previous checkpoint of the
    same model call; `discard` voids the call's earlier checkpoints (the call is retried).
    Not part of the conversation sent to models: the `chat_response` written when the
    call ends holds the whole output, and recovery turns checkpoints left without one
    into an interrupted `chat_response` (protocol.md section 12.4).
    """

    type: Literal["chat_checkpoint"] = "chat_checkpoint"
    turn_id: str
    message: str | None = None
    reasoning: str | None = None
    discard: bool | None = None


class ForcedToolRetry(EventBase):
    """An answer to a forced tool choice, sent softened while reasoning was on, ended
    without the call: it stays in the conversation, `message` follows it as a user
    message, and the request is sent once more without reasoning (protocol.md 9.2)."""

    type: Literal["forced_tool_retry"] = "forced_tool_retry"
    tool: str | None = None
    """The tool that was forced; absent for `tool_choice` `any`."""
    message: str
