"""Conformance: secrets (protocol.md 10.7): a secret answer reaches the tool and nothing else.

Never answered by a model, never persisted (`redacted`), never remembered in the turn
cache, never quoted in error messages; a secret's `default` is a secret too. The router is
driven here over fakes; end to end, against the real daemon (tests/e2e/test_inquiries.py):
`test_secret_answer_never_reaches_disk_logs_events_or_model` (disk, daemon log, events,
model) and `test_secret_is_never_sent_to_the_assistant` (detached `auto`). The detached
`defaults` rule for secrets is in tests/conformance/test_detached_policy.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import anyio

from jpd.conversation import events as ev
from jpd.conversation.jsonl.store import ConversationStore
from jpd.inquiry.recorder import InquiryRecorder
from jpd.inquiry.router import Failed, Resolved
from jpd.protocol.question import Question
from tests.conformance.inquiry_setup import Setup
from tests.unit.fakes import FakeLink, FakeLog, replies, until_pending

SECRET = {"id": "token", "text": "Token?", "answer_type": {"type": "secret"}, "default": "hunter2"}
REDACTED = {"type": "inquiry_response", "id": "call_1.q.1", "outcome": "redacted"}


async def test_a_secret_answer_is_recorded_redacted_and_its_default_never_sent() -> None:
    """protocol.md 10.7: a client's secret answer is recorded `redacted` (no answer on
    disk) and the question's default is not sent to clients."""
    link = FakeLink(1, answer=replies({"answer": "s3cret-answer"}))
    setup = Setup(link)

    result = await setup.ask({"type": "secret"}, default="s3cret-default")

    assert result == Resolved("s3cret-answer")  # the tool gets it
    [(_, params)] = link.requests
    assert "default" not in params["question"]
    assert setup.outcome() == REDACTED
    assert "s3cret" not in repr(setup.log.events)


async def test_a_static_answer_to_a_secret_question_is_recorded_redacted() -> None:
    """protocol.md 10.7: a secret answered from the config's static `answer` is recorded
    `redacted` too: the value is never written to the log."""
    link = FakeLink(1, answer=replies({"answer": "never asked"}))
    setup = Setup(link)

    result = await setup.ask({"type": "secret"}, config={"answer": "static-s3cret"})

    assert result == Resolved("static-s3cret")
    assert link.requests == []
    assert setup.outcome() == REDACTED
    assert "static-s3cret" not in repr(setup.log.events)


async def test_a_secret_given_by_inquiry_answer_is_recorded_redacted() -> None:
    """protocol.md 10.7: a secret answered with `inquiry/answer` (here while deferred) is
    recorded `redacted` too."""
    setup = Setup()
    result: list[Resolved | Failed] = []

    async with anyio.create_task_group() as tg:

        async def ask() -> None:
            result.append(await setup.ask({"type": "secret"}, mode="defer", timeout=30))

        tg.start_soon(ask)
        await until_pending(setup.pending, deferred=True)
        setup.pending.answer("call_1.q.1", "typed-s3cret", True, by="client-9")

    assert result == [Resolved("typed-s3cret")]
    assert setup.outcome() == REDACTED
    assert setup.cache == {}  # `remember: true` or not
    assert "typed-s3cret" not in repr(setup.log.events)


async def test_a_secret_answer_is_never_put_into_the_turn_cache() -> None:
    """protocol.md 10.7: a secret answered with `remember: true` is not remembered: the
    next call asks again."""
    link = FakeLink(1, answer=replies(*[{"answer": "s3cret", "remember": True}] * 2))
    setup = Setup(link)

    first = await setup.ask({"type": "secret"})
    assert setup.cache == {}
    second = await setup.ask({"type": "secret"}, call_id="call_2")

    assert first == second == Resolved("s3cret")
    assert len(link.requests) == 2
    assert [r["outcome"] for r in setup.log.responses()] == ["redacted", "redacted"]


async def test_a_secret_answer_is_never_taken_from_the_turn_cache() -> None:
    """protocol.md 10.7: even with an entry for the same tool and question in the turn
    cache, a secret question is asked."""
    link = FakeLink(1, answer=replies({"answer": "typed"}))
    setup = Setup(link)
    setup.cache["x.q"] = "cached"

    assert await setup.ask({"type": "secret"}) == Resolved("typed")
    assert len(link.requests) == 1


async def test_a_secret_question_never_goes_to_the_assistant() -> None:
    """protocol.md 10.7: a secret is never answered by a model: with target assistant it
    fails (`assistant_routing_denied`), under detached `auto` too (`no_prompt_backend`)."""
    targeted = Setup()
    detached = Setup()

    by_target = await targeted.ask({"type": "secret"}, config={"target": "assistant"})
    by_policy = await detached.ask({"type": "secret"}, mode="auto")

    assert isinstance(by_target, Failed) and isinstance(by_policy, Failed)
    assert targeted.backend.asked == [] and detached.backend.asked == []
    assert targeted.outcome()["reason"] == "assistant_routing_denied"
    assert detached.outcome()["reason"] == "no_prompt_backend"


async def test_an_invalid_secret_answer_is_never_quoted() -> None:
    """protocol.md 10.7: the error sent back for a secret answer that does not fit never
    quotes it."""
    link = FakeLink(1, answer=replies({"answer": 987654321}, {"answer": "ok"}))
    setup = Setup(link)

    assert await setup.ask({"type": "secret"}) == Resolved("ok")
    _, (_, again) = link.requests
    assert again["previousError"] and "987654321" not in again["previousError"]


async def test_the_recorded_question_has_no_default() -> None:
    """protocol.md 10.7: a secret's `default` is not written to disk (the `inquiry_request`
    is recorded without it)."""
    log = FakeLog()
    recorder = InquiryRecorder(log, "c")
    question = Question.model_validate(SECRET)
    await recorder.request("call_1.token.1", ev.ToolSource(name="deploy"), question)
    (recorded,) = log.events
    assert "hunter2" not in ev.dump_event(recorded)
    assert isinstance(recorded, ev.InquiryRequest) and recorded.question.default is None


def test_an_older_log_reads_back_without_the_default(tmp_path: Path) -> None:
    """protocol.md 10.7: a log written before the rule reads back without a secret's
    default (`conversation/get` and the history alike)."""
    store = ConversationStore(tmp_path)
    store.create("c-1")
    store.append("c-1", ev.TurnStart(turn_id="t-1"))
    older = ev.InquiryRequest(
        id="call_1.token.1",
        source=ev.ToolSource(name="deploy"),
        question=Question.model_validate(SECRET),
    )
    store.append("c-1", older)  # as an older daemon wrote it
    store.append("c-1", ev.InquiryResponse(response=ev.Redacted(id="call_1.token.1")))
    store.append("c-1", ev.TurnEnd(turn_id="t-1", stop_reason="end_turn"))
    assert "hunter2" in (tmp_path / "conversations" / "c-1" / "events.jsonl").read_text()
    assert b"hunter2" not in store.load_encoded("c-1")
    assert "hunter2" not in json.dumps([ev.event_to_json(e) for e in store.load("c-1")])
    store.close()
