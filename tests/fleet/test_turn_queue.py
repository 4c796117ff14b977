"""The fleet's turn queue: a member without room queues a turn, a member with room runs
it and the client that started it follows it there; a turn pinned to a workspace waits
for its host; racing claimers never run a turn twice; a queued turn can be cancelled
from any member."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.e2e.sockets import Daemons, RpcError, SocketClient, add_config, wait_for
from tests.e2e.tools import tool_call
from tests.fleet.test_takeover import kill_runs, member, start, stored

ONE = "max_turns = 1\n"


def queued(url: str) -> list[str]:
    with psycopg.connect(url) as conn:
        return [str(r[0]) for r in conn.execute("SELECT turn_id FROM jpd_turn_queue").fetchall()]


def kinds(client: SocketClient, turn: str) -> list[str]:
    return [e["event"]["kind"] for e in client.turn_events(turn)]


async def busy_member(
    tmp_path: Path, daemons: Daemons, url: str, host: str, more: list[dict[str, Any]]
) -> tuple[Path, SocketClient, SocketClient, str]:
    """Member A (`host`, one turn at a time) running a slow tool in a workspace; returns
    (workspace, the client of that turn, another client of A without a workspace, the
    running turn's id)."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    env_a = member(tmp_path / "a", url, [{"text": "Busy.", **tool_call("slow")}, *more], host, ONE)
    daemon_a, busy = await start(daemons, env_a, workspaceRoot=str(workspace))
    other = await SocketClient.connect(daemon_a.socket)
    await other.initialize()
    running = (await busy.request("turn/start", {"message": "be busy"}))["turnId"]
    await wait_for((workspace / "runs").exists, "A's tool to run")
    return workspace, busy, other, running


async def test_a_turn_started_on_a_full_member_runs_on_another_and_its_client_follows_it(
    tmp_path: Path, pg_url: str, daemons: Daemons
) -> None:
    workspace, busy, client_a, _ = await busy_member(tmp_path, daemons, pg_url, "a", [])
    env_b = member(tmp_path / "b", pg_url, [{"text": "Ran on B.", "chunk": 2}, {"text": "More."}])
    _, client_b = await start(daemons, env_b)
    try:
        started = await client_a.request("turn/start", {"message": "run it elsewhere"})
        turn, cid = started["turnId"], started["conversationId"]
        completed = await client_a.wait_completed(turn)
        assert completed["event"]["stopReason"] == "end_turn"
        seen = client_a.turn_events(turn)
        assert kinds(client_a, turn)[0] == "turn_started"
        text = "".join(e["event"]["text"] for e in seen if e["event"]["kind"] == "text_delta")
        assert text == "Ran on B."
        seqs = [e["seq"] for e in seen]
        assert seqs == list(range(seqs[0], seqs[0] + len(seqs))), "seqs not contiguous"
        assert kinds(client_a, turn).count("turn_completed") == 1
        rows = stored(pg_url, cid)
        assert [e["type"] for _, e in rows] == [
            "turn_start",
            "chat_request",
            "chat_response",
            "turn_end",
        ]
        assert rows[0][1]["turn_id"] == turn
        assert queued(pg_url) == []
        # The conversation goes on anywhere (here on B, which has room).
        nxt = await client_b.request("turn/start", {"conversationId": cid, "message": "more"})
        assert (await client_b.wait_completed(nxt["turnId"]))["event"]["stopReason"] == "end_turn"
    finally:
        kill_runs(workspace)
        for client in (busy, client_a, client_b):
            await client.close()


async def test_a_turn_pinned_to_a_workspace_waits_for_a_member_of_its_host(
    tmp_path: Path, pg_url: str, daemons: Daemons
) -> None:
    # B (another host) has room all along; the pinned turn waits for A, its host.
    workspace, busy, _, running = await busy_member(
        tmp_path, daemons, pg_url, "a", [{"text": "Ran on A."}]
    )
    env_b = member(tmp_path / "b", pg_url, [{"text": "Ran on B."}])
    _, client_b = await start(daemons, env_b)
    try:
        pinned = await busy.request("turn/start", {"message": "in my workspace"})
        turn = pinned["turnId"]
        assert queued(pg_url) == [turn]
        listed = [t["turnId"] for t in (await client_b.request("turn/list"))["turns"]]
        assert turn in listed and running in listed
        with psycopg.connect(pg_url) as conn:  # B was woken by the enqueue, and passed it
            conn.execute("NOTIFY jpd_queue")
        await asyncio.sleep(1.5)  # B's claim rounds (woken, and its poll); not a timing check
        assert queued(pg_url) == [turn]
        # Busy (-32005) while it waits, on any member.
        cid = pinned["conversationId"]
        with pytest.raises(RpcError) as refused:
            await client_b.request("turn/start", {"conversationId": cid, "message": "x"})
        assert refused.value.code == -32005
        assert (await busy.request("turn/cancel", {"turnId": running}))["cancelled"]
        completed = await busy.wait_completed(turn)
        assert completed["event"]["stopReason"] == "end_turn"
        types = [e for _, e in stored(pg_url, cid)]
        assert types[2]["message"] == "Ran on A."
    finally:
        kill_runs(workspace)
        await busy.close()
        await client_b.close()


async def test_racing_claimers_never_run_a_queued_turn_twice(
    tmp_path: Path, pg_url: str, daemons: Daemons
) -> None:
    count = 12
    workspace, busy, client_a, _ = await busy_member(tmp_path, daemons, pg_url, "a", [])
    env_b = member(tmp_path / "b", pg_url, [{"text": "B"}] * count, fleet="max_turns = 2\n")
    env_c = member(tmp_path / "c", pg_url, [{"text": "C"}] * count, fleet="max_turns = 2\n")
    _, client_b = await start(daemons, env_b)
    _, client_c = await start(daemons, env_c)
    try:
        started = await asyncio.gather(
            *(client_a.request("turn/start", {"message": f"turn {i}"}) for i in range(count))
        )
        for s in started:
            completed = await client_a.wait_completed(s["turnId"])
            assert completed["event"]["stopReason"] == "end_turn"
        ran: list[str] = []
        for s in started:
            events = [e for _, e in stored(pg_url, s["conversationId"])]
            assert [e["type"] for e in events] == [
                "turn_start",
                "chat_request",
                "chat_response",
                "turn_end",
            ], "a queued turn ran twice, or not at all"
            assert events[0]["turn_id"] == s["turnId"]
            ran.append(events[2]["message"])
        assert sorted(set(ran)) <= ["B", "C"] and len(ran) == count
        assert queued(pg_url) == []
    finally:
        kill_runs(workspace)
        for client in (busy, client_a, client_b, client_c):
            await client.close()


async def test_a_queued_turn_is_cancelled_from_another_member(
    tmp_path: Path, pg_url: str, daemons: Daemons
) -> None:
    workspace, busy, _, _ = await busy_member(tmp_path, daemons, pg_url, "a", [])
    env_b = member(tmp_path / "b", pg_url, [{"text": "Ran on B."}])
    _, client_b = await start(daemons, env_b)
    try:
        # Pinned to A's host: it waits, and nobody runs it.
        waiting = await busy.request("turn/start", {"message": "never mind"})
        turn, cid = waiting["turnId"], waiting["conversationId"]
        assert queued(pg_url) == [turn]
        assert (await client_b.request("turn/cancel", {"turnId": turn}))["cancelled"]
        completed = await busy.wait_completed(turn)
        assert completed["event"]["stopReason"] == "cancelled"
        assert kinds(busy, turn) == ["turn_started", "turn_completed"]
        events = [e for _, e in stored(pg_url, cid)]
        assert [e["type"] for e in events] == ["turn_start", "chat_request", "turn_end"]
        assert events[1]["content"] == "never mind"
        assert events[2]["stop_reason"] == "cancelled"
        assert queued(pg_url) == []
        # Nothing left to cancel; the conversation is free again.
        assert not (await client_b.request("turn/cancel", {"turnId": turn}))["cancelled"]
        nxt = await client_b.request("turn/start", {"conversationId": cid, "message": "now"})
        assert (await client_b.wait_completed(nxt["turnId"]))["event"]["stopReason"] == "end_turn"
    finally:
        kill_runs(workspace)
        await busy.close()
        await client_b.close()


async def test_a_member_continues_a_conversation_with_the_turns_others_ran_since(
    tmp_path: Path, pg_url: str, daemons: Daemons
) -> None:
    """A keeps the history of its turn; after B ran the next one, A's next turn sends
    the model B's turn too (A's kept history is not reused)."""
    env_a = member(tmp_path / "a", pg_url, [{"text": "One from A."}, {"text": "Three from A."}])
    env_b = member(tmp_path / "b", pg_url, [{"text": "Two from B."}])
    record = tmp_path / "a" / "requests.jsonl"
    config = Path(env_a["JP_CONFIG"])
    config.write_text(
        config.read_text().replace("[providers.test]\n", f'[providers.test]\nrecord = "{record}"\n')
    )
    _, client_a = await start(daemons, env_a)
    _, client_b = await start(daemons, env_b)
    try:
        first = await client_a.request("turn/start", {"message": "first"})
        cid = first["conversationId"]
        await client_a.wait_completed(first["turnId"])
        second = await client_b.request("turn/start", {"conversationId": cid, "message": "second"})
        await client_b.wait_completed(second["turnId"])
        third = await client_a.request("turn/start", {"conversationId": cid, "message": "third"})
        assert (await client_a.wait_completed(third["turnId"]))["event"]["stopReason"] == "end_turn"
        last = record.read_text().splitlines()[-1]
        for said in ("first", "One from A.", "second", "Two from B.", "third"):
            assert said in last, f"A's model call lacks {said!r}"
    finally:
        await client_a.close()
        await client_b.close()


async def test_the_member_running_a_new_conversations_queued_first_turn_titles_it(
    tmp_path: Path, pg_url: str, daemons: Daemons
) -> None:
    """As a first turn run where it started: after it ended, the title model names the
    conversation (on the member that ran it), and every member lists that title."""
    workspace, busy, client_a, _ = await busy_member(tmp_path, daemons, pg_url, "a", [])
    env_b = member(tmp_path / "b", pg_url, [{"text": "Ran on B."}, {"text": '"Queued work."'}])
    add_config(env_b, '[conversation.title.generate]\nmodel = "test/titler"\n')
    _, client_b = await start(daemons, env_b)
    try:
        started = await client_a.request("turn/start", {"message": "run it elsewhere"})
        turn, cid = started["turnId"], started["conversationId"]
        assert (await client_a.wait_completed(turn))["event"]["stopReason"] == "end_turn"

        async def title() -> str | None:
            listed = (await client_a.request("conversation/list"))["conversations"]
            return next((c["title"] for c in listed if c["conversationId"] == cid), None)

        deadline = asyncio.get_running_loop().time() + 30
        while await title() != "Queued work":
            assert asyncio.get_running_loop().time() < deadline, "no title was written"
            await asyncio.sleep(0.1)
        # A later turn of the conversation is not a first turn: no second title request.
        nxt = await client_b.request("turn/start", {"conversationId": cid, "message": "more"})
        await client_b.wait_completed(nxt["turnId"])
        assert await title() == "Queued work"
    finally:
        kill_runs(workspace)
        for client in (busy, client_a, client_b):
            await client.close()
