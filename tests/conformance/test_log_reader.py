"""Conformance: reading and repairing a log, as properties (protocol.md 12.3, 12.4).

`hypothesis` builds sequences of valid events of every kind, written as the store
writes them (one JSON object per line), then cuts the file at any byte (a crash during
an append) or tears any line (a crash, then more appends). Whatever it does: the log
loads, every event whose line is whole is read back, and the repair (`sanitize`) is
idempotent. Examples are bounded so the module takes seconds; under `CI` they are
derandomized, so a CI run is repeatable.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jpd.conversation import events as ev
from jpd.conversation.logfile import parse_lines
from jpd.conversation.sanitize import sanitize
from jpd.protocol.question import Question
from jpd.protocol.usage import TokenUsage

PROFILE = settings(
    max_examples=200,
    deadline=None,
    derandomize=bool(os.environ.get("CI")),
    suppress_health_check=[HealthCheck.too_slow],
)

EPOCH = datetime(2026, 11, 22, tzinfo=UTC)
texts = st.text(max_size=12)
ids = st.sampled_from(["call_1", "call_2", "call_3"])
turns = st.sampled_from(["t1", "t2"])
inquiry_ids = st.builds(
    lambda c, q, n: f"{c}.{q}.{n}", ids, st.sampled_from(["go", "k"]), st.integers(1, 2)
)
question = Question.model_validate({"id": "go", "text": "Go?", "answer_type": {"type": "boolean"}})
outcomes = st.one_of(
    st.builds(ev.Answered, id=inquiry_ids, answer=st.one_of(st.booleans(), texts, st.integers())),
    st.builds(
        ev.Cancelled,
        id=inquiry_ids,
        reason=st.sampled_from(["user", "backend_error", "daemon_stopped", "from_the_future"]),
    ),
    st.builds(ev.Redacted, id=inquiry_ids),
)
events = st.one_of(
    st.builds(ev.TurnStart, turn_id=turns, model=st.none() | texts),
    st.builds(ev.TurnResume, turn_id=turns),
    st.builds(ev.ChatRequest, content=texts),
    st.builds(
        ev.ChatResponse,
        message=st.none() | texts,
        reasoning=st.none() | texts,
        usage=st.none()
        | st.builds(TokenUsage, input_tokens=st.integers(0, 99), output_tokens=st.integers(0, 99)),
    ),
    st.builds(ev.ChatCheckpoint, turn_id=turns, message=st.none() | texts),
    st.builds(
        ev.ToolCallRequest,
        id=ids,
        name=st.sampled_from(["cat", "q"]),
        arguments=st.dictionaries(st.sampled_from(["a", "b"]), texts, max_size=2),
    ),
    st.builds(ev.ToolCallResponse, id=ids, content=texts, is_error=st.booleans()),
    st.builds(
        ev.InquiryRequest,
        id=inquiry_ids,
        source=st.just(ev.ToolSource(name="q")),
        question=st.just(question),
    ),
    st.builds(ev.InquiryResponse, response=outcomes),
    st.builds(ev.ForcedToolRetry, tool=st.none() | st.just("q"), message=texts),
    st.builds(
        ev.TurnEnd,
        turn_id=turns,
        stop_reason=st.sampled_from(["end_turn", "cancelled", "error", "interrupted"]),
    ),
)


@st.composite
def logs(draw: st.DrawFn) -> list[bytes]:
    """A log's lines, as the store writes them, timestamps in order."""
    drawn = draw(st.lists(events, min_size=1, max_size=25))
    stamped = [
        e.model_copy(update={"timestamp": EPOCH + timedelta(seconds=i)})
        for i, e in enumerate(drawn)
    ]
    return [ev.dump_event(e).encode() for e in stamped]


def loaded(data: bytes) -> list[bytes]:
    """The lines of the events the reader reads from `data`, re-dumped."""
    return [ev.dump_event(event).encode() for _, event in parse_lines(data, "prop")]


@PROFILE
@given(logs(), st.data())
def test_a_log_cut_at_any_byte_loads_every_whole_line(
    lines: list[bytes], data: st.DataObject
) -> None:
    """protocol.md 12.3: a final line cut short by a crash is skipped; the rest loads.
    Every event whose line was whole on disk is read back, none invented."""
    whole = b"".join(line + b"\n" for line in lines)
    cut = data.draw(st.integers(0, len(whole)), label="cut")

    kept = loaded(whole[:cut])

    complete = [line for line in lines if whole.find(line + b"\n") + len(line) <= cut]
    assert kept[: len(complete)] == complete[: len(kept)]
    assert len(complete) <= len(kept) <= len(complete) + 1  # + the last line if it ends at the cut


@PROFILE
@given(logs(), st.data())
def test_a_torn_line_anywhere_costs_only_that_line(lines: list[bytes], data: st.DataObject) -> None:
    """protocol.md 12.3, 12.4: a line torn by a crash, with more lines appended after it,
    is skipped with a warning; every other event loads."""
    index = data.draw(st.integers(0, len(lines) - 1), label="torn line")
    keep = data.draw(st.integers(0, len(lines[index]) - 1), label="bytes kept")
    torn = [*lines[:index], lines[index][:keep], *lines[index + 1 :]]

    kept = loaded(b"".join(line + b"\n" for line in torn))

    assert kept == [*lines[:index], *lines[index + 1 :]]


@PROFILE
@given(logs())
def test_sanitizing_twice_equals_sanitizing_once(lines: list[bytes]) -> None:
    """protocol.md 12.3: the repair is idempotent: a repaired log needs no more repair."""
    read = [event for _, event in parse_lines(b"\n".join(lines), "prop")]

    once = sanitize(read)

    assert [ev.dump_event(e) for e in sanitize(once)] == [ev.dump_event(e) for e in once]


@PROFILE
@given(logs())
def test_the_repair_drops_only_orphan_responses(lines: list[bytes]) -> None:
    """protocol.md 12.3: the repair only adds responses and drops responses that answer
    nothing: every other event of the log is kept, in order."""
    read = [event for _, event in parse_lines(b"\n".join(lines), "prop")]
    responses = (ev.ToolCallResponse, ev.InquiryResponse)

    repaired = sanitize(read)

    others = [ev.dump_event(e) for e in read if not isinstance(e, responses)]
    assert [ev.dump_event(e) for e in repaired if not isinstance(e, responses)] == others
