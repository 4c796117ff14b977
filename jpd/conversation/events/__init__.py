"""Persisted conversation events: one JSON object per line in `events.jsonl`.

The `type` field discriminates; shapes follow protocol.md section 12. Unknown
cancellation reasons are kept verbatim so newer logs still load, and so are inquiry
outcomes (`UnknownOutcome`), stop reasons and sampling outcomes: read-only
(`unknown_value`).

This package's namespace is the persisted-event contract (the `persisted-event`
schema), used as `from jpd.conversation import events as ev`; each kind of event is
defined in its module:

- `base`: `EventBase`, `now` (the timestamp of new events)
- `turns`: `TurnStart`, `TurnResume`, `TurnEnd`
- `chat`: `ChatRequest` (with `ImageFile`), `ChatResponse`, `ChatCheckpoint`,
  `ForcedToolRetry`
- `tool_calls`: `ToolCallRequest`, `ToolCallResponse` (with `ToolImage`),
  `PermissionDecision`, `Sampling`
- `inquiries`: `InquiryRequest`, `InquiryResponse` and its outcomes
- `workspace_changes`: `FileChanged`, `TurnUndone`
- `compaction`: `ContextCompacted`, `LearnedWindow`
- `codec`: the `Event` union and its one-line JSON form (`parse_event`, `dump_event`)
"""

from jpd.conversation.events.base import EventBase, now
from jpd.conversation.events.chat import (
    ChatCheckpoint,
    ChatRequest,
    ChatResponse,
    ForcedToolRetry,
    ImageFile,
)
from jpd.conversation.events.codec import (
    Event,
    dump_event,
    event_adapter,
    event_to_json,
    parse_event,
    unknown_value,
)
from jpd.conversation.events.compaction import (
    CompactionMethod,
    CompactionTrigger,
    ContextCompacted,
    LearnedWindow,
)
from jpd.conversation.events.inquiries import (
    KNOWN_OUTCOMES,
    Answered,
    AssistantSource,
    CancellationReason,
    Cancelled,
    InquiryOutcome,
    InquiryRequest,
    InquiryResponse,
    InquirySource,
    Redacted,
    ToolSource,
    UnknownOutcome,
)
from jpd.conversation.events.tool_calls import (
    PermissionDecision,
    Sampling,
    SamplingMessage,
    SamplingOutcome,
    ToolCallRequest,
    ToolCallResponse,
    ToolImage,
)
from jpd.conversation.events.turns import TurnEnd, TurnResume, TurnStart, TurnStopReason
from jpd.conversation.events.workspace_changes import FileChanged, TurnUndone

__all__ = [
    "KNOWN_OUTCOMES",
    "Answered",
    "AssistantSource",
    "CancellationReason",
    "Cancelled",
    "ChatCheckpoint",
    "ChatRequest",
    "ChatResponse",
    "CompactionMethod",
    "CompactionTrigger",
    "ContextCompacted",
    "Event",
    "EventBase",
    "FileChanged",
    "ForcedToolRetry",
    "ImageFile",
    "InquiryOutcome",
    "InquiryRequest",
    "InquiryResponse",
    "InquirySource",
    "LearnedWindow",
    "PermissionDecision",
    "Redacted",
    "Sampling",
    "SamplingMessage",
    "SamplingOutcome",
    "ToolCallRequest",
    "ToolCallResponse",
    "ToolImage",
    "ToolSource",
    "TurnEnd",
    "TurnResume",
    "TurnStart",
    "TurnStopReason",
    "TurnUndone",
    "UnknownOutcome",
    "dump_event",
    "event_adapter",
    "event_to_json",
    "now",
    "parse_event",
    "unknown_value",
]
