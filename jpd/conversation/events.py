"""Persisted conversation events: one JSON object per line in `events.jsonl`.

The `type` field discriminates; shapes follow protocol.md section 12. The question of
an `inquiry_request` is the one question model (`jpd.protocol.question`), stored by
field name (snake_case). Unknown cancellation reasons are kept verbatim so newer logs
still load, and so are inquiry outcomes (`UnknownOutcome`), stop reasons and sampling
outcomes: read-only (`unknown_value`).
"""

from __future__ import annotations

import functools
from datetime import UTC, datetime
from typing import Annotated, Any, Literal, get_args

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    TypeAdapter,
    model_validator,
)

from jpd.protocol.modes import PermissionMode
from jpd.protocol.question import Question
from jpd.protocol.usage import TokenUsage


def now() -> datetime:
    """The timestamp used for new events (UTC, aware)."""
    return datetime.now(UTC)


class _Event(BaseModel):
    # Persisted records tolerate fields added by newer versions.
    model_config = ConfigDict(extra="ignore", frozen=True, defer_build=True)

    timestamp: datetime = Field(default_factory=now)


class TurnStart(_Event):
    type: Literal["turn_start"] = "turn_start"
    turn_id: str
    model: str | None = None
    workspace: str | None = None
    """The client's workspace root the turn ran in (absolute), when it had one."""
    mode: PermissionMode = "ask"
    """The turn's permission mode (`turn/start` `mode`); a resumed turn keeps it."""
    reasoning_effort: str | None = None
    """The turn's `assistant.reasoning.effort` (absent in older logs): a client that
    resumes the conversation picks it again."""
    config: dict[str, Any] | None = None
    """The config the conversation keeps (RFD 054): the `assistant` part of every
    `turn/start` `config` given so far, later over earlier (protocol.md 5.5)."""
    attachments: list[str] | None = None
    """The attachments the turn sent (the conversation's, then the message's)."""
    instructions: list[str] | None = None
    """The project instruction files (`AGENTS.md`) in the system prompt, relative to
    the workspace root (protocol.md 5.5, "The system prompt")."""


class TurnResume(_Event):
    """An interrupted turn continues under the same id (`turn/resume`, protocol.md 12.4)."""

    type: Literal["turn_resume"] = "turn_resume"
    turn_id: str


class ImageFile(BaseModel):
    """An image of a user message, kept as a file in the conversation's folder (never
    base64 in the log)."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    file: str
    """Path relative to the conversation's folder: `images/<sha256>.<ext>`."""
    mime_type: str


class ChatRequest(_Event):
    type: Literal["chat_request"] = "chat_request"
    content: str
    images: list[ImageFile] | None = None
    """Images sent with the message (absent: none)."""


class ChatResponse(_Event):
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


class ChatCheckpoint(_Event):
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


class ToolCallRequest(_Event):
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


class ToolCallResponse(_Event):
    type: Literal["tool_call_response"] = "tool_call_response"
    id: str
    content: str
    is_error: bool = False
    images: list[ToolImage] | None = None
    """Images shown to the model beside `content` (absent: none)."""
    interrupted: bool | None = None
    """True for the response recovery writes for a call the daemon stopped during."""


# --- inquiries (protocol.md 12.2) -----------------------------------------------------


class ToolSource(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True, defer_build=True)
    type: Literal["tool"] = "tool"
    name: str


class AssistantSource(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True, defer_build=True)
    type: Literal["assistant"] = "assistant"


InquirySource = Annotated[ToolSource | AssistantSource, Field(discriminator="type")]


class InquiryRequest(_Event):
    type: Literal["inquiry_request"] = "inquiry_request"
    id: str
    source: InquirySource
    question: Question


CancellationReason = Literal[
    "user",
    "backend_error",
    "no_prompt_backend",
    "assistant_routing_denied",
    "invalid_static_answer",
    "daemon_stopped",
]
"""The reasons this build writes (protocol.md section 12.2); any string is read back."""


class _InquiryOutcome(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True, defer_build=True)
    id: str


class Answered(_InquiryOutcome):
    outcome: Literal["answered"] = "answered"
    answer: Any


class Cancelled(_InquiryOutcome):
    outcome: Literal["cancelled"] = "cancelled"
    # Any string: reasons this build does not know are preserved verbatim (protocol.md 12.2).
    # A record without a reason predates reasons and was a user cancellation.
    reason: str = "user"


class Redacted(_InquiryOutcome):
    outcome: Literal["redacted"] = "redacted"


class UnknownOutcome(_InquiryOutcome):
    """An outcome this version does not know (a newer daemon wrote it), read as it is:
    all its fields are kept, it is shown as unknown, and it still closes its request, so
    nothing is invented for it (protocol.md 12.2). This version never writes one."""

    model_config = ConfigDict(extra="allow", frozen=True, defer_build=True)
    outcome: str


KNOWN_OUTCOMES = frozenset({"answered", "cancelled", "redacted"})


def _outcome_tag(value: Any) -> str:
    outcome = value.get("outcome") if isinstance(value, dict) else getattr(value, "outcome", None)
    return outcome if outcome in KNOWN_OUTCOMES else "unknown"


InquiryOutcome = Annotated[
    Annotated[Answered, Tag("answered")]
    | Annotated[Cancelled, Tag("cancelled")]
    | Annotated[Redacted, Tag("redacted")]
    | Annotated[UnknownOutcome, Tag("unknown")],
    Discriminator(_outcome_tag),
]


class InquiryResponse(_Event):
    type: Literal["inquiry_response"] = "inquiry_response"
    response: InquiryOutcome

    @model_validator(mode="before")
    @classmethod
    def _nest(cls, data: Any) -> Any:
        # On disk the outcome is flat: {type, timestamp, id, outcome, answer|reason}.
        # Legacy records `{id, answer}` have no outcome and read as answered.
        if isinstance(data, dict) and "response" not in data:
            data = dict(data)
            if data.get("outcome", "answered") in KNOWN_OUTCOMES:
                keys: Any = ("id", "outcome", "answer", "reason")
            else:  # an unknown outcome keeps every field it came with
                keys = [k for k in data if k not in ("type", "timestamp")]
            flat = {k: data.pop(k) for k in keys if k in data}
            flat.setdefault("outcome", "answered")
            data["response"] = flat
        return data

    @property
    def id(self) -> str:
        return self.response.id

    def to_record(self) -> dict[str, Any]:
        """The flat on-disk shape."""
        out: dict[str, Any] = self.model_dump(mode="json", include={"type", "timestamp"})
        out.update(self.response.model_dump(mode="json"))
        return out


SamplingOutcome = Literal["completed", "refused", "failed"]
TurnStopReason = Literal["end_turn", "max_tokens", "cancelled", "error", "interrupted"]


class SamplingMessage(BaseModel):
    model_config = ConfigDict(defer_build=True)
    role: Literal["user", "assistant"]
    text: str


class Sampling(_Event):
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


class ForcedToolRetry(_Event):
    """An answer to a forced tool choice, sent softened while reasoning was on, ended
    without the call: it stays in the conversation, `message` follows it as a user
    message, and the request is sent once more without reasoning (protocol.md 9.2)."""

    type: Literal["forced_tool_retry"] = "forced_tool_retry"
    tool: str | None = None
    """The tool that was forced; absent for `tool_choice` `any`."""
    message: str


class PermissionDecision(_Event):
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


class TurnEnd(_Event):
    """How a turn ended; written last in every turn (protocol.md 12.1)."""

    type: Literal["turn_end"] = "turn_end"
    turn_id: str
    stop_reason: TurnStopReason | str
    """One of `TurnStopReason` (`interrupted`: the daemon stopped during the turn, written
    by recovery); another value (a newer daemon's) is read, never written."""
    error: str | None = None


# --- workspace changes (protocol.md, "Workspace tools") ----------------------------------


class FileChanged(_Event):
    """A tool changed a file of the workspace. What the file held before is kept in the
    conversation's `snapshots/<before>` (content-addressed), so `turn/undo` can put it
    back after a restart."""

    type: Literal["file_changed"] = "file_changed"
    turn_id: str
    tool_call_id: str | None = None
    path: str
    """The file's real, absolute path."""
    before: str | None = None
    """sha256 of the content before (absent: the tool created the file)."""
    after: str
    created_dirs: list[str] | None = None
    """Folders made for a created file (real paths, outermost first): an undo removes
    them again when empty."""
    """sha256 of the content the tool wrote."""


class TurnUndone(_Event):
    """`turn/undo` put back the files a turn changed."""

    type: Literal["turn_undo"] = "turn_undo"
    turn_id: str
    restored: list[str] = Field(default_factory=list)
    """Files given back their earlier content."""
    removed: list[str] = Field(default_factory=list)
    """Files the turn had created, removed again."""


CompactionTrigger = Literal["auto", "manual", "overflow"]
CompactionMethod = Literal["stub", "summary", "trim"]


class LearnedWindow(BaseModel):
    """A model's real context window, as its provider stated it in a refusal."""

    model_config = ConfigDict(extra="ignore", frozen=True, defer_build=True)

    model: str
    """The turn's `<provider>/<model>`."""
    tokens: int


class ContextCompacted(_Event):
    """What the model is sent from now on leaves out part of the log (protocol.md 12.5).

    The log keeps every event; the model's view is rebuilt from it plus the latest
    compaction of each method (`jpd.llm.history`). Positions count the conversation's
    events as `conversation/get` returns them, from 0.
    """

    type: Literal["context_compacted"] = "context_compacted"
    trigger: CompactionTrigger | str
    method: CompactionMethod | str
    """`stub`: tool outputs before `end_event` are sent as one-line stubs; `summary`:
    the events before `end_event` are sent as `summary`; `trim`: as `summary`, but the
    summary is a fixed note (the model could not write one)."""
    first_event: int
    end_event: int
    """The events covered: positions `first_event` up to, not including, `end_event`."""
    summary: str | None = None
    tokens_before: int
    tokens_after: int
    model: str | None = None
    """The model that wrote the summary."""
    instructions: str | None = None
    """What the user asked the summary to focus on (`conversation/compact`)."""
    window: LearnedWindow | None = None
    """The window a provider stated when it refused a request of this conversation (an
    `overflow` compaction), smaller than the configured one: later turns on that model
    plan against it."""


Event = Annotated[
    TurnStart
    | TurnResume
    | ChatRequest
    | ChatResponse
    | ChatCheckpoint
    | ToolCallRequest
    | ToolCallResponse
    | InquiryRequest
    | InquiryResponse
    | Sampling
    | ForcedToolRetry
    | PermissionDecision
    | FileChanged
    | TurnUndone
    | ContextCompacted
    | TurnEnd,
    Field(discriminator="type"),
]


@functools.cache
def event_adapter() -> TypeAdapter[Event]:
    """The validator of any event, built on first use (protocol.md section 4, "Start-up")."""
    return TypeAdapter(Event)


def parse_event(line: str | bytes) -> Event:
    """Parse one JSONL line into an event (raises `pydantic.ValidationError`)."""
    return event_adapter().validate_json(line)


def dump_event(event: Event) -> str:
    """Serialize an event to its one-line on-disk JSON form (no trailing newline)."""
    import json

    if isinstance(event, InquiryResponse):
        return json.dumps(event.to_record(), separators=(",", ":"))
    return event.model_dump_json(exclude_none=True)


def event_to_json(event: Event) -> dict[str, Any]:
    """The JSON-ready dict of an event, as stored on disk (used by `conversation/get`)."""
    import json

    result: dict[str, Any] = json.loads(dump_event(event))
    return result


def unknown_value(event: Event) -> str | None:
    """The value of `event` this version does not know, named (None: all are known).

    Such values come from a newer daemon's log: they are read and kept as they are,
    never written by this version (protocol.md 12.2, 12.3)."""
    if isinstance(event, InquiryResponse) and isinstance(event.response, UnknownOutcome):
        return f"inquiry outcome {event.response.outcome!r}"
    if isinstance(event, TurnEnd) and event.stop_reason not in get_args(TurnStopReason):
        return f"stop reason {event.stop_reason!r}"
    if isinstance(event, Sampling) and event.outcome not in get_args(SamplingOutcome):
        return f"sampling outcome {event.outcome!r}"
    return None
