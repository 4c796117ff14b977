"""The `event` payloads of `turn/event` notifications (camelCase on the wire).

These are the live progress of a turn, distinct from persisted conversation events.
"""

from json.encoder import encode_basestring_ascii
from typing import Annotated, Any, Literal

from pydantic import Field

from jpd.protocol.base import WireModel
from jpd.protocol.usage import TokenUsage

StopReason = Literal["end_turn", "max_tokens", "cancelled", "error"]


class TurnStarted(WireModel):
    kind: Literal["turn_started"] = "turn_started"
    model: str


class TextDeltaEvent(WireModel):
    kind: Literal["text_delta"] = "text_delta"
    text: str


class ReasoningDeltaEvent(WireModel):
    kind: Literal["reasoning_delta"] = "reasoning_delta"
    text: str


class ToolLocation(WireModel):
    """A place a tool call works on, so an editor can follow along."""

    path: str
    """Absolute path."""
    line: int | None = None
    """1-based line, when the call names one."""


class FileDiff(WireModel):
    """The edit a call makes: `oldText` (absent: a new file) becomes `newText` in `path`."""

    path: str
    old_text: str | None = None
    new_text: str


class ToolCallStarted(WireModel):
    kind: Literal["tool_call"] = "tool_call"
    id: str
    name: str
    arguments: dict[str, Any]
    hidden: bool = False
    """The tool's `style.hidden`: clients need not show this call."""
    title: str = ""
    """The call in one line, as people write it (`Read src/a.py (1-50)`, the command
    itself, never cut; paths relative to the workspace): jpd/tools/titles.py."""
    tool_kind: str = "other"
    """What the call does: `read`, `search`, `edit`, `execute`, ... (jpd/tools/kinds.py)."""
    locations: list[ToolLocation] = []
    diff: FileDiff | None = None
    """For an edit: the whole file before (absent: a new file) and after; the call's own
    fragment when the file could not be read or does not hold the old text."""


class ToolResult(WireModel):
    kind: Literal["tool_result"] = "tool_result"
    id: str
    content: str
    is_error: bool
    hidden: bool = False


class ToolProgress(WireModel):
    """Progress a running tool reports (an MCP server's `notifications/progress`)."""

    kind: Literal["tool_progress"] = "tool_progress"
    id: str
    progress: float
    total: float | None = None
    message: str | None = None


class ContextUsage(WireModel):
    """How full the model's context is after a response (protocol.md 12.5)."""

    used: int
    """Tokens of the conversation as the model now holds it (prompt and answer)."""
    window: int
    """The model's context window in tokens."""


class UsageReported(WireModel):
    kind: Literal["usage"] = "usage"
    usage: TokenUsage
    cost: float | None = None
    """This response's cost from `[prices]` (per million tokens), when the model has one."""
    context: ContextUsage | None = None
    """Set when the model's window is known."""


class ContextCompactedEvent(WireModel):
    """The turn compacted its context before a model call (the `context_compacted`
    conversation event, protocol.md 12.5)."""

    kind: Literal["context_compacted"] = "context_compacted"
    trigger: str
    """`auto`, `manual` or `overflow`."""
    method: str
    """`stub`, `summary` or `trim`."""
    tokens_before: int
    tokens_after: int
    summary: str | None = None
    window: int | None = None
    """Set when the provider refused the request as too long and stated (or implied) a
    window smaller than the configured one: the compaction was planned against it, and
    the conversation's later turns on that model are too (protocol.md 12.5)."""


class RetryScheduled(WireModel):
    kind: Literal["retry"] = "retry"
    attempt: int
    delay: float
    reason: str


class ForcedToolRetried(WireModel):
    """A forced tool was not called; the model is asked once more without reasoning
    (protocol.md 9.2). What streamed before stays: it is part of the conversation."""

    kind: Literal["forced_tool_retry"] = "forced_tool_retry"
    tool: str | None = None
    message: str


class TurnCompleted(WireModel):
    kind: Literal["turn_completed"] = "turn_completed"
    stop_reason: StopReason
    error: str | None = None


TurnEvent = Annotated[
    TurnStarted
    | TextDeltaEvent
    | ReasoningDeltaEvent
    | ToolCallStarted
    | ToolResult
    | ToolProgress
    | UsageReported
    | ContextCompactedEvent
    | RetryScheduled
    | ForcedToolRetried
    | TurnCompleted,
    Field(discriminator="kind"),
]


class TurnEventParams(WireModel):
    """Params of the `turn/event` notification."""

    conversation_id: str
    turn_id: str
    seq: int
    event: TurnEvent

    def to_wire(self) -> dict[str, Any]:
        """As `WireModel.to_wire`; a delta (most events of a turn) is built directly, at a
        fifth of pydantic's cost, and any other event is dumped by its own model: this
        one's serializer nests every event kind, and building it cost a daemon's first
        turn ~2 ms (`tests/unit/test_protocol_schemas.py` checks they all agree)."""
        event = self.event
        if type(event) is TextDeltaEvent or type(event) is ReasoningDeltaEvent:
            wired: dict[str, Any] = {"kind": event.kind, "text": event.text}
        else:
            wired = event.to_wire()
        return {
            "conversationId": self.conversation_id,
            "turnId": self.turn_id,
            "seq": self.seq,
            "event": wired,
        }

    def delta_message(self, method: str) -> bytes | None:
        """The whole notification as `Notification.body` encodes it, built directly for a
        delta (one per token or tick: the JSON encoder was a tenth of a streaming daemon's
        time); None for any other event."""
        event = self.event
        if type(event) is not TextDeltaEvent and type(event) is not ReasoningDeltaEvent:
            return None
        head = delta_head(method, self.conversation_id, self.turn_id)
        return delta_body(head, self.seq, event.kind, event.text).encode()


def delta_head(method: str, conversation_id: str, turn_id: str) -> str:
    """The start of a delta notification's JSON, up to its seq: the same for every delta
    of a turn (`jpd.protocol.turn_notes` keeps it per turn)."""
    quote = encode_basestring_ascii  # as json.dumps quotes a string (ensure_ascii)
    return "".join(
        (
            '{"jsonrpc":"2.0","method":', quote(method),
            ',"params":{"conversationId":', quote(conversation_id),
            ',"turnId":', quote(turn_id),
            ',"seq":',
        )
    )  # fmt: skip


DELTA_KIND_HEADS = {
    kind: f',"event":{{"kind":{encode_basestring_ascii(kind)},"text":'
    for kind in ("text_delta", "reasoning_delta")
}
"""Per delta kind, a delta's JSON between its seq and its escaped text."""


def delta_body(head: str, seq: int, kind: str, text: str) -> str:
    """A delta notification's JSON, byte for byte what `json.dumps` (compact, ASCII) makes of
    it: the escaped text spliced into the turn's `delta_head`."""
    return "".join((head, str(seq), DELTA_KIND_HEADS[kind], encode_basestring_ascii(text), "}}}"))


class TurnLaggedParams(WireModel):
    """Params of the `turn/lagged` notification: the client fell behind, so the daemon
    stopped sending it this conversation's events; re-attach with `fromSeq`."""

    conversation_id: str
    from_seq: int
    """The seq of the last event this client was sent (`turn/attach` `fromSeq`)."""
