"""Tests for `jpd.conversation.sanitize`."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from jpd.conversation import events as ev
from jpd.conversation.events import (
    Answered,
    ChatRequest,
    ChatResponse,
    Event,
    InquiryRequest,
    InquiryResponse,
    ToolCallRequest,
    ToolCallResponse,
    ToolSource,
    TurnEnd,
    TurnStart,
)
from jpd.conversation.sanitize import INTERRUPTED_CONTENT, sanitize
from jpd.protocol.question import BooleanAnswer, Question

T0 = datetime(2025, 1, 1, tzinfo=UTC)


def at(n: int) -> datetime:
    return T0 + timedelta(seconds=n)


def req(call_id: str, n: int = 0) -> ToolCallRequest:
    return ToolCallRequest(id=call_id, name="fs_read", arguments={"path": "x"}, timestamp=at(n))


def resp(call_id: str, n: int = 0, content: str = "ok") -> ToolCallResponse:
    return ToolCallResponse(id=call_id, content=content, timestamp=at(n))


def interrupted(call_id: str, n: int) -> ToolCallResponse:
    return ToolCallResponse(id=call_id, content=INTERRUPTED_CONTENT, is_error=True, timestamp=at(n))


def msg(text: str, n: int = 0) -> ChatResponse:
    return ChatResponse(message=text, timestamp=at(n))


def test_empty_and_tool_free_logs_are_unchanged() -> None:
    assert sanitize([]) == []
    events: list[Event] = [
        TurnStart(turn_id="t1", timestamp=at(0)),
        ChatRequest(content="hi", timestamp=at(1)),
        msg("hello", 2),
        TurnEnd(turn_id="t1", stop_reason="end_turn", timestamp=at(3)),
    ]
    kept = sanitize(events)
    assert kept == events
    assert kept is not events  # a copy, as when there is something to repair
    assert all(a is b for a, b in zip(kept, events, strict=True))


def test_paired_calls_are_unchanged() -> None:
    events: list[Event] = [req("a", 1), req("b", 2), resp("b", 3), resp("a", 4), msg("done", 5)]
    assert sanitize(events) == events


def test_orphan_response_is_dropped() -> None:
    events: list[Event] = [ChatRequest(content="hi"), resp("ghost"), msg("x")]
    assert sanitize(events) == [events[0], events[2]]


def test_response_before_its_request_is_an_orphan() -> None:
    events: list[Event] = [resp("a", 1), req("a", 2), msg("x", 3)]
    assert sanitize(events) == [events[1], interrupted("a", 2), events[2]]


def test_unanswered_request_gets_error_response_after_its_batch() -> None:
    question = Question(id="confirm", text="Sure?", answer_type=BooleanAnswer())
    events: list[Event] = [
        req("a", 1),
        req("b", 2),
        InquiryRequest(id="a.confirm.1", source=ToolSource(name="fs_read"), question=question),
        InquiryResponse(response=Answered(id="a.confirm.1", answer=True), timestamp=at(3)),
        resp("b", 4),
        msg("after", 5),
    ]
    out = sanitize(events)
    # The synthetic result sits right before the first event outside the batch.
    assert out == [*events[:5], interrupted("a", 4), events[5]]


def test_several_unanswered_requests_keep_request_order() -> None:
    events: list[Event] = [req("c", 1), req("a", 2), req("b", 3), resp("a", 4)]
    assert sanitize(events) == [*events, interrupted("c", 4), interrupted("b", 4)]


def test_unanswered_request_at_end_of_log() -> None:
    events: list[Event] = [ChatRequest(content="go", timestamp=at(0)), req("a", 1)]
    assert sanitize(events) == [*events, interrupted("a", 1)]


def test_reused_id_pairs_with_earliest_unanswered_request() -> None:
    events: list[Event] = [
        req("call_1", 1),
        resp("call_1", 2),
        msg("turn one", 3),
        req("call_1", 4),  # the provider reused the id in a later turn
        TurnEnd(turn_id="t2", stop_reason="cancelled", timestamp=at(5)),
    ]
    out = sanitize(events)
    assert out == [*events[:4], interrupted("call_1", 4), events[4]]


def test_reused_id_within_one_batch() -> None:
    events: list[Event] = [req("a", 1), req("a", 2), resp("a", 3, "first"), msg("x", 4)]
    out = sanitize(events)
    assert out == [*events[:3], interrupted("a", 3), events[3]]


def test_duplicate_response_is_dropped() -> None:
    events: list[Event] = [req("a", 1), resp("a", 2, "one"), resp("a", 3, "two"), msg("x", 4)]
    assert sanitize(events) == [events[0], events[1], events[3]]


def test_late_response_after_batch_closed_is_dropped() -> None:
    events: list[Event] = [req("a", 1), msg("interrupted", 2), resp("a", 3)]
    assert sanitize(events) == [events[0], interrupted("a", 1), events[1]]


def test_input_is_not_modified() -> None:
    events: list[Event] = [req("a", 1), resp("zzz", 2)]
    snapshot = list(events)
    sanitize(events)
    assert events == snapshot


# --- inquiry pairing (RFD 082) -------------------------------------------------------


def _inq_request(inquiry_id: str) -> ev.InquiryRequest:
    return ev.InquiryRequest(
        id=inquiry_id,
        source=ev.ToolSource(name="t"),
        question=Question(id="q", text="?", answer_type=BooleanAnswer()),
    )


def _inq_response(inquiry_id: str, answer: object = True) -> ev.InquiryResponse:
    return ev.InquiryResponse(response=ev.Answered(id=inquiry_id, answer=answer))


def _shape(events: list[ev.Event]) -> list[tuple[str, str, str]]:
    out = []
    for e in events:
        if isinstance(e, ev.InquiryRequest):
            out.append(("req", e.id, ""))
        elif isinstance(e, ev.InquiryResponse):
            out.append(("resp", e.id, e.response.outcome))
        elif isinstance(e, ev.TurnStart):
            out.append(("turn", e.turn_id, ""))
    return out


def test_inquiry_orphans_are_repaired_within_their_turn_not_across_turns() -> None:
    events: list[ev.Event] = [
        ev.TurnStart(turn_id="t1"),
        _inq_request("c1.q.1"),  # orphan in turn 1
        ev.TurnStart(turn_id="t2"),
        _inq_request("c1.q.1"),  # same id reused in turn 2, properly answered
        _inq_response("c1.q.1"),
        _inq_response("nobody.q.1"),  # orphan response
    ]
    assert _shape(sanitize(events)) == [
        ("turn", "t1", ""),
        ("req", "c1.q.1", ""),
        ("resp", "c1.q.1", "cancelled"),
        ("turn", "t2", ""),
        ("req", "c1.q.1", ""),
        ("resp", "c1.q.1", "answered"),
    ]
    repaired = sanitize(events)[2]
    assert isinstance(repaired, ev.InquiryResponse)
    assert isinstance(repaired.response, ev.Cancelled) and repaired.response.reason == "user"


def test_legacy_duplicate_ids_pair_by_order_within_a_turn() -> None:
    events: list[ev.Event] = [
        ev.TurnStart(turn_id="t1"),
        _inq_request("c1.q"),
        _inq_response("c1.q"),
        _inq_request("c1.q"),  # re-asked, never answered
    ]
    assert _shape(sanitize(events)) == [
        ("turn", "t1", ""),
        ("req", "c1.q", ""),
        ("resp", "c1.q", "answered"),
        ("req", "c1.q", ""),
        ("resp", "c1.q", "cancelled"),
    ]


def test_legacy_response_without_outcome_reads_as_answered() -> None:
    event = ev.parse_event(
        '{"type": "inquiry_response", "id": "c.q", "answer": "x", '
        '"timestamp": "2025-01-01T00:00:00Z"}'
    )
    assert isinstance(event, ev.InquiryResponse)
    assert isinstance(event.response, ev.Answered) and event.response.answer == "x"


def test_a_file_change_inside_a_batch_keeps_its_call_paired() -> None:
    """A workspace tool records `file_changed` between its request and its result."""
    changed = ev.FileChanged(turn_id="t", tool_call_id="a", path="/w/f", after="x", timestamp=at(2))
    log = [req("a", 1), changed, resp("a", 3, "Modified f")]
    assert sanitize(log) == log
