"""The turn queue's claims on a real Postgres (`jpd.conversation.pg.queue`): racing
claimers take each queued turn once; a pinned turn only on its host; a claimer that
dies before its turn started leaves it claimable again, one whose turn ran does not;
one claim path takes over an expired open turn too."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest_asyncio

from jpd.conversation import events as ev
from jpd.conversation.pg import PgStore
from jpd.conversation.port import QueueClaim
from tests.fleet.test_pg_lease import wait_until

TTL = 1.0


@pytest_asyncio.fixture
async def stores(pg_url: str, tmp_path: Path) -> AsyncIterator[list[PgStore]]:
    found = [
        PgStore(pg_url, tmp_path / name, host=host, lease_ttl=TTL)
        for name, host in (("a", "h1"), ("b", "h1"), ("c", "h2"))
    ]
    yield found
    for store in found:
        await store.close()


async def enqueue(store: PgStore, cid: str, turn: str, *, pinned: bool = False) -> bool:
    await store.create(cid)
    return await store.turn_queue().enqueue(
        cid, turn, request='{"message":"hi"}', model="test/scripted", workspace=None, pinned=pinned
    )


def died(claim: QueueClaim) -> None:
    """The claimer stops renewing (as if killed): its lease expires in the database."""
    claim.lease._lose("the test killed it")  # type: ignore[attr-defined]


async def claim_soon(store: PgStore) -> QueueClaim:
    """The claim `store` makes once there is one (a lease expiring meanwhile)."""
    found: list[QueueClaim] = []

    async def claimed() -> bool:
        claim = await store.turn_queue().claim()
        if claim is not None:
            found.append(claim)
        return claim is not None

    await wait_until(claimed)
    return found[0]


async def test_racing_claimers_take_each_queued_turn_once(stores: list[PgStore]) -> None:
    a = stores[0]
    turns = {f"t-{n}" for n in range(30)}
    for turn in sorted(turns):
        assert await enqueue(a, f"c-{turn}", turn)
    claimed: list[str] = []

    async def claimer(store: PgStore) -> None:
        queue = store.turn_queue()
        while (claim := await queue.claim()) is not None:
            claimed.append(claim.turn_id)
            await claim.lease.release()

    with anyio.fail_after(30):  # claims at once, on pooled connections of three members
        async with anyio.create_task_group() as tg:
            for store in stores:
                for _ in range(2):
                    tg.start_soon(claimer, store)
    assert sorted(claimed) == sorted(turns)  # every one, once
    assert await a.turn_queue().queued() == []


async def test_a_pinned_turn_is_claimed_only_on_its_host(stores: list[PgStore]) -> None:
    a, b, c = stores
    assert await enqueue(a, "c-pinned", "t-pinned", pinned=True)
    assert await c.turn_queue().claim() is None  # another host
    assert [t for _, t, _, _ in await c.turn_queue().queued()] == ["t-pinned"]
    claim = await b.turn_queue().claim()  # the same host, another member
    assert claim is not None and claim.turn_id == "t-pinned"
    await claim.lease.release()


async def test_a_queued_conversation_takes_no_other_turn(stores: list[PgStore]) -> None:
    a, b, _ = stores
    assert await enqueue(a, "c-busy", "t-1")
    assert await b.lock_turn("c-busy") is None  # a turn waits there
    assert not await b.turn_queue().enqueue(
        "c-busy", "t-2", request="{}", model="m", workspace=None, pinned=False
    )


async def test_a_claim_whose_claimer_died_before_its_turn_started_is_claimed_again(
    stores: list[PgStore],
) -> None:
    a, b, c = stores
    assert await enqueue(a, "c-lost", "t-lost")
    first = await b.turn_queue().claim()
    assert first is not None
    assert await c.turn_queue().claim() is None  # held by its claimer
    died(first)
    again = await claim_soon(c)
    assert again.turn_id == "t-lost" and again.request is not None
    assert again.lease.epoch > first.lease.epoch  # type: ignore[attr-defined]
    await again.lease.release()
    assert await c.turn_queue().claim() is None  # released: the queue is done with it


async def test_a_claimed_turn_that_ran_is_never_claimed_again(stores: list[PgStore]) -> None:
    a, b, c = stores
    assert await enqueue(a, "c-ran", "t-ran")
    claim = await b.turn_queue().claim()
    assert claim is not None
    b.append("c-ran", ev.TurnStart(turn_id="t-ran", model="test/scripted"))
    b.append("c-ran", ev.TurnEnd(turn_id="t-ran", stop_reason="end_turn"))
    await b.written("c-ran")
    died(claim)  # ended, but its lease was never released (an outage, then a kill)
    await wait_until(lambda: expired(c, "c-ran"))
    assert await c.turn_queue().claim() is None  # never run twice
    # The conversation takes a new queued turn (the stale row goes).
    assert await a.turn_queue().enqueue(
        "c-ran", "t-next", request="{}", model="m", workspace=None, pinned=False
    )
    nxt = await c.turn_queue().claim()
    assert nxt is not None and nxt.turn_id == "t-next"
    await nxt.lease.release()


async def expired(store: PgStore, cid: str) -> bool:
    found = await store.one(
        "SELECT lease_expires < now() FROM jpd_conversations WHERE id = %s", (cid,)
    )
    return bool(found and found[0])


async def test_an_expired_open_turn_is_taken_over_by_the_same_claim(
    stores: list[PgStore],
) -> None:
    a, b, _ = stores
    await a.create("c-open")
    lease = await a.lock_turn("c-open")
    assert lease is not None
    a.append("c-open", ev.TurnStart(turn_id="t-open", model="test/scripted"))
    await a.written("c-open")
    lease._lose("killed")  # type: ignore[attr-defined]
    found = await claim_soon(b)
    assert found.turn_id == "t-open" and found.request is None  # a takeover
    await found.lease.release()
