"""Claims on pending questions (`PendingQuestions.claim`, protocol.md sections 3 and
5.17): an `inquiry/answer` checked and claimed by a connection's reader thread wins the
question at once, whatever else tries to settle it later (a client's prompt result, the
timeout, the last client leaving, the turn's cancel, the fleet's board, another thread);
whatever claimed it first wins against the thread. The loop applies the claim once.

Threads here are real threads racing the event loop's resolvers; no timed assertions.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import anyio
import anyio.lowlevel
import anyio.to_thread
import pytest

from jpd.inquiry.pending import Answer, PendingQuestions, Reply
from jpd.protocol.errors import InvalidParams, NotFound
from tests.unit.fakes import Clients, FakeLink, replies, until_pending
from tests.unit.test_pending_questions import ID, request

RESOLVED = {"inquiryId": ID, "conversationId": "c"}


def answered_by(by: str) -> dict[str, Any]:
    return {**RESOLVED, "outcome": "answered", "answeredBy": by}


async def claim_in_thread(
    pending: PendingQuestions, value: Any, by: str = "client-9"
) -> Callable[[], None]:
    """Claim from a thread of its own, as a reader thread does."""
    return await anyio.to_thread.run_sync(lambda: pending.claim(ID, value, False, by))


async def ask_once(pending: PendingQuestions) -> None:
    """Ask with nobody deferring (the turn's task, to be cancelled)."""
    await pending.ask(request(), wait=False, wait_limit=None)


async def test_a_thread_claim_wins_over_a_client_answering_later() -> None:
    release = anyio.Event()

    async def slow(method: str, params: dict[str, Any]) -> Any:
        await release.wait()
        return {"answer": False}

    link = FakeLink(1, answer=slow)
    pending = Clients([link]).pending()
    result: list[Reply | None] = []
    async with anyio.create_task_group() as tg:

        async def ask() -> None:
            result.append(await pending.ask(request(), wait=False, wait_limit=None))

        tg.start_soon(ask)
        await link.asked.wait()
        settle = await claim_in_thread(pending, True)
        assert pending.pending() == []  # claimed: listed nowhere any more
        release.set()  # the client's answer comes now: it lost
        for _ in range(5):
            await anyio.lowlevel.checkpoint()
        settle()

    assert result == [Answer(True, False, "client-9")]
    assert link.resolved() == [answered_by("client-9")]  # told once, of the winner


async def test_a_client_answer_settled_first_makes_the_thread_claim_not_found() -> None:
    link = FakeLink(1, answer=replies({"answer": False}))
    pending = Clients([link]).pending()
    result: list[Reply | None] = []
    claims: list[BaseException] = []
    async with anyio.create_task_group() as tg:

        async def ask() -> None:
            result.append(await pending.ask(request(), wait=False, wait_limit=None))

        tg.start_soon(ask)
        await link.asked.wait()
        while not result:
            await anyio.lowlevel.checkpoint()
        with pytest.raises(NotFound) as info:
            await claim_in_thread(pending, True)
        claims.append(info.value)

    assert result == [Answer(False, False, "client-1")]
    assert "already answered" in claims[0].args[0]


async def test_a_claim_not_yet_applied_wins_over_the_timeout() -> None:
    """The thread claimed; the loop's wait ends before the settling step runs: the
    answer is the outcome, and clients hear `answered`, never `timed_out`."""
    bystander = FakeLink(1, answer_types=())
    pending = Clients([bystander]).pending()
    result: list[Reply | None] = []

    async def ask() -> None:
        result.append(await pending.ask(request(), wait=True, wait_limit=0.5))

    async with anyio.create_task_group() as tg:
        tg.start_soon(ask)
        await until_pending(pending)
        # Claimed at once (before the wait can end), its settling step not run here:
        # the wait's end applies the claim.
        settle = pending.claim(ID, True, False, "client-9")

    assert result == [Answer(True, False, "client-9")]
    assert bystander.resolved() == [answered_by("client-9")]
    settle()  # late: applied once already, nothing more is said
    assert bystander.resolved() == [answered_by("client-9")]


async def test_a_claim_wins_when_every_client_then_drops() -> None:
    release = anyio.Event()

    async def drop(method: str, params: dict[str, Any]) -> Any:
        await release.wait()
        raise ConnectionResetError("gone")

    link = FakeLink(1, answer=drop)
    pending = Clients([link]).pending()
    result: list[Reply | None] = []
    async with anyio.create_task_group() as tg:

        async def ask() -> None:
            result.append(await pending.ask(request(), wait=False, wait_limit=None))

        tg.start_soon(ask)
        await link.asked.wait()
        await claim_in_thread(pending, False)
        release.set()

    assert result == [Answer(False, False, "client-9")]  # not None: no detached policy


async def test_after_the_timeout_closed_it_a_claim_is_not_found() -> None:
    pending = Clients().pending()
    assert await pending.ask(request(), wait=True, wait_limit=0.01) is None
    with pytest.raises(NotFound):
        await claim_in_thread(pending, True)


async def test_cancelling_the_turn_after_a_claim_tells_clients_it_was_answered() -> None:
    link = FakeLink(1)  # never answers
    pending = Clients([link]).pending()
    async with anyio.create_task_group() as tg:
        tg.start_soon(ask_once, pending)
        await link.asked.wait()
        await claim_in_thread(pending, True)
        tg.cancel_scope.cancel()  # the turn ends before the loop applied the answer

    assert link.resolved() == [answered_by("client-9")]
    assert pending.pending() == []


async def test_a_turn_closed_by_its_cancel_takes_no_answer() -> None:
    """`turn/cancel` answered (its turn's questions closed from the reader thread): an
    `inquiry/answer` read after it is -32001; the turn's end then says `cancelled`."""
    link = FakeLink(1)
    pending = Clients([link]).pending()
    async with anyio.create_task_group() as tg:
        tg.start_soon(ask_once, pending)
        await link.asked.wait()
        await anyio.to_thread.run_sync(pending.close_turn, "t")
        assert pending.pending() == []
        with pytest.raises(NotFound):
            await claim_in_thread(pending, True)
        pending.close_turn("another turn")  # leaves other turns alone
        tg.cancel_scope.cancel()

    assert link.resolved() == [{**RESOLVED, "outcome": "cancelled"}]


async def test_an_invalid_answer_from_a_thread_leaves_the_question_open() -> None:
    pending = Clients().pending()
    result: list[Reply | None] = []
    async with anyio.create_task_group() as tg:

        async def ask() -> None:
            result.append(await pending.ask(request(), wait=True, wait_limit=30))

        tg.start_soon(ask)
        await until_pending(pending)
        with pytest.raises(InvalidParams, match="invalid answer"):
            await claim_in_thread(pending, "maybe")
        assert [i.inquiry_id for i in pending.pending()] == [ID]
        (await claim_in_thread(pending, True))()

    assert result == [Answer(True, False, "client-9")]


async def test_the_boards_answer_after_a_claim_is_not_found() -> None:
    """The fleet's board delivers its answers through `answer` on the loop: after a
    claim it loses like any later answer (`SharedQuestions.sync` ignores NotFound)."""
    pending = Clients().pending()
    result: list[Reply | None] = []
    async with anyio.create_task_group() as tg:

        async def ask() -> None:
            result.append(await pending.ask(request(), wait=True, wait_limit=30))

        tg.start_soon(ask)
        await until_pending(pending)
        settle = await claim_in_thread(pending, True)
        with pytest.raises(NotFound):
            pending.answer(ID, False, False, by="member-2")
        settle()

    assert result == [Answer(True, False, "client-9")]


async def test_many_threads_claim_at_once_exactly_one_wins() -> None:
    link = FakeLink(1, answer_types=())
    pending = Clients([link]).pending()
    result: list[Reply | None] = []
    threads = 16
    start = threading.Barrier(threads)
    won: list[tuple[str, Callable[[], None]]] = []
    lost: list[BaseException] = []
    lock = threading.Lock()

    def claimer(number: int) -> None:
        by = f"client-{number}"
        start.wait()
        try:
            settle = pending.claim(ID, number % 2 == 0, False, by)
        except NotFound as exc:
            with lock:
                lost.append(exc)
        else:
            with lock:
                won.append((by, settle))

    async with anyio.create_task_group() as tg:

        async def ask() -> None:
            result.append(await pending.ask(request(), wait=True, wait_limit=30))

        tg.start_soon(ask)
        await until_pending(pending)
        running = [threading.Thread(target=claimer, args=(n,)) for n in range(threads)]
        for thread in running:
            thread.start()
        await anyio.to_thread.run_sync(lambda: [t.join() for t in running])
        assert len(won) == 1 and len(lost) == threads - 1
        won[0][1]()

    by = won[0][0]
    assert result == [Answer(int(by.split("-")[1]) % 2 == 0, False, by)]
    assert link.resolved() == [answered_by(by)]
