"""A fleet member sends its clients only events whose appends are in the store: while
the database holds a turn's write back (its row locked), the turn's client receives
nothing more; once the write commits, everything follows, in order, nothing lost."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import psycopg

from tests.e2e.sockets import Daemons, wait_for
from tests.fleet.test_takeover import member, start, stored

TEXT = " ".join(f"word{i}" for i in range(200))


def writer_waits(url: str) -> bool:
    """Whether a backend waits for a lock on a conversation row (the turn's append)."""
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
            "AND query LIKE '%%jpd_conversations%%'"
        ).fetchone()
    return bool(row and row[0])


async def settled_count(count: Callable[[], int], quiet: float = 0.3) -> int:
    """`count()` once it has not changed for `quiet` seconds (at most 10 s)."""
    last, since = count(), asyncio.get_running_loop().time()
    for _ in range(200):
        await asyncio.sleep(0.05)
        now = count()
        if now != last:
            last, since = now, asyncio.get_running_loop().time()
        elif asyncio.get_running_loop().time() - since >= quiet:
            break
    return last


async def test_a_client_sees_no_event_before_the_appends_before_it_are_committed(
    tmp_path: Path, pg_url: str, daemons: Daemons
) -> None:
    stream = {"text": TEXT, "chunk": 4, "delay_ms": 20}  # about 2 s, checkpoints 2/s
    env = member(tmp_path / "a", pg_url, [stream])
    _, client = await start(daemons, env)
    try:
        started = await client.request("turn/start", {"message": "stream"})
        turn, cid = started["turnId"], started["conversationId"]
        await wait_for(lambda: len(client.turn_events(turn)) > 10, "the turn to stream")
        with psycopg.connect(pg_url) as blocker, blocker.transaction():
            blocker.execute("SELECT 1 FROM jpd_conversations WHERE id = %s FOR UPDATE", (cid,))
            await wait_for(lambda: writer_waits(pg_url), "the next append to wait")
            # The write waits. Events committed before it may still be on their way to
            # the client: once its count has stopped moving, that is all it gets.
            seen = await settled_count(lambda: len(client.turn_events(turn)))
            stored_now = len(stored(pg_url, cid))
            await asyncio.sleep(1.0)  # the turn streams on meanwhile
            assert len(client.turn_events(turn)) == seen
            # Committed: the rest follows.
        completed = await client.wait_completed(turn)
        assert completed["event"]["stopReason"] == "end_turn"
        events = client.turn_events(turn)
        text = "".join(e["event"]["text"] for e in events if e["event"]["kind"] == "text_delta")
        assert text == TEXT
        seqs = [e["seq"] for e in events]
        assert seqs == list(range(seqs[0], seqs[0] + len(seqs)))
        assert len(stored(pg_url, cid)) > stored_now
    finally:
        await client.close()
