"""`Event`, the union of every persisted event, and its on-disk form: one JSON object
a line of `events.jsonl`, discriminated by `type` (protocol.md 12.1). Values this
version does not know are read, never written (`unknown_value`)."""

from __future__ import annotations

import functools
from typing import Annotated, Any, get_args

from pydantic import Field, TypeAdapter

from jpd.conversation.events.chat import ChatCheckpoint, ChatRequest, ChatResponse, ForcedToolRetry
from jpd.conversation.events.compaction import ContextCompacted
from jpd.conversation.events.inquiries import InquiryRequest, InquiryResponse, UnknownOutcome
from jpd.conversation.events.tool_calls import (
    PermissionDecision,
    Sampling,
    SamplingOutcome,
    ToolCallRequest,
    ToolCallResponse,
)
from jpd.conversation.events.turns import TurnEnd, TurnResume, TurnStart, TurnStopReason
from jpd.conversation.events.workspace_changes import FileChanged, TurnUndone

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
