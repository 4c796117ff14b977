"""Turn leases with fencing on a real Postgres: a claim is a compare-and-set, a lease
lives while renewed, and a holder that lost it writes nothing more."""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import anyio
import psycopg
import pytest
import pytest_asyncio

from jpd.conversation import events as ev
from jpd.conversation.pg import PgStore
from jpd.conversation.pg.rows import APPEND_SQL
from jpd.conversation.pg.schema import SCHEMA_VERSION, SchemaTooNew
from jpd.conversation.port import ConversationBusy, LeaseLost
from jpd.conversation.recovery import recover

CID = "c-lease"
TTL = 1.0


@pytest_asyncio.fixture
async def stores(pg_url: str, tmp_path: Path) -> AsyncIterator[tuple[PgStore, PgStore]]:
    a = PgStore(pg_url, tmp_path / "a", host="a", lease_ttl=TTL)
    b = PgStore(pg_url, tmp_path / "b", host="b", lease_ttl=TTL)
    await a.create(CID)
    yield a, b
    await a.close()
    await b.close()


async def wait_until(check: Callable[[], object], limit: float = 10.0) -> None:
    with anyio.fail_after(limit):
        while not await check():  # type: ignore[misc]  # noqa: ASYNC110 - polls the database
            await anyio.sleep(0.05)


async def execute(url: str, sql: str, params: tuple[object, ...]) -> None:
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        await conn.execute(sql.encode(), params)


async def test_a_renewed_lease_outlives_its_ttl(stores: tuple[PgStore, PgStore]) -> None:
    a, b = stores
    lease = await a.lock_turn(CID)
    assert lease is not None
    await anyio.sleep(TTL * 2.5)  # three renewals or more
    assert await b.lock_turn(CID) is None
    a.append(CID, ev.ChatRequest(content="still mine"))
    await a.written(CID)
    await lease.release()
    taken = await b.lock_turn(CID)
    assert taken is not None and taken.epoch == lease.epoch + 1
    await taken.release()


async def test_a_zombie_writes_nothing_after_another_daemon_took_over(
    stores: tuple[PgStore, PgStore],
) -> None:
    a, b = stores
    lease = await a.lock_turn(CID)
    assert lease is not None
    lost = anyio.Event()
    lease.on_lost(lost.set)
    a.append(CID, ev.TurnStart(turn_id="t-1", model="m/x"))
    a.append(CID, ev.ToolCallRequest(id="call-1", name="run_command", arguments={}))
    await a.written(CID)
    lease._stop()  # the holder pauses: no more renewals (a SIGSTOP'd daemon)

    async def taken() -> bool:
        return await b.lock_turn(CID) is not None

    await wait_until(taken)
    assert await b.last_turn(CID) == (True, None)
    assert await recover(b, CID) > 0  # the survivor closes the turn from the log

    # The zombie resumes. Its local deadline passed: it stops before the database.
    with pytest.raises(LeaseLost):
        a.append(CID, ev.ToolCallResponse(id="call-1", content="done late"))
    assert lost.is_set()
    # Even with a deadline it believes in, the database refuses the stale epoch.
    lease.lost = False
    lease.deadline = time.monotonic() + 60
    a.append(CID, ev.ToolCallResponse(id="call-1", content="done late"))
    a.append(CID, ev.ChatResponse(message="and more"))  # one batch: refused whole
    with pytest.raises(LeaseLost):
        await a.written(CID)
    with pytest.raises(LeaseLost):  # and nothing more of it is written
        a.append(CID, ev.ToolCallResponse(id="call-1", content="done later"))
    contents = [
        e.content for e in await b.load(CID, sanitized=False) if isinstance(e, ev.ToolCallResponse)
    ]
    assert contents == ["Tool call was interrupted: the daemon stopped."]


async def test_a_holder_that_cannot_renew_loses_the_lease_and_is_told(
    stores: tuple[PgStore, PgStore],
) -> None:
    a, b = stores
    lease = await a.lock_turn(CID)
    assert lease is not None
    lost = anyio.Event()
    lease.on_lost(lost.set)
    taken = await b.lock_turn(CID)
    assert taken is None
    # Another daemon's claim after expiry (forced here): the next renewal sees it.
    await execute(
        a.url,
        "UPDATE jpd_conversations SET lease_holder = 'x', lease_epoch = lease_epoch + 1 "
        "WHERE id = %s",
        (CID,),
    )
    with anyio.fail_after(TTL * 3):
        await lost.wait()
    with pytest.raises(LeaseLost):
        a.append(CID, ev.ChatRequest(content="after the loss"))
    assert await a.load(CID) == []


async def test_an_append_retried_with_its_event_id_is_stored_once(
    stores: tuple[PgStore, PgStore],
) -> None:
    a, _ = stores
    params = {
        "cid": CID,
        "eid": uuid.uuid4(),
        "epoch": None,
        "holder": a.holder,
        "ts": ev.now(),
        "title": None,
        "workspace": None,
        "turn": None,
        "interrupted": False,
        "type": "chat_request",
        "body": ev.dump_event(ev.ChatRequest(content="once")),
    }
    async with await psycopg.AsyncConnection.connect(a.url, autocommit=True) as conn:
        assert await (await conn.execute(APPEND_SQL.encode(), params)).fetchone() == (1,)
        assert await (await conn.execute(APPEND_SQL.encode(), params)).fetchone() is None
        await a._refused(conn, CID, params)  # a retry of a done append: no error
    assert [e.content for e in await a.load(CID)] == ["once"]  # type: ignore[attr-defined]
    assert (await a.metadata(CID)).event_count == 1


async def test_seqs_are_contiguous_across_writers_taking_turns(
    stores: tuple[PgStore, PgStore],
) -> None:
    a, b = stores
    for n in range(3):
        holder = (a, b)[n % 2]
        lease = await holder.lock_turn(CID)
        assert lease is not None
        for k in range(5):
            holder.append(CID, ev.ChatRequest(content=f"{n}.{k}"))
        await lease.release()  # after its appends are written
    async with await psycopg.AsyncConnection.connect(a.url) as conn:
        cur = await conn.execute("SELECT seq FROM jpd_events ORDER BY seq")
        seqs = [r[0] for r in await cur.fetchall()]
    assert seqs == list(range(1, 16))


async def test_the_schema_is_migrated_once_and_a_newer_one_refused(
    pg_url: str, tmp_path: Path
) -> None:
    for host in ("a", "b"):  # idempotent
        store = PgStore(pg_url, tmp_path, host=host)
        await store.open()
        await store.close()
    async with await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as conn:
        cur = await conn.execute("SELECT version FROM jpd_schema ORDER BY version")
        assert await cur.fetchall() == [(v,) for v in range(1, SCHEMA_VERSION + 1)]
        await conn.execute("INSERT INTO jpd_schema (version) VALUES (%s)", (SCHEMA_VERSION + 1,))
    with pytest.raises(SchemaTooNew, match="upgrade jpd"):
        await PgStore(pg_url, tmp_path, host="c").open()


async def test_a_conversation_whose_turn_runs_elsewhere_is_not_deleted(
    stores: tuple[PgStore, PgStore],
) -> None:
    a, b = stores
    lease = await a.lock_turn(CID)
    assert lease is not None
    with pytest.raises(ConversationBusy):
        await b.delete(CID)
    assert await b.exists(CID)
    await lease.release()
    await b.delete(CID)
    assert not await a.exists(CID)
