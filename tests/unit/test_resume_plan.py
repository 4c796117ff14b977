"""Reading what `turn/resume` does from a log, and one result per call in the history
(protocol.md sections 5.20 and 12.4)."""

from __future__ import annotations

from pathlib import Path

import pytest

from jpd.conversation import events as ev
from jpd.conversation.jsonl.threaded import ThreadedStore
from jpd.conversation.jsonl.turn_lock import interrupted_turn, last_turn, try_lock
from jpd.conversation.recovery import recover_all, recovery_events
from jpd.conversation.resume import NotResumable, TurnNotFound, plan_resume
from jpd.conversation.sanitize import sanitize
from jpd.llm.base import ToolResultMessage
from jpd.llm.history import MessageHistory


def cut_turn() -> list[ev.Event]:
    """A turn killed while call_b's tool asked its second question."""
    events: list[ev.Event] = [
        ev.TurnStart(turn_id="t-1", model="test/scripted"),
        ev.ChatRequest(content="go"),
        ev.ToolCallRequest(id="call_a", name="a"),
        ev.ToolCallRequest(id="call_b", name="b"),
        ev.ToolCallResponse(id="call_a", content="done"),
        ev.InquiryRequest(
            id="call_b.x.1",
            source=ev.ToolSource(name="b"),
            question={"id": "x", "text": "X?", "answer_type": {"type": "text"}},
        ),
        ev.InquiryResponse(response=ev.Answered(id="call_b.x.1", answer="yes")),
        ev.InquiryRequest(
            id="call_b.y.1",
            source=ev.ToolSource(name="b"),
            question={"id": "y", "text": "Y?", "answer_type": {"type": "text"}},
        ),
    ]
    return events + recovery_events(events)


def test_interrupted_calls_rerun_with_their_answers_and_pending_questions_keep_their_id() -> None:
    plan = plan_resume(cut_turn(), "t-1")
    assert [r.id for r in plan.rerun] == ["call_b"]
    assert plan.answers == {"call_b": {"x": "yes"}}
    # y was pending: counting resumes at 0, so it is asked again as call_b.y.1.
    assert plan.attempts == {("call_b", "x"): 1, ("call_b", "y"): 0}
    assert not plan.continue_output
    assert plan.model == "test/scripted"


def test_a_cut_stream_is_continued() -> None:
    events: list[ev.Event] = [
        ev.TurnStart(turn_id="t-1"),
        ev.ChatRequest(content="go"),
        ev.ChatCheckpoint(turn_id="t-1", message="Once upon"),
    ]
    plan = plan_resume(events + recovery_events(events), "t-1")
    assert plan.continue_output and not plan.rerun


def test_only_the_last_interrupted_turn_resumes() -> None:
    events = cut_turn()
    with pytest.raises(TurnNotFound):
        plan_resume(events, "t-2")
    closed = [*events[:-1], ev.TurnEnd(turn_id="t-1", stop_reason="end_turn")]
    with pytest.raises(NotResumable):
        plan_resume(closed, "t-1")
    later = [*events, ev.TurnStart(turn_id="t-2"), ev.TurnEnd(turn_id="t-2", stop_reason="error")]
    with pytest.raises(NotResumable):
        plan_resume(later, "t-1")


def resumed_log() -> list[ev.Event]:
    return [
        *cut_turn(),
        ev.TurnResume(turn_id="t-1"),
        ev.ToolCallResponse(id="call_b", content="real"),
        ev.TurnEnd(turn_id="t-1", stop_reason="end_turn"),
    ]


def test_the_new_result_supersedes_the_interrupted_one_in_place() -> None:
    events = sanitize(resumed_log())
    messages = MessageHistory(events).messages()
    results = [m for m in messages if isinstance(m, ToolResultMessage)]
    assert [(r.tool_call_id, r.content) for r in results] == [
        ("call_a", "done"),
        ("call_b", "real"),
    ]
    assert isinstance(messages[-1], ToolResultMessage)  # nothing after the results


def test_a_crash_during_a_resumed_part_is_recovered_from_its_resume() -> None:
    events = [*cut_turn(), ev.TurnResume(turn_id="t-1")]
    assert [type(e).__name__ for e in recovery_events(events)] == ["TurnEnd"]
    asked = [
        *events,
        ev.InquiryRequest(
            id="call_b.y.1",
            source=ev.ToolSource(name="b"),
            question={"id": "y", "text": "Y?", "answer_type": {"type": "text"}},
        ),
    ]
    added = recovery_events(asked)
    assert isinstance(added[0], ev.InquiryResponse) and added[0].id == "call_b.y.1"
    assert plan_resume(asked + added, "t-1").attempts[("call_b", "y")] == 0


def write(path: Path, events: list[ev.Event]) -> Path:
    path.write_text("".join(ev.dump_event(e) + "\n" for e in events))
    return path


def test_interrupted_turn_is_a_tail_read(tmp_path: Path) -> None:
    log = tmp_path / "events.jsonl"
    assert interrupted_turn(log) is None
    start = interrupted_turn(write(log, cut_turn()))
    assert start is not None and start.turn_id == "t-1"
    assert interrupted_turn(write(log, cut_turn()[:-1])) is None  # open
    assert interrupted_turn(write(log, resumed_log())) is None  # ended normally
    again = [*resumed_log()[:-1], ev.TurnEnd(turn_id="t-1", stop_reason="interrupted")]
    start = interrupted_turn(write(log, again))
    assert start is not None and start.turn_id == "t-1"
    assert interrupted_turn(write(log, [*cut_turn(), ev.TurnResume(turn_id="t-1")])) is None


def test_last_turn_reads_open_and_resumable_at_once(tmp_path: Path) -> None:
    log = tmp_path / "events.jsonl"
    assert last_turn(log) == (False, None)
    assert last_turn(write(log, cut_turn()[:-1])) == (True, None)
    assert last_turn(write(log, [*cut_turn(), ev.TurnResume(turn_id="t-1")])) == (True, None)
    assert last_turn(write(log, resumed_log())) == (False, None)
    is_open, start = last_turn(write(log, cut_turn()))
    assert not is_open and start is not None and start.turn_id == "t-1"


async def test_recover_all_closes_open_turns_and_lists_the_resumable(tmp_path: Path) -> None:
    threaded = ThreadedStore(tmp_path)
    store = threaded.files
    logs = {
        "c-open": [ev.TurnStart(turn_id="t-1"), ev.ChatRequest(content="go")],
        "c-cut": cut_turn(),
        "c-done": resumed_log(),
        "c-running": [ev.TurnStart(turn_id="t-2"), ev.ChatRequest(content="go")],
    }
    for conversation_id, events in logs.items():
        store.create(conversation_id)
        for event in events:
            store.append(conversation_id, event)
    (tmp_path / "conversations" / "not a conversation").mkdir()
    running = try_lock(store.conversation_dir("c-running"))  # another daemon's turn
    assert running is not None
    try:
        found = await recover_all(threaded)
    finally:
        running.release()
    assert {k: v.turn_id for k, v in found.items()} == {"c-open": "t-1", "c-cut": "t-1"}
    closed = store.load("c-open", sanitized=False)[-1]
    assert isinstance(closed, ev.TurnEnd) and closed.stop_reason == "interrupted"
    assert len(store.load("c-running", sanitized=False)) == 2  # left to its daemon
    assert len(store.load("c-done", sanitized=False)) == len(resumed_log())
