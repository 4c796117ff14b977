"""Conformance: values written by a newer daemon (protocol.md 12.2, 12.3).

A log a newer version wrote stays readable by this one: an inquiry outcome this
version does not know lands in a read-only "unknown" model (`UnknownOutcome`) that
keeps every field, closes its request (the sanitizer invents nothing for it), is
returned as stored and shown as unknown, and is never written by this version.
Unknown cancellation reasons are kept verbatim the same way.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from jpcli.conversations.event_lines import format_persisted_event

from jpd.conversation import events as ev
from jpd.conversation.jsonl.store import ConversationStore
from jpd.conversation.sanitize import sanitize

CID = "c-unknown"
REQUEST = (
    '{"timestamp":"2026-11-22T02:41:09.325536Z","type":"inquiry_request","id":"call_1.go.1",'
    '"source":{"type":"tool","name":"deploy"},"question":{"id":"go","text":"Go?",'
    '"answer_type":{"type":"boolean"},"exclusive":false,"persistence":"turn"}}'
)
FROM_THE_FUTURE = (
    '{"timestamp":"2026-11-22T02:41:10.123456Z","type":"inquiry_response","id":"call_1.go.1",'
    '"outcome":"delegated","to":"ops-team","ticket":42}'
)
UNKNOWN_REASON = (
    '{"timestamp":"2026-11-22T02:41:10.123456Z","type":"inquiry_response","id":"call_1.go.1",'
    '"outcome":"cancelled","reason":"quota_exhausted"}'
)


def turn(*inquiry_lines: str) -> list[str]:
    """One turn's lines around `inquiry_lines`."""
    start = '{"timestamp":"2026-11-22T02:41:08Z","type":"turn_start","turn_id":"t1"}'
    user = '{"timestamp":"2026-11-22T02:41:08.1Z","type":"chat_request","content":"go"}'
    end = (
        '{"timestamp":"2026-11-22T02:41:11Z","type":"turn_end","turn_id":"t1",'
        '"stop_reason":"end_turn"}'
    )
    return [start, user, *inquiry_lines, end]


def stored(tmp_path: Path, lines: list[str]) -> ConversationStore:
    """A store holding one conversation whose log is exactly `lines`."""
    store = ConversationStore(tmp_path)
    store.create(CID)
    with open(store.conversation_dir(CID) / "events.jsonl", "a", encoding="utf-8") as f:
        f.write("".join(line + "\n" for line in lines))
    return store


def test_an_unknown_outcome_is_read_not_skipped_and_keeps_its_fields() -> None:
    """protocol.md 12.2: an `inquiry_response` whose `outcome` this version does not know
    is read (not skipped as unreadable), with all its fields kept as they are."""
    event = ev.parse_event(FROM_THE_FUTURE)

    assert isinstance(event, ev.InquiryResponse)
    assert isinstance(event.response, ev.UnknownOutcome)
    assert event.id == "call_1.go.1"
    assert ev.dump_event(event) == FROM_THE_FUTURE


def test_an_unknown_outcome_closes_its_request_and_nothing_is_invented(tmp_path: Path) -> None:
    """protocol.md 12.3: the sanitizer pairs an unknown outcome with its request like any
    response: no `cancelled`/`user` response is made up, nothing is dropped."""
    store = stored(tmp_path, turn(REQUEST, FROM_THE_FUTURE))

    events = store.load(CID)

    responses = [e for e in events if isinstance(e, ev.InquiryResponse)]
    assert len(responses) == 1 and isinstance(responses[0].response, ev.UnknownOutcome)
    assert sanitize(events) == events


def test_an_unknown_outcome_is_returned_as_stored(tmp_path: Path) -> None:
    """protocol.md 12.2: `conversation/get` returns the line as stored, never rewritten."""
    store = stored(tmp_path, turn(REQUEST, FROM_THE_FUTURE))

    returned = json.loads(store.load_encoded(CID))

    assert json.loads(FROM_THE_FUTURE) in returned


def test_an_unknown_outcome_is_shown_as_unknown() -> None:
    """protocol.md 12.2: clients show an outcome they do not know as unknown (`jp`)."""
    shown = format_persisted_event(json.loads(FROM_THE_FUTURE))

    assert shown == '  inquiry call_1.go.1: unknown outcome "delegated"'


def test_this_version_never_writes_an_unknown_outcome(tmp_path: Path) -> None:
    """protocol.md 12.2: the unknown landing pad is read-only: the store refuses to append
    one, so only a newer daemon's lines ever hold it."""
    store = ConversationStore(tmp_path)
    store.create(CID)
    event = ev.parse_event(FROM_THE_FUTURE)

    with pytest.raises(ValueError, match="unknown inquiry outcome 'delegated'"):
        store.append(CID, event)
    assert store.load(CID, sanitized=False) == []


def test_an_unknown_cancellation_reason_is_kept_verbatim(tmp_path: Path) -> None:
    """protocol.md 12.2: a cancellation reason this version does not write is read and
    returned as it is, never replaced by `user`."""
    store = stored(tmp_path, turn(REQUEST, UNKNOWN_REASON))

    [response] = [e for e in store.load(CID) if isinstance(e, ev.InquiryResponse)]

    assert response.response == ev.Cancelled(id="call_1.go.1", reason="quota_exhausted")
    assert json.loads(UNKNOWN_REASON) in json.loads(store.load_encoded(CID))


def test_every_outcome_and_reason_this_version_writes_is_known() -> None:
    """protocol.md 12.2: what this build writes is never read back as unknown."""
    written = [
        ev.Answered(id="a", answer=True),
        ev.Redacted(id="a"),
        *(ev.Cancelled(id="a", reason=r) for r in ev.CancellationReason.__args__),  # type: ignore[attr-defined]
    ]
    for outcome in written:
        line = ev.dump_event(ev.InquiryResponse(response=outcome))
        assert not isinstance(ev.parse_event(line).response, ev.UnknownOutcome)  # type: ignore[union-attr]


TURN_END_FROM_THE_FUTURE = (
    '{"timestamp":"2026-11-22T02:41:11.123456Z","type":"turn_end","turn_id":"t1",'
    '"stop_reason":"paused_for_review"}'
)
SAMPLING_FROM_THE_FUTURE = (
    '{"timestamp":"2026-11-22T02:41:10.123456Z","type":"sampling","id":"call_1.sampling.1",'
    '"server":"fx","messages":[],"outcome":"deferred"}'
)


@pytest.mark.parametrize("line", [TURN_END_FROM_THE_FUTURE, SAMPLING_FROM_THE_FUTURE])
def test_an_unknown_stop_reason_or_sampling_outcome_is_read_kept_and_never_written(
    tmp_path: Path, line: str
) -> None:
    """protocol.md 12.2: a `turn_end` stop reason or a `sampling` outcome this version does
    not know is read and returned as stored, and this version never writes one."""
    start = '{"timestamp":"2026-11-22T02:41:08Z","type":"turn_start","turn_id":"t1"}'
    store = stored(tmp_path, [start, line])

    event = store.load(CID)[-1]

    assert ev.dump_event(event) == line
    assert json.loads(line) in json.loads(store.load_encoded(CID))
    with pytest.raises(ValueError, match="refusing to write unknown"):
        store.append(CID, event)
