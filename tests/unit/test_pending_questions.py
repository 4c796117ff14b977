"""Pending questions (`jpd.inquiry.pending`): offered to every capable client, first valid
answer wins, dropping clients, the `defer` wait and its timeout (protocol.md section 10.3)."""

from __future__ import annotations

from typing import Any

import anyio
import anyio.lowlevel
import pytest

from jpd.inquiry.pending import Answer, Dismissed, Reply, Request, now
from jpd.protocol.errors import InvalidParams, NotFound, RequestCancelled
from jpd.protocol.method_table import INQUIRY_PROMPT
from jpd.protocol.question import BooleanAnswer, Question
from jpd.protocol.server_requests import (
    InquiryPromptParams,
    InquiryPromptResult,
    PendingInfo,
    SourceWire,
)
from tests.unit.fakes import Clients, FakeLink, replies, until_pending

ID = "call_1.q.1"


def request(inquiry_id: str = ID) -> Request:
    """A boolean question: a client result `{"answer": bool}`, a direct answer a bool."""

    def parse(result: InquiryPromptResult) -> tuple[Any, bool]:
        if not isinstance(result.answer, bool):
            raise ValueError(f"not a boolean: {result.answer!r}")
        return result.answer, result.remember

    def parse_direct(value: Any, remember: bool) -> tuple[Any, bool]:
        return parse(InquiryPromptResult(answer=value, remember=remember))

    prompt = InquiryPromptParams(
        inquiry_id=inquiry_id,
        conversation_id="c",
        turn_id="t",
        tool_name="x",
        source=SourceWire(type="tool", name="x"),
        question=Question(id="q", text="Proceed?", answer_type=BooleanAnswer()),
    )

    return Request(
        info=PendingInfo(
            inquiry_id=inquiry_id,
            kind="inquiry",
            conversation_id="c",
            turn_id="t",
            tool_name="x",
            deferred=False,
            asked_at=now(),
        ),
        method=INQUIRY_PROMPT,
        params=lambda error: prompt.model_copy(update={"previous_error": error}),
        can_answer=lambda link: "boolean" in link.capabilities.prompt_answer_types,
        parse=parse,
        parse_direct=parse_direct,
    )


async def test_first_answer_wins_across_two_clients() -> None:
    late_release = anyio.Event()

    async def late_answer(method: str, params: dict[str, Any]) -> Any:
        await late_release.wait()
        return {"answer": False}

    late = FakeLink(2, answer=late_answer)

    async def fast_answer(method: str, params: dict[str, Any]) -> Any:
        await late.asked.wait()  # both clients have the question on screen
        return {"answer": True}

    fast = FakeLink(1, answer=fast_answer)
    clients = Clients([fast, late])

    with anyio.fail_after(5):
        reply = await clients.pending().ask(request(), wait=False, wait_limit=None)
    late_release.set()  # too late: its request was withdrawn

    assert reply == Answer(True, False, "client-1")
    assert len(fast.requests) == 1 and len(late.requests) == 1
    resolved = {
        "inquiryId": ID,
        "conversationId": "c",
        "outcome": "answered",
        "answeredBy": "client-1",
    }
    assert fast.resolved() == [resolved] and late.resolved() == [resolved]


async def test_invalid_answer_goes_back_with_the_error_and_the_question_stays_open() -> None:
    link = FakeLink(1, answer=replies({"answer": "yes"}, {"answer": True, "remember": True}))

    reply = await Clients([link]).pending().ask(request(), wait=False, wait_limit=None)

    assert reply == Answer(True, True, "client-1")
    first, second = (params for _, params in link.requests)
    assert "previousError" not in first
    assert second["previousError"] == "not a boolean: 'yes'"


async def test_a_client_dropping_mid_question_leaves_it_to_the_others() -> None:
    dropping = FakeLink(1, answer=replies(ConnectionResetError("gone")))
    staying_release = anyio.Event()

    async def staying_answer(method: str, params: dict[str, Any]) -> Any:
        await staying_release.wait()
        return {"answer": False}

    staying = FakeLink(2, answer=staying_answer)
    pending = Clients([dropping, staying]).pending()
    result: list[Reply | None] = []

    async with anyio.create_task_group() as tg:

        async def ask() -> None:
            result.append(await pending.ask(request(), wait=False, wait_limit=None))

        tg.start_soon(ask)
        await staying.asked.wait()
        await anyio.lowlevel.checkpoint()
        assert [i.inquiry_id for i in pending.pending()] == [ID]  # still open
        staying_release.set()

    assert result == [Answer(False, False, "client-2")]


async def test_when_every_client_drops_nobody_answered() -> None:
    link = FakeLink(1, answer=replies(ConnectionResetError("gone")))

    assert await Clients([link]).pending().ask(request(), wait=False, wait_limit=None) is None
    assert link.resolved() == []  # nothing was settled: the detached policy decides next


async def test_incapable_clients_are_not_asked() -> None:
    link = FakeLink(1, answer_types=("text",), answer=replies({"answer": True}))

    assert await Clients([link]).pending().ask(request(), wait=False, wait_limit=None) is None
    assert link.requests == []


async def test_client_cancel_is_a_dismissal() -> None:
    link = FakeLink(1, answer=replies(RequestCancelled("no")))

    reply = await Clients([link]).pending().ask(request(), wait=False, wait_limit=None)

    assert reply == Dismissed("client-1")
    assert link.resolved()[0]["outcome"] == "cancelled"


async def test_defer_times_out_and_says_so_to_everyone() -> None:
    bystander = FakeLink(1, answer_types=())  # cannot answer, but hears about it
    pending = Clients([bystander]).pending()

    with anyio.fail_after(5):
        reply = await pending.ask(request(), wait=True, wait_limit=0.02)

    assert reply is None
    assert bystander.requests == []
    assert bystander.resolved() == [
        {"inquiryId": ID, "conversationId": "c", "outcome": "timed_out"}
    ]
    assert pending.pending() == []


async def test_defer_offers_the_question_to_a_client_that_comes_later() -> None:
    clients = Clients()
    pending = clients.pending()
    result: list[Reply | None] = []

    async with anyio.create_task_group() as tg:

        async def ask() -> None:
            result.append(await pending.ask(request(), wait=True, wait_limit=30))

        tg.start_soon(ask)
        await until_pending(pending)
        [info] = pending.pending()
        assert info.deferred
        newcomer = FakeLink(7, answer=replies({"answer": True}))
        clients.links.append(newcomer)
        pending.client_ready(newcomer, "c")

    assert result == [Answer(True, False, "client-7")]


async def test_inquiry_answer_from_any_client() -> None:
    pending = Clients().pending()
    result: list[Reply | None] = []

    async with anyio.create_task_group() as tg:

        async def ask() -> None:
            result.append(await pending.ask(request(), wait=True, wait_limit=30))

        tg.start_soon(ask)
        await until_pending(pending)
        with pytest.raises(InvalidParams, match=r"invalid answer for call_1\.q\.1"):
            pending.answer(ID, "maybe", False, by="client-3")
        with pytest.raises(NotFound):
            pending.answer("nope.q.1", True, False, by="client-3")
        pending.answer(ID, True, True, by="client-3")

    assert result == [Answer(True, True, "client-3")]
    with pytest.raises(NotFound):  # answered: gone
        pending.answer(ID, True, False, by="client-3")


async def test_turn_ending_while_asking_dismisses_the_prompt() -> None:
    link = FakeLink(1)  # never answers
    pending = Clients([link]).pending()

    with anyio.move_on_after(0.05):
        await pending.ask(request(), wait=False, wait_limit=None)

    assert link.resolved() == [{"inquiryId": ID, "conversationId": "c", "outcome": "cancelled"}]
    assert pending.pending() == []
