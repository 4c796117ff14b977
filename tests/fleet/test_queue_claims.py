"""The turn queue's claims on a real Postgres (`jpd.conversation.pg.queue`): racing
claimers take each queued turn once; a pinned turn only on its host; a claimer that
dies before its turn started leaves it claimable again, one whose turn ran does not;
one claim path takes over an expired open turn too."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from jpd.conversation import events as ev
from jpd.conversation.pg import PgStore
from jpd.conversation.port import QueueClaim
from tests.fleet.test_pg_lease import wait_until

TTL = 1.0


@pytest.fixture
def stores(pg_url: str, tmp_path: Path) -> Iterator[list[PgStore]]:
    found = [
        PgStore(pg_url, tmp_path / name, host=host, lease_ttl=TTL)
        for name, host in (("a", "h1"), ("b", "h1"), ("c", "h2"))
    ]
    yield found
    for store in found:
        store.close()


def enqueue(store: PgStore, cid: str, turn: str, *, pinned: bool = False) -> bool:
    store.create(cid)
    return store.turn_queue().enqueue(
        cid, turn, request='{"message":"hi"}', model="test/scripted", workspace=None, pinned=pinned
    )


def died(claim: QueueClaim) -> None:
    """The claimer stops renewing (as if killed): its lease expires in the database."""
    claim.lease._lose("the test killed it")  # type: ignore[attr-defined]


def claim_soon(store: PgStore) -> QueueClaim:
    """The claim `store` makes once there is one (a lease expiring meanwhile)."""
    found: list[QueueClaim] = []

    def claimed() -> bool:
        claim = store.turn_queue().claim()
        if claim is not None:
            found.append(claim)
        return claim is not None

    wait_until(claimed)
    return found[0]


def test_racing_claimers_take_each_queued_turn_once(stores: list[PgStore]) -> None:
    a = stores[0]
    turns = {f"t-{n}" for n in range(30)}
    for turn in sorted(turns):
        assert enqueue(a, f"c-{turn}", turn)
    claimed: list[str] = []
    lock = threading.Lock()

    def claimer(store: PgStore) -> None:
        queue = store.turn_queue()
        while (claim := queue.claim()) is not None:
            with lock:
                claimed.append(claim.turn_id)
            claim.lease.release()

    threads = [threading.Thread(target=claimer, args=(s,)) for s in stores for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert sorted(claimed) == sorted(turns)  # every one, once
    assert a.turn_queue().queued() == []


def test_a_pinned_turn_is_claimed_only_on_its_host(stores: list[PgStore]) -> None:
    a, b, c = stores
    assert enqueue(a, "c-pinned", "t-pinned", pinned=True)
    assert c.turn_queue().claim() is None  # another host
    assert [t for _, t, _, _ in c.turn_queue().queued()] == ["t-pinned"]
    claim = b.turn_queue().claim()  # the same host, another member
    assert claim is not None and claim.turn_id == "t-pinned"
    claim.lease.release()


def test_a_queued_conversation_takes_no_other_turn(stores: list[PgStore]) -> None:
    a, b, _ = stores
    assert enqueue(a, "c-busy", "t-1")
    assert b.lock_turn("c-busy") is None  # a turn waits there
    assert not b.turn_queue().enqueue(
        "c-busy", "t-2", request="{}", model="m", workspace=None, pinned=False
    )


def test_a_claim_whose_claimer_died_before_its_turn_started_is_claimed_again(
    stores: list[PgStore],
) -> None:
    a, b, c = stores
    assert enqueue(a, "c-lost", "t-lost")
    first = b.turn_queue().claim()
    assert first is not None
    assert c.turn_queue().claim() is None  # held by its claimer
    died(first)
    again = claim_soon(c)
    assert again.turn_id == "t-lost" and again.request is not None
    assert again.lease.epoch > first.lease.epoch  # type: ignore[attr-defined]
    again.lease.release()
    assert c.turn_queue().claim() is None  # released: the queue is done with it


def test_a_claimed_turn_that_ran_is_never_claimed_again(stores: list[PgStore]) -> None:
    a, b, c = stores
    assert enqueue(a, "c-ran", "t-ran")
    claim = b.turn_queue().claim()
    assert claim is not None
    b.append("c-ran", ev.TurnStart(turn_id="t-ran", model="test/scripted"))
    b.append("c-ran", ev.TurnEnd(turn_id="t-ran", stop_reason="end_turn"))
    died(claim)  # ended, but its lease was never released (an outage, then a kill)
    wait_until(lambda: expired(c, "c-ran"))
    assert c.turn_queue().claim() is None  # never run twice
    # The conversation takes a new queued turn (the stale row goes).
    assert a.turn_queue().enqueue(
        "c-ran", "t-next", request="{}", model="m", workspace=None, pinned=False
    )
    nxt = c.turn_queue().claim()
    assert nxt is not None and nxt.turn_id == "t-next"
    nxt.lease.release()


def expired(store: PgStore, cid: str) -> bool:
    found = store.run(
        lambda conn: conn.execute(
            "SELECT lease_expires < now() FROM jpd_conversations WHERE id = %s", (cid,)
        ).fetchone()
    )
    return bool(found and found[0])


def test_an_expired_open_turn_is_taken_over_by_the_same_claim(stores: list[PgStore]) -> None:
    a, b, _ = stores
    a.create("c-open")
    lease = a.lock_turn("c-open")
    assert lease is not None
    a.append("c-open", ev.TurnStart(turn_id="t-open", model="test/scripted"))
    a.written("c-open")
    lease._lose("killed")  # type: ignore[attr-defined]
    found = claim_soon(b)
    assert found.turn_id == "t-open" and found.request is None  # a takeover
    found.lease.release()
