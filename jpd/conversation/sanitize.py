"""Repair tool-call pairing in a loaded event log so it can be replayed to a provider.

Provider APIs require every assistant tool call to be followed by exactly one tool
result before the conversation continues. A crash, a cancellation or a bug can leave a
log where that does not hold; `sanitize` restores the invariant without touching any
other event.
"""

from __future__ import annotations

from collections import deque

from jpd.conversation.events import (
    Cancelled,
    Event,
    FileChanged,
    InquiryRequest,
    InquiryResponse,
    PermissionDecision,
    ToolCallRequest,
    ToolCallResponse,
    TurnStart,
)

INTERRUPTED_CONTENT = "Tool call was interrupted before it returned a result."

# Events that belong to a tool-call batch: the requests of one assistant step, the
# questions asked and permissions decided while running them, the files they changed,
# and their results.
_BATCH_TYPES = (
    ToolCallRequest,
    ToolCallResponse,
    InquiryRequest,
    InquiryResponse,
    FileChanged,
    PermissionDecision,
)


def sanitize(events: list[Event]) -> list[Event]:
    """Repair tool-call pairing, then inquiry pairing (see the two functions below)."""
    # Checked per distinct type: pydantic's isinstance is slow on 100,000 events.
    if not any(issubclass(kind, _BATCH_TYPES) for kind in {type(event) for event in events}):
        return list(events)  # nothing to pair: both passes would copy it unchanged
    return sanitize_inquiries(sanitize_tool_calls(events))


def sanitize_inquiries(events: list[Event]) -> list[Event]:
    """Pair inquiry requests and responses within each turn, never across turns (protocol.md 12.3).

    A response pairs with the earliest unanswered request of the same id in its turn
    (legacy two-part ids may repeat; order decides). A response with no such request is
    dropped; a request left unanswered when its turn ends (a crash or a hard stop) gets
    a `cancelled` response with reason `user` right after it, the reason protocol.md 12.3 gives
    a hard quit. Pure: the input is not modified.
    """
    extra: dict[int, InquiryResponse] = {}
    dropped: set[int] = set()
    waiting: dict[str, deque[int]] = {}

    def close_turn() -> None:
        for positions in waiting.values():
            for pos in positions:
                request = events[pos]
                extra[pos] = InquiryResponse(
                    response=Cancelled(id=request.id, reason="user"),  # type: ignore[union-attr]
                    timestamp=request.timestamp,
                )
        waiting.clear()

    for pos, event in enumerate(events):
        if isinstance(event, TurnStart):
            close_turn()
        elif isinstance(event, InquiryRequest):
            waiting.setdefault(event.id, deque()).append(pos)
        elif isinstance(event, InquiryResponse):
            queue = waiting.get(event.id)
            if queue:
                queue.popleft()
            else:
                dropped.add(pos)
    close_turn()
    out: list[Event] = []
    for pos, event in enumerate(events):
        if pos not in dropped:
            out.append(without_secret_default(event))
        if pos in extra:
            out.append(extra[pos])
    return out


def without_secret_default(event: Event) -> Event:
    """A secret question's default is a secret too (protocol.md 10.7): never stored, and
    a log written before that rule reads back without it."""
    if not isinstance(event, InquiryRequest) or not event.question.secret:
        return event
    if event.question.default is None:
        return event
    question = event.question.model_copy(update={"default": None})
    return event.model_copy(update={"question": question})


def sanitize_tool_calls(events: list[Event]) -> list[Event]:
    """Return a copy of `events` where every tool call has exactly one result.

    - A `tool_call_response` whose id has no earlier, still unanswered
      `tool_call_request` (an orphan) is dropped.
    - A `tool_call_request` left without a response gets a synthetic
      `ToolCallResponse(content=INTERRUPTED_CONTENT, is_error=True)`, inserted at the
      end of the request's batch: immediately before the next event that is not a tool
      call request/response or inquiry request/response, or at the end of the log.
      Synthetic responses follow the order of their requests and carry the timestamp of
      the batch's last event, so the function is deterministic.

    Pairing is by id, in order: each response answers the earliest unanswered request
    with the same id, so an id reused in a later turn pairs correctly. A response
    arriving after its request's batch has closed is an orphan (the request was already
    given a synthetic result), except a response to a call whose latest response was
    `interrupted`: a resumed turn re-ran that call, and the new result supersedes the
    interrupted one (protocol.md 12.4). Pure: the input list and its events are not
    modified.
    """
    out: list[Event] = []
    # Unanswered requests of the current batch: id -> request positions, oldest first.
    unanswered: dict[str, deque[int]] = {}
    batch_requests: list[ToolCallRequest] = []
    answered: set[int] = set()
    interrupted: set[str] = set()  # ids whose latest response is a recovery's interrupted one

    def close_batch() -> None:
        if not unanswered:
            batch_requests.clear()
            answered.clear()
            return
        stamp = out[-1].timestamp
        for pos, request in enumerate(batch_requests):
            if pos not in answered:
                out.append(
                    ToolCallResponse(
                        id=request.id,
                        content=INTERRUPTED_CONTENT,
                        is_error=True,
                        timestamp=stamp,
                    )
                )
        unanswered.clear()
        batch_requests.clear()
        answered.clear()

    for event in events:
        if not isinstance(event, _BATCH_TYPES):
            close_batch()
            out.append(event)
        elif isinstance(event, ToolCallRequest):
            unanswered.setdefault(event.id, deque()).append(len(batch_requests))
            batch_requests.append(event)
            out.append(event)
        elif isinstance(event, ToolCallResponse):
            waiting = unanswered.get(event.id)
            if not waiting:
                if event.id in interrupted and not event.interrupted:
                    interrupted.discard(event.id)
                    out.append(event)  # a resumed turn's result for a re-run call
                continue  # orphan: nothing to answer
            if event.interrupted:
                interrupted.add(event.id)
            answered.add(waiting.popleft())
            if not waiting:
                del unanswered[event.id]
            out.append(event)
        else:
            out.append(event)
    close_batch()
    return out
