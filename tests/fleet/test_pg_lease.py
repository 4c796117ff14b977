"""Turn leases with fencing on a real Postgres: a claim is a compare-and-set, a lease
lives while renewed, and a holder that lost it writes nothing more."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from jpd.conversation import events as ev
from jpd.conversation.pg import PgStore
from jpd.conversation.pg.rows import APPEND_SQL
from jpd.conversation.pg.schema import SCHEMA_VERSION, SchemaTooNew
from jpd.conversation.port import ConversationBusy, LeaseLost
from jpd.conversation.recovery import recover

CID = "c-lease"
TTL = 1.0


@pytest.fixture
def stores(pg_url: str, tmp_path: Path) -> Iterator[tuple[PgStore, PgStore]]:
    a = PgStore(pg_url, tmp_path / "a", host="a", lease_ttl=TTL)
    b = PgStore(pg_url, tmp_path / "b", host="b", lease_ttl=TTL)
    a.create(CID)
    yield a, b
    a.close()
    b.close()


def wait_until(check: object, limit: float = 10.0) -> None:
    deadline = time.monotonic() + limit
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, "condition never held"
        time.sleep(0.05)


def test_a_renewed_lease_outlives_its_ttl(stores: tuple[PgStore, PgStore]) -> None:
    a, b = stores
    lease = a.lock_turn(CID)
    assert lease is not None
    time.sleep(TTL * 2.5)  # three renewals or more
    assert b.lock_turn(CID) is None
    a.append(CID, ev.ChatRequest(content="still mine"))
    lease.release()
    taken = b.lock_turn(CID)
    assert taken is not None and taken.epoch == lease.epoch + 1
    taken.release()


def test_a_zombie_writes_nothing_after_another_daemon_took_over(
    stores: tuple[PgStore, PgStore],
) -> None:
    a, b = stores
    lease = a.lock_turn(CID)
    assert lease is not None
    lost = threading.Event()
    lease.on_lost(lost.set)
    a.append(CID, ev.TurnStart(turn_id="t-1", model="m/x"))
    a.append(CID, ev.ToolCallRequest(id="call-1", name="run_command", arguments={}))
    lease._stop.set()  # the holder pauses: no more renewals (a SIGSTOP'd daemon)
    wait_until(lambda: b.lock_turn(CID) is not None)
    assert b.last_turn(CID) == (True, None)
    assert recover(b, CID) > 0  # the survivor closes the turn from the log

    # The zombie resumes. Its local deadline passed: it stops before the database.
    with pytest.raises(LeaseLost):
        a.append(CID, ev.ToolCallResponse(id="call-1", content="done late"))
    assert lost.is_set()
    # Even with a deadline it believes in, the database refuses the stale epoch.
    lease.lost = False
    lease.deadline = time.monotonic() + 60
    with pytest.raises(LeaseLost):
        a.append(CID, ev.ToolCallResponse(id="call-1", content="done late"))
    contents = [
        e.content for e in b.load(CID, sanitized=False) if isinstance(e, ev.ToolCallResponse)
    ]
    assert contents == ["Tool call was interrupted: the daemon stopped."]


def test_a_holder_that_cannot_renew_loses_the_lease_and_is_told(
    stores: tuple[PgStore, PgStore],
) -> None:
    a, b = stores
    lease = a.lock_turn(CID)
    assert lease is not None
    lost = threading.Event()
    lease.on_lost(lost.set)
    taken = b.lock_turn(CID)
    assert taken is None
    # Another daemon's claim after expiry (forced here): the next renewal sees it.
    with psycopg.connect(a.url, autocommit=True) as conn:
        conn.execute(
            "UPDATE jpd_conversations SET lease_holder = 'x', lease_epoch = lease_epoch + 1 "
            "WHERE id = %s",
            (CID,),
        )
    assert lost.wait(TTL * 3)
    with pytest.raises(LeaseLost):
        a.append(CID, ev.ChatRequest(content="after the loss"))
    assert a.load(CID) == []


def test_an_append_retried_with_its_event_id_is_stored_once(
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
    with psycopg.connect(a.url, autocommit=True) as conn:
        assert conn.execute(APPEND_SQL.encode(), params).fetchone() == (1,)
        assert conn.execute(APPEND_SQL.encode(), params).fetchone() is None
        a._refused(conn, CID, params)  # a retry of a done append: no error
    assert [e.content for e in a.load(CID)] == ["once"]  # type: ignore[attr-defined]
    assert a.metadata(CID).event_count == 1


def test_seqs_are_contiguous_across_writers_taking_turns(
    stores: tuple[PgStore, PgStore],
) -> None:
    a, b = stores
    for n in range(3):
        holder = (a, b)[n % 2]
        lease = holder.lock_turn(CID)
        assert lease is not None
        for k in range(5):
            holder.append(CID, ev.ChatRequest(content=f"{n}.{k}"))
        lease.release()
    with psycopg.connect(a.url) as conn:
        seqs = [r[0] for r in conn.execute("SELECT seq FROM jpd_events ORDER BY seq")]
    assert seqs == list(range(1, 16))


def test_the_schema_is_migrated_once_and_a_newer_one_refused(pg_url: str, tmp_path: Path) -> None:
    PgStore(pg_url, tmp_path, host="a").close()
    PgStore(pg_url, tmp_path, host="b").close()  # idempotent
    with psycopg.connect(pg_url, autocommit=True) as conn:
        rows = conn.execute("SELECT version FROM jpd_schema ORDER BY version").fetchall()
        assert rows == [(v,) for v in range(1, SCHEMA_VERSION + 1)]
        conn.execute("INSERT INTO jpd_schema (version) VALUES (%s)", (SCHEMA_VERSION + 1,))
    with pytest.raises(SchemaTooNew, match="upgrade jpd"):
        PgStore(pg_url, tmp_path, host="c")


def test_a_conversation_whose_turn_runs_elsewhere_is_not_deleted(
    stores: tuple[PgStore, PgStore],
) -> None:
    a, b = stores
    lease = a.lock_turn(CID)
    assert lease is not None
    with pytest.raises(ConversationBusy):
        b.delete(CID)
    assert b.exists(CID)
    lease.release()
    b.delete(CID)
    assert not a.exists(CID)
