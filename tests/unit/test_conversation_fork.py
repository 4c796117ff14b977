"""Which turns a fork carries (jpd/conversation/fork.py) and the grep of messages
(jpd/conversation/grep.py)."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from jpd.conversation import events as ev
from jpd.conversation.fork import select_turns
from jpd.conversation.grep import grep

START = datetime(2026, 11, 27, tzinfo=UTC)


def turn(n: int, *, ended: bool = True) -> list[ev.Event]:
    at = START + timedelta(hours=n)
    events: list[ev.Event] = [
        ev.TurnStart(turn_id=f"t{n}", timestamp=at),
        ev.ChatRequest(content=f"q{n}", timestamp=at),
        ev.ChatResponse(message=f"a{n}", timestamp=at),
    ]
    if ended:
        events.append(ev.TurnEnd(turn_id=f"t{n}", stop_reason="end_turn", timestamp=at))
    return events


def asked(events: list[ev.Event]) -> list[str]:
    return [e.content for e in events if isinstance(e, ev.ChatRequest)]


def log() -> list[ev.Event]:
    compacted = ev.ContextCompacted(
        trigger="auto", method="stub", first_event=0, end_event=4, tokens_before=9, tokens_after=3
    )
    return [*turn(0), *turn(1), compacted, *turn(2), *turn(3), *turn(4, ended=False)]


def test_all_finished_turns_and_the_compactions_when_all_are_kept() -> None:
    kept, turns = select_turns(log())
    assert asked(kept) == ["q0", "q1", "q2", "q3"] and turns == 4
    assert any(isinstance(e, ev.ContextCompacted) for e in kept)


def test_first_and_last_keep_both_ends_without_compactions() -> None:
    kept, turns = select_turns(log(), first=1, last=1)
    assert asked(kept) == ["q0", "q3"] and turns == 2
    assert not any(isinstance(e, ev.ContextCompacted) for e in kept)
    assert asked(select_turns(log(), last=10)[0]) == ["q0", "q1", "q2", "q3"]
    assert select_turns(log(), last=0)[1] == 0


def test_a_time_range_is_half_open() -> None:
    kept, _ = select_turns(
        log(), from_time=START + timedelta(hours=1), until=START + timedelta(hours=3)
    )
    assert asked(kept) == ["q1", "q2"]


def test_grep_lines_with_context() -> None:
    events: list[ev.Event] = [
        ev.ChatRequest(content="one\ntwo needle\nthree"),
        ev.ChatResponse(message="NEEDLE"),
    ]
    hits = list(grep(events, re.compile("needle", re.IGNORECASE), 1))
    assert [(h.event, h.role, h.line_number, h.before, h.after) for h in hits] == [
        (0, "user", 2, ["one"], ["three"]),
        (1, "assistant", 1, [], []),
    ]
