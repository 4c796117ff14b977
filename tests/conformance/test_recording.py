"""Conformance: who answers a question and what is recorded (protocol.md 10.1, 10.3, 12.2).

Every question is recorded (`inquiry_request`, fsynced before anybody is asked), then
closed by exactly one `inquiry_response`: `answered`, `redacted` or `cancelled` with its
reason. The router is driven here over fakes; the daemon's own paths are end to end:

- tests/e2e/test_inquiry_rules.py: an answer remembered in one tool cycle is reused in a
  later cycle of the same turn and forgotten at the next turn (10.1); an answer of the
  wrong shape from a real client is sent back and the question stays open (10.3), and an
  `inquiry/answer` of the wrong shape is refused with -32602 (5.17); a
  question pending at a clean stop (`daemon/stop`, SIGTERM) is recorded `daemon_stopped`
  (10.3, 12.2).
- tests/e2e/test_inquiries.py: failed routes recorded with their reason, client cancel
  records `user`, an invalid answer is sent back, remembered answers and
  `persistence: "none"`, the turn cancelled while asking.
- tests/e2e/test_socket_inquiries.py, test_inquiry_ids.py, test_late_answer_log.py:
  several clients, late attach, inquiry ids shared by two conversations, late answers.
"""

from __future__ import annotations

import threading
from typing import Any

import anyio
import pytest

from jpd.conversation import events as ev
from jpd.inquiry.router import BackendError, Failed, Resolved
from jpd.protocol.errors import RequestCancelled
from tests.conformance.inquiry_setup import Setup
from tests.unit.fakes import FakeBackend, FakeLink, replies

# --- static answer ---------------------------------------------------------------------


async def test_static_answer_wins_and_nobody_is_asked() -> None:
    """protocol.md 10.1: a static `answer` is the answer; nobody is asked; it is recorded
    `answered`, after the request was fsynced."""
    link = FakeLink(1, answer=replies({"answer": False}))
    setup = Setup(link)

    assert await setup.ask(config={"answer": True}) == Resolved(True)
    assert link.requests == [] and setup.backend.asked == []
    request, response = setup.recorded()
    assert request["type"] == "inquiry_request" and request["id"] == "call_1.q.1"
    assert response == {
        "type": "inquiry_response",
        "id": "call_1.q.1",
        "outcome": "answered",
        "answer": True,
    }
    assert setup.log.syncs == 1  # the request is durable before anybody is asked


async def test_invalid_static_answer_fails() -> None:
    """protocol.md 10.1: a static answer that does not fit fails the call
    (`invalid_static_answer`)."""
    setup = Setup()

    result = await setup.ask(config={"answer": "maybe"})

    assert isinstance(result, Failed) and "questions.q.answer" in result.message
    assert setup.outcome()["reason"] == "invalid_static_answer"


# --- turn cache ----------------------------------------------------------------------------


@pytest.mark.parametrize(("persistence", "cached"), [("turn", True), ("none", False)])
async def test_remembered_answer_is_reused_in_the_turn(persistence: str, cached: bool) -> None:
    """protocol.md 10.1: an answer given with `remember: true` answers the same tool's
    question later in the turn, never for `persistence: "none"`; it is recorded `answered`."""
    link = FakeLink(1, answer=replies(*[{"answer": True, "remember": True}] * 2))
    setup = Setup(link)

    first = await setup.ask(persistence=persistence)
    second = await setup.ask(persistence=persistence, call_id="call_2")

    assert first == second == Resolved(True)
    assert len(link.requests) == (1 if cached else 2)
    assert [r["outcome"] for r in setup.log.responses()] == ["answered", "answered"]


async def test_an_answer_not_remembered_is_asked_again() -> None:
    """protocol.md 10.1: only an answer given with `remember: true` is reused."""
    link = FakeLink(1, answer=replies({"answer": True}, {"answer": False}))
    setup = Setup(link)

    assert await setup.ask() == Resolved(True)
    assert await setup.ask(call_id="call_2") == Resolved(False)
    assert setup.cache == {}


# --- target assistant ----------------------------------------------------------------------


async def test_target_assistant_asks_the_backend_with_overrides() -> None:
    """protocol.md 10.1: `target = "assistant"` (or a table) has the assistant answer."""
    setup = Setup(FakeLink(1, answer=replies({"answer": False})))

    plain = await setup.ask({"type": "text"}, config={"target": "assistant"})
    table = await setup.ask(
        {"type": "text"}, config={"target": {"model": {"id": "test/x"}}}, call_id="call_2"
    )

    assert plain == table == Resolved("from the model")
    [(_, none), (_, overrides)] = setup.backend.asked
    assert none is None and overrides is not None


async def test_exclusive_question_never_goes_to_the_assistant() -> None:
    """protocol.md 10.1: a human-only (exclusive) question with target assistant fails
    (`assistant_routing_denied`)."""
    setup = Setup()

    result = await setup.ask({"type": "text"}, exclusive=True, config={"target": "assistant"})

    assert isinstance(result, Failed) and "cannot be routed to the assistant" in result.message
    assert setup.backend.asked == []
    assert setup.outcome()["reason"] == "assistant_routing_denied"


async def test_backend_failure_is_recorded() -> None:
    """protocol.md 10.1: the assistant failing to answer fails the call (`backend_error`)."""
    setup = Setup(backend=FakeBackend(BackendError("no valid answer")))

    result = await setup.ask({"type": "text"}, config={"target": "assistant"})

    assert isinstance(result, Failed) and "no valid answer" in result.message
    assert setup.outcome()["reason"] == "backend_error"


# --- clients -----------------------------------------------------------------------------


async def test_capable_client_answers_and_sees_the_wire_question() -> None:
    """protocol.md 10.3: `inquiry/prompt` carries the question with the config's label and
    `exclusive` override applied."""
    link = FakeLink(1, answer=replies({"answer": ["a"]}))
    setup = Setup(link)

    result = await setup.ask(
        {"type": "multi_select", "options": ["a", "b"], "max_items": 1},
        config={"prompt_label": "Pick", "exclusive": True},
        default=["b"],
    )

    assert result == Resolved(["a"])
    [(method, params)] = link.requests
    assert method == "inquiry/prompt"
    assert params["promptLabel"] == "Pick"
    assert params["question"] == {
        "id": "q",
        "text": "Go?",
        "answerType": {"type": "multi_select", "options": ["a", "b"], "maxItems": 1},
        "default": ["b"],
        "exclusive": True,  # the config override
        "persistence": "turn",
    }


@pytest.mark.parametrize(
    ("wrong", "error"),
    [
        (True, "invalid result for inquiry/prompt: result:"),
        ({"value": True}, "invalid result for inquiry/prompt: answer: Field required"),
        ({"answer": True, "extra": 1}, "invalid result for inquiry/prompt: extra:"),
        ({"answer": True, "remember": "yes"}, "invalid result for inquiry/prompt: remember:"),
        ({"answer": "yes"}, "answer to question 'q' must be true or false, got 'yes'"),
    ],
)
async def test_an_answer_of_the_wrong_shape_is_sent_back_and_the_question_stays_open(
    wrong: Any, error: str
) -> None:
    """protocol.md 10.3: a result that is not `{answer, remember?}`, or an answer that does
    not fit, is no answer: the client is asked again with `previousError` saying what was
    wrong, and the question stays open until a valid answer."""
    link = FakeLink(1, answer=replies(wrong, {"answer": False}))
    setup = Setup(link)

    assert await setup.ask() == Resolved(False)
    first, second = (params for _, params in link.requests)
    assert "previousError" not in first
    assert second["previousError"].startswith(error)
    assert second["inquiryId"] == first["inquiryId"] == "call_1.q.1"
    assert link.resolved() == [
        {
            "inquiryId": "call_1.q.1",
            "conversationId": "c",
            "outcome": "answered",
            "answeredBy": "client-1",
        }
    ]
    assert setup.outcome() == {
        "type": "inquiry_response",
        "id": "call_1.q.1",
        "outcome": "answered",
        "answer": False,
    }


async def test_client_dismissal_fails_with_reason_user() -> None:
    """protocol.md 10.3: -32800 from the client cancels the question (reason `user`)."""
    setup = Setup(FakeLink(1, answer=replies(RequestCancelled("no"))))

    result = await setup.ask(mode="auto")

    assert isinstance(result, Failed) and "cancelled the question" in result.message
    assert setup.outcome()["reason"] == "user"


async def test_a_client_that_cannot_prompt_the_type_leaves_it_to_the_policy() -> None:
    """protocol.md 10.3: a client is only offered the answer types it declared."""
    link = FakeLink(1, answer_types=("boolean",), answer=replies({"answer": 3}))
    setup = Setup(link)

    result = await setup.ask({"type": "number"}, mode="auto")

    assert result == Resolved("from the model") and link.requests == []


# --- the turn or the daemon ending while asking ----------------------------------------------


async def test_cancelling_the_turn_records_user() -> None:
    """protocol.md 10.3: a question open when the turn is cancelled is recorded cancelled
    (`user`) and every client is told."""
    link = FakeLink(1)  # asks forever
    setup = Setup(link)

    async with anyio.create_task_group() as tg:

        async def ask() -> None:
            await setup.ask()

        tg.start_soon(ask)
        await link.asked.wait()
        tg.cancel_scope.cancel()  # what turn/cancel does to the turn's tasks

    assert setup.outcome() == {
        "type": "inquiry_response",
        "id": "call_1.q.1",
        "outcome": "cancelled",
        "reason": "user",
    }
    assert [r["outcome"] for r in link.resolved()] == ["cancelled"]


async def test_a_clean_stop_records_daemon_stopped() -> None:
    """protocol.md 10.3: a question open when the daemon stops cleanly is recorded cancelled
    with the shutdown reason `daemon_stopped` (protocol.md 12.2)."""
    link = FakeLink(1)  # asks forever
    setup = Setup(link)

    async with anyio.create_task_group() as tg:

        async def ask() -> None:
            await setup.ask()

        tg.start_soon(ask)
        await link.asked.wait()
        setup.stopping = True  # what the daemon's clean stop sets before cancelling turns
        tg.cancel_scope.cancel()

    assert setup.outcome() == {
        "type": "inquiry_response",
        "id": "call_1.q.1",
        "outcome": "cancelled",
        "reason": "daemon_stopped",
    }
    assert [r["outcome"] for r in link.resolved()] == ["cancelled"]


# --- reading back ----------------------------------------------------------------------------


def test_a_cancelled_response_without_a_reason_reads_back_as_user() -> None:
    """protocol.md 12.2: a `cancelled` response with no `reason` was cancelled by the user."""
    line = (
        '{"timestamp":"2026-11-22T01:56:04.5Z","type":"inquiry_response",'
        '"id":"call_1.q.1","outcome":"cancelled"}'
    )

    event = ev.parse_event(line)

    assert isinstance(event, ev.InquiryResponse)
    assert ev.event_to_json(event) == {
        "timestamp": "2026-11-22T01:56:04.500000Z",
        "type": "inquiry_response",
        "id": "call_1.q.1",
        "outcome": "cancelled",
        "reason": "user",
    }


def test_a_legacy_response_without_outcome_reads_back_as_answered() -> None:
    """protocol.md 12.2: a legacy `{id, answer}` response reads as `answered`."""
    line = (
        '{"type":"inquiry_response","timestamp":"2026-11-22T01:56:04.5Z",'
        '"id":"call_2.confirm_overwrite.1","answer":true}'
    )

    record = ev.event_to_json(ev.parse_event(line))

    assert record["outcome"] == "answered" and record["answer"] is True


async def test_a_turn_cancelled_while_the_request_is_fsynced_still_records_a_response() -> None:
    """protocol.md 12.2: every recorded `inquiry_request` gets exactly one response, even
    when the turn is cancelled while the request is being fsynced."""
    setup = Setup(FakeLink(1, answer=replies({"answer": True})))
    syncing, release = threading.Event(), threading.Event()

    def fsync() -> None:
        syncing.set()
        release.wait(10)

    async def slow_sync(conversation_id: str) -> None:  # the store's fsync in a worker thread
        await anyio.to_thread.run_sync(fsync)

    setup.log.sync = slow_sync  # type: ignore[method-assign]

    async with anyio.create_task_group() as tg:

        async def ask() -> None:
            await setup.ask()

        tg.start_soon(ask)
        await anyio.to_thread.run_sync(syncing.wait, 10)
        tg.cancel_scope.cancel()
        release.set()

    assert [e["type"] for e in setup.recorded()] == ["inquiry_request", "inquiry_response"]
    assert setup.outcome()["reason"] == "user"
