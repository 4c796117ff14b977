"""A Postgres restart in the middle of a turn (fast and immediate, over TCP and a Unix
socket) leaves no turn stuck: it ends, or records an error, and the next turn runs."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from tests.e2e.sockets import Daemons, RpcError, SocketClient, wait_for
from tests.fleet.pgserver import PgServer, running_server
from tests.fleet.test_takeover import member

TEXT = " ".join(f"word{i}" for i in range(300))


@pytest.fixture
def own_server() -> Iterator[PgServer]:
    """A server of this test's own: it is restarted."""
    with running_server() as server:
        if isinstance(server, str):
            pytest.skip(server)
        yield server


@pytest.mark.parametrize("mode", ["fast", "immediate"])
@pytest.mark.parametrize("transport", ["tcp", "unix"])
async def test_a_restart_mid_turn_leaves_no_turn_stuck(
    tmp_path: Path, own_server: PgServer, daemons: Daemons, mode: str, transport: str
) -> None:
    own_server.create_database("jpd")
    url = own_server.url.rsplit("/", 1)[0] + "/jpd"
    if transport == "unix":
        url = f"postgresql://postgres@/jpd?host={own_server.sockets}&port={own_server.port}"
    stream = {"text": TEXT, "chunk": 8, "delay_ms": 20}
    env = member(tmp_path / "a", url, [stream, {"text": "after"}])
    daemon = await daemons.start(env)
    client = await SocketClient.connect(daemon.socket)
    await client.initialize()
    try:
        started = await client.request("turn/start", {"message": "stream"})
        await wait_for(
            lambda: len(client.turn_events(started["turnId"])) > 20, "the turn to stream"
        )
        own_server.restart(mode)
        completed = await client.wait_completed(started["turnId"])
        assert completed["event"]["stopReason"] in ("end_turn", "error", "cancelled")
        assert daemon.process.poll() is None
        cid = started["conversationId"]
        nxt = await client.request("turn/start", {"message": "again", "conversationId": cid})
        done = await client.wait_completed(nxt["turnId"])
        assert done["event"]["stopReason"] == "end_turn"
        with psycopg.connect(url) as conn:
            rows = conn.execute(
                "SELECT seq, body FROM jpd_events WHERE conversation_id = %s ORDER BY seq",
                (cid,),
            ).fetchall()
        assert [seq for seq, _ in rows] == list(range(1, len(rows) + 1))
        types = [json.loads(body)["type"] for _, body in rows]
        assert types.count("turn_start") == types.count("turn_end") == 2
    finally:
        await client.close()


async def test_a_database_outage_stalls_no_other_request(
    tmp_path: Path, own_server: PgServer, daemons: Daemons
) -> None:
    """While Postgres is down, a turn streaming on a member keeps appending (queued, on a
    thread; its events reach clients once stored): another client's `turn/list` there
    still answers; once the database is back the turn ends and its log has no hole."""
    own_server.create_database("jpd")
    url = own_server.url.rsplit("/", 1)[0] + "/jpd"
    stream = {"text": TEXT, "chunk": 8, "delay_ms": 20}
    env = member(tmp_path / "a", url, [stream])
    daemon = await daemons.start(env)
    client = await SocketClient.connect(daemon.socket)
    await client.initialize()
    other = await SocketClient.connect(daemon.socket)
    await other.initialize()
    try:
        started = await client.request("turn/start", {"message": "stream"})
        turn = started["turnId"]
        await wait_for(lambda: len(client.turn_events(turn)) > 20, "the turn to stream")
        own_server.stop("fast")
        try:
            listed = (await other.request("turn/list"))["turns"]
            assert [t["turnId"] for t in listed] == [turn]
            # The turn goes on (its checkpoints wait in the queue); its events reach the
            # client once what was appended before them is in the store.
            assert daemon.process.poll() is None
        finally:
            own_server.start()
        completed = await client.wait_completed(turn)
        assert completed["event"]["stopReason"] in ("end_turn", "error", "cancelled")
        seqs = [e["seq"] for e in client.turn_events(turn)]
        assert seqs == sorted(set(seqs))

        def rows() -> list[tuple[int, str]]:
            with psycopg.connect(url) as conn:
                return conn.execute(
                    "SELECT seq, body FROM jpd_events WHERE conversation_id = %s ORDER BY seq",
                    (started["conversationId"],),
                ).fetchall()

        # Past the lease's TTL the turn's own end is refused; the takeover scan (of this
        # same member) closes it then.
        await wait_for(lambda: json.loads(rows()[-1][1])["type"] == "turn_end", "its end")
        stored = rows()
        assert [seq for seq, _ in stored] == list(range(1, len(stored) + 1))
        assert json.loads(stored[0][1])["type"] == "turn_start"
    finally:
        await client.close()
        await other.close()


async def test_a_turn_start_during_an_outage_is_refused_not_left_waiting(
    tmp_path: Path, own_server: PgServer, daemons: Daemons
) -> None:
    """With Postgres down, `turn/start` (a new conversation or an existing one) answers
    -32008 after a bounded wait, other requests answer, and once the database is back
    turns start again."""
    own_server.create_database("jpd")
    url = own_server.url.rsplit("/", 1)[0] + "/jpd"
    env = member(tmp_path / "a", url, [{"text": "first"}, {"text": "after"}])
    daemon = await daemons.start(env)
    client = await SocketClient.connect(daemon.socket)
    await client.initialize()
    try:
        first = await client.request("turn/start", {"message": "hello"})
        await client.wait_completed(first["turnId"])
        cid = first["conversationId"]
        own_server.stop("fast")
        try:
            for params in ({"message": "new"}, {"message": "again", "conversationId": cid}):
                with pytest.raises(RpcError) as refused:
                    await client.request("turn/start", params)
                assert refused.value.code == -32008
                assert "cannot be reached" in str(refused.value)
            assert (await client.request("turn/list"))["turns"] == []
            assert daemon.process.poll() is None
        finally:
            own_server.start()
        nxt = await client.request("turn/start", {"message": "again", "conversationId": cid})
        done = await client.wait_completed(nxt["turnId"])
        assert done["event"]["stopReason"] == "end_turn"
    finally:
        await client.close()
