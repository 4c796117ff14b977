"""The provider interface: a chat request in, typed stream events out.

Every provider (test, local, anthropic, openai) implements `Provider` and yields only
the events defined here, so the turn loop never sees a wire format.
"""

from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager
from typing import Annotated, Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from jpd.conversation.events import ToolImage
from jpd.protocol.usage import TokenUsage


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)


# --- messages sent to a provider -------------------------------------------------


class UserMessage(_Model):
    role: Literal["user"] = "user"
    content: str
    images: tuple[ToolImage, ...] = Field(default=(), exclude_if=lambda images: not images)
    """Images sent with the message (left out of dumps when there are none), and PDF
    documents (`mime_type` `PDF`) for the providers that take them."""


PDF = "application/pdf"
"""The document type a user message's `images` may carry besides images."""


def pictures(images: tuple[ToolImage, ...]) -> list[ToolImage]:
    """The images among `images` (no documents): for a provider without documents, whose
    conversation had them under another model."""
    return [image for image in images if image.mime_type != PDF]


FOREIGN_SIGNATURES = ("gemini:", "openai:")
"""Prefixes of the `reasoning_signature`s other providers than Anthropic keep (Gemini's
thought signature, OpenAI's reasoning item): each provider sends back only its own."""


class ToolCallPart(_Model):
    id: str
    name: str
    arguments: dict[str, Any]


class AssistantMessage(_Model):
    role: Literal["assistant"] = "assistant"
    content: str = ""
    reasoning: str | None = None
    reasoning_signature: str | None = None
    """Provider signature of `reasoning` (Anthropic thinking; `gemini:`/`openai:` and the
    other providers' opaque reasoning state); required to send it back."""
    tool_calls: tuple[ToolCallPart, ...] = ()


class ToolResultMessage(_Model):
    role: Literal["tool"] = "tool"
    tool_call_id: str
    content: str
    is_error: bool = False
    images: tuple[ToolImage, ...] = Field(default=(), exclude_if=lambda images: not images)
    """Images returned with the result, for providers that take them (left out of dumps
    when there are none, so records of image-less results keep their shape)."""


Message = Annotated[UserMessage | AssistantMessage | ToolResultMessage, Field(discriminator="role")]


class ToolDefinition(_Model):
    name: str
    description: str
    parameters: dict[str, Any]
    """A JSON schema object describing the arguments."""
    strict: bool = False
    """Ask the provider to enforce the schema exactly (sent only when true)."""


class ToolChoiceAuto(_Model):
    type: Literal["auto"] = "auto"


class ToolChoiceNone(_Model):
    type: Literal["none"] = "none"


class ToolChoiceAny(_Model):
    type: Literal["any"] = "any"


class ToolChoiceTool(_Model):
    type: Literal["tool"] = "tool"
    name: str


ToolChoice = Annotated[
    ToolChoiceAuto | ToolChoiceNone | ToolChoiceAny | ToolChoiceTool, Field(discriminator="type")
]

TOOL_CHOICE_AUTO = ToolChoiceAuto()
"""`auto`, made once: the choices are frozen, and most model calls use this one."""


class ModelRequest(_Model):
    """Everything a provider needs for one model call."""

    model: str
    """The model name within the provider (the part after `<provider>/`)."""
    system: str | None = None
    messages: tuple[Message, ...]
    tools: tuple[ToolDefinition, ...] = ()
    tool_choice: ToolChoice = ToolChoiceAuto()
    max_tokens: int | None = None
    temperature: float | None = None
    reasoning_effort: Literal["off", "low", "medium", "high"] = "off"
    reasoning_budget: int | None = None
    """Token budget for extended thinking where the provider takes one."""
    response_schema: dict[str, Any] | None = None
    """The answer must be JSON valid against this schema (jpd/llm/structured.py)."""
    pinned_arguments: dict[str, Any] | None = None
    """A JSON schema the forced tool's arguments are decoded under, narrower than the
    tool's own, by a provider that `constrains_decoding` (others ignore it). Never part
    of the prompt: the tools the model reads stay as they are (protocol.md 10.4)."""


# --- events a provider yields ------------------------------------------------------


class TextDelta(_Model):
    kind: Literal["text_delta"] = "text_delta"
    text: str

    @classmethod
    def of(cls, text: str) -> "TextDelta":
        """`TextDelta(text=text)` for a `text` known to be a `str` (a stream's reader
        made it): built as `model_construct` would, without validation, in a third of
        the time (once per streamed token)."""
        delta = _new(cls)
        _set(delta, "__dict__", {"kind": "text_delta", "text": text})
        _set(delta, "__pydantic_fields_set__", {"text"})
        _set(delta, "__pydantic_extra__", None)
        _set(delta, "__pydantic_private__", None)
        return delta


_new, _set = object.__new__, object.__setattr__


class ReasoningDelta(_Model):
    kind: Literal["reasoning_delta"] = "reasoning_delta"
    text: str
    signature: str | None = None
    """Set (with empty `text`) once a reasoning block ends, if the provider signed it."""


class ToolCallEvent(_Model):
    kind: Literal["tool_call"] = "tool_call"
    id: str
    name: str
    arguments: dict[str, Any]


class UsageEvent(_Model):
    kind: Literal["usage"] = "usage"
    usage: TokenUsage


FinishReason = Literal["end_turn", "max_tokens", "tool_use"]


class Finish(_Model):
    kind: Literal["finish"] = "finish"
    reason: FinishReason


class Retry(_Model):
    """A failed attempt that will be retried after `delay` seconds (shown to clients).

    Everything yielded since the previous `Retry` (or the start of the stream)
    belonged to the failed attempt and is void: the next attempt starts over.
    """

    kind: Literal["retry"] = "retry"
    attempt: int
    delay: float
    reason: str


StreamEvent = TextDelta | ReasoningDelta | ToolCallEvent | UsageEvent | Retry | Finish

EventStream = AbstractAsyncContextManager[AsyncIterator[StreamEvent]]
"""What `Provider.stream` returns: `async with provider.stream(request) as events:`."""


class Provider(Protocol):
    """A model backend. `stream` yields events and ends with exactly one `Finish`."""

    name: str
    refuses_forced_tool_with_reasoning: bool
    """Its API refuses a forced tool choice while reasoning is on: such a request is
    sent softened and its sender retries a miss once without reasoning (protocol.md
    9.2, `jpd.llm.forced_tool`)."""
    constrains_decoding: bool
    """It decodes a forced tool's arguments under a grammar and honours
    `ModelRequest.pinned_arguments` (the embedded model); the inquiry backend pins
    answers only there (protocol.md 10.4)."""

    def stream(self, request: ModelRequest) -> EventStream:
        """Run one model call: `async with provider.stream(request) as events`, then
        iterate `events` as they arrive. The block may hold tasks that read ahead for
        the iteration (`jpd.llm.readahead`), so the events are read inside it.

        Raises `jpd.llm.errors.ProviderError` on failure. Cancelling the consuming
        task must stop the underlying work promptly.
        """
        ...

    async def aclose(self) -> None:
        """Release resources (HTTP clients, loaded models)."""
        ...


@runtime_checkable
class TokenCounter(Protocol):
    """A provider that counts a request's prompt tokens exactly (the embedded model)."""

    @property
    def context_window(self) -> int:
        """The window it runs with, in tokens."""
        ...

    async def count_tokens(self, request: ModelRequest) -> int:
        """The prompt size of `request` as the model would see it."""
        ...

    def token_bound(self, request: ModelRequest) -> int:
        """At least `count_tokens(request)`, computed without the tokenizer: while it
        stays under a limit, no exact count is needed."""
        ...
