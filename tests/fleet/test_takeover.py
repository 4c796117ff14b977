"""Two daemons on one Postgres store: after a SIGKILL of the daemon running a turn, the
other takes the turn over once its lease expired, closes it with jpd's recovery (the
cut tool reported interrupted, not run again) and finishes it; seqs stay contiguous
and no event is written twice."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
from pathlib import Path
from typing import Any

import psycopg

from tests.e2e.sockets import (
    Daemons,
    Listening,
    RpcError,
    SocketClient,
    add_config,
    pid_alive,
    socket_env,
    wait_for,
)
from tests.e2e.tools import add_tool, tool_call

TTL = 2
SLOW = """
with open(os.path.join(os.getcwd(), "runs"), "a") as f:
    f.write(f"{os.getpid()}\\n")
time.sleep(600)
"""


def member(
    home: Path,
    url: str,
    responses: list[dict[str, Any]],
    host: str | None = None,
    fleet: str = "",
) -> dict[str, str]:
    """A fleet member's environment; `fleet`: more lines of its `[daemon.fleet]`."""
    home.mkdir()
    env = socket_env(home, responses)
    env["JPD_STORE_URL"] = url
    add_config(env, f'[daemon.fleet]\nhost = "{host or home.name}"\nlease_ttl = {TTL}\n{fleet}')
    add_tool(env, "slow", SLOW)
    return env


async def start(
    daemons: Daemons, env: dict[str, str], **init: Any
) -> tuple[Listening, SocketClient]:
    daemon = await daemons.start(env)
    client = await SocketClient.connect(daemon.socket)
    await client.initialize(**init)
    return daemon, client


def stored(url: str, cid: str) -> list[tuple[int, dict[str, Any]]]:
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT seq, body FROM jpd_events WHERE conversation_id = %s ORDER BY seq", (cid,)
        ).fetchall()
    return [(seq, json.loads(body)) for seq, body in rows]


async def test_a_killed_members_turn_is_taken_over_and_finished(
    tmp_path: Path, pg_url: str, daemons: Daemons
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    env_a = member(tmp_path / "a", pg_url, [{"text": "Running it.", **tool_call("slow")}])
    env_b = member(tmp_path / "b", pg_url, [{"text": "Finished on B."}])
    daemon_a, client_a = await start(daemons, env_a, workspaceRoot=str(workspace))
    _, client_b = await start(daemons, env_b)
    try:
        started = await client_a.request("turn/start", {"message": "run it"})
        cid = started["conversationId"]
        await wait_for((workspace / "runs").exists, "the tool to run")
        # B sees the conversation, and leaves A's running turn alone.
        listed = await client_b.request("conversation/list")
        assert cid in [c["conversationId"] for c in listed["conversations"]]

        daemon_a.process.send_signal(signal.SIGKILL)
        await daemon_a.wait_exit()
        await client_a.close()

        def finished() -> bool:
            events = [e for _, e in stored(pg_url, cid)]
            return bool(events) and events[-1] == {
                **events[-1],
                "type": "turn_end",
                "stop_reason": "end_turn",
            }

        await wait_for(finished, "B to finish the turn")
        rows = stored(pg_url, cid)
        assert [seq for seq, _ in rows] == list(range(1, len(rows) + 1))
        lines = [json.dumps(e, sort_keys=True) for _, e in rows]
        assert len(lines) == len(set(lines)), "an event was written twice"
        types = [e["type"] for _, e in rows]
        assert types == [
            "turn_start",
            "chat_request",
            "chat_response",
            "tool_call_request",
            "tool_call_response",
            "turn_end",
            "turn_resume",
            "chat_response",
            "turn_end",
        ]
        cut = rows[4][1]
        assert cut["is_error"] and cut["interrupted"]
        assert rows[5][1]["stop_reason"] == "interrupted"
        assert rows[7][1]["message"] == "Finished on B."
        runs = (workspace / "runs").read_text().split()
        assert len(runs) == 1, "the cut tool ran again"
        got = await client_b.request("conversation/get", {"conversationId": cid})
        assert [e["type"] for e in got["events"]] == types
    finally:
        kill_runs(workspace)
        await client_b.close()


def kill_runs(workspace: Path) -> None:
    runs = workspace / "runs"
    for pid in runs.read_text().split() if runs.exists() else []:
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(pid), signal.SIGKILL)


async def test_a_paused_member_writes_nothing_after_losing_its_lease_and_kills_its_tool(
    tmp_path: Path, pg_url: str, daemons: Daemons
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    env_a = member(tmp_path / "a", pg_url, [{"text": "Running it.", **tool_call("slow")}])
    env_b = member(tmp_path / "b", pg_url, [{"text": "Finished on B."}])
    daemon_a, client_a = await start(daemons, env_a, workspaceRoot=str(workspace))
    _, client_b = await start(daemons, env_b)
    try:
        started = await client_a.request("turn/start", {"message": "run it"})
        cid = started["conversationId"]
        await wait_for((workspace / "runs").exists, "the tool to run")
        (tool_pid,) = map(int, (workspace / "runs").read_text().split())

        daemon_a.process.send_signal(signal.SIGSTOP)  # a zombie: alive, but not renewing

        def finished() -> bool:
            last = stored(pg_url, cid)[-1][1]  # one read: B appends meanwhile
            return last.get("type") == "turn_end" and last.get("stop_reason") == "end_turn"

        await wait_for(finished, "B to take the turn over and finish it")
        before = stored(pg_url, cid)
        daemon_a.process.send_signal(signal.SIGCONT)
        # A learns it lost the lease at its next renewal: it cancels the turn, which
        # kills the tool, and its end of the turn is refused by the store.
        await wait_for(lambda: not pid_alive(tool_pid), "A to kill its tool")
        await client_a.wait_completed(started["turnId"])
        assert stored(pg_url, cid) == before
        assert len((workspace / "runs").read_text().split()) == 1
        assert daemon_a.process.poll() is None, "A keeps running"
    finally:
        daemon_a.process.send_signal(signal.SIGCONT)
        kill_runs(workspace)
        await client_a.close()
        await client_b.close()


async def test_members_racing_turn_start_never_run_two_turns(
    tmp_path: Path, pg_url: str, daemons: Daemons
) -> None:
    slow = {"text": "x" * 40, "chunk": 4, "delay_ms": 20}  # about 0.2 s per turn
    env_a = member(tmp_path / "a", pg_url, [slow] * 12)
    env_b = member(tmp_path / "b", pg_url, [slow] * 12)
    _, client_a = await start(daemons, env_a)
    _, client_b = await start(daemons, env_b)
    try:
        first = await client_a.request("turn/start", {"message": "first"})
        cid = first["conversationId"]
        await client_a.wait_completed(first["turnId"])
        busy = 0
        for round_ in range(5):
            params = {"message": f"race {round_}", "conversationId": cid}
            results = await asyncio.gather(
                client_a.request("turn/start", params),
                client_b.request("turn/start", params),
                return_exceptions=True,
            )
            for result in results:
                if isinstance(result, RpcError):
                    assert result.code == -32005, result
                    busy += 1
                else:
                    assert not isinstance(result, BaseException), result
            ran = [r for r in results if isinstance(r, dict)]
            assert ran, "neither start ran"
            for client, result in zip((client_a, client_b), results, strict=True):
                if isinstance(result, dict):
                    await client.wait_completed(result["turnId"])
        assert busy >= 1  # the race was real at least once
        events = [e for _, e in stored(pg_url, cid)]
        open_turn = None
        for event in events:  # turns never overlap: each start follows the last end
            if event["type"] == "turn_start":
                assert open_turn is None, "two turns ran at once"
                open_turn = event["turn_id"]
            elif event["type"] == "turn_end":
                assert event["turn_id"] == open_turn
                open_turn = None
        assert open_turn is None
    finally:
        await client_a.close()
        await client_b.close()


async def test_a_turn_whose_workspace_is_not_on_the_survivor_is_closed_not_resumed(
    tmp_path: Path, pg_url: str, daemons: Daemons
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    env_a = member(tmp_path / "a", pg_url, [{"text": "Running it.", **tool_call("slow")}])
    env_b = member(tmp_path / "b", pg_url, [{"text": "never"}])
    daemon_a, client_a = await start(daemons, env_a, workspaceRoot=str(workspace))
    _, client_b = await start(daemons, env_b)
    try:
        started = await client_a.request("turn/start", {"message": "run it"})
        await wait_for((workspace / "runs").exists, "the tool to run")
        kill_runs(workspace)
        daemon_a.process.send_signal(signal.SIGKILL)
        await daemon_a.wait_exit()
        workspace.rename(tmp_path / "ws-elsewhere")  # the survivor lacks the workspace

        async def resumable() -> bool:
            turns = (await client_b.request("turn/list"))["turns"]
            return any(t["turnId"] == started["turnId"] and t.get("resumable") for t in turns)

        deadline = asyncio.get_running_loop().time() + 60
        while not await resumable():
            assert asyncio.get_running_loop().time() < deadline, "never listed resumable"
            await asyncio.sleep(0.1)
        types = [e["type"] for _, e in stored(pg_url, started["conversationId"])]
        assert types[-1] == "turn_end" and "turn_resume" not in types
        assert stored(pg_url, started["conversationId"])[-1][1]["stop_reason"] == "interrupted"
    finally:
        await client_a.close()
        await client_b.close()


async def test_a_turn_pinned_to_a_workspace_goes_to_a_member_of_its_host(
    tmp_path: Path, pg_url: str, daemons: Daemons
) -> None:
    """A (host m1) runs a turn in a workspace and is killed: C, on the same host, takes
    it over and finishes it; B (host m2) leaves it alone while C is there to."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    env_a = member(tmp_path / "a", pg_url, [{"text": "Running it.", **tool_call("slow")}], "m1")
    env_b = member(tmp_path / "b", pg_url, [{"text": "Finished on B."}], "m2")
    env_c = member(tmp_path / "c", pg_url, [{"text": "Finished on C."}], "m1")
    daemon_a, client_a = await start(daemons, env_a, workspaceRoot=str(workspace))
    _, client_b = await start(daemons, env_b)
    _, client_c = await start(daemons, env_c)
    try:
        started = await client_a.request("turn/start", {"message": "run it"})
        cid = started["conversationId"]
        await wait_for((workspace / "runs").exists, "the tool to run")
        kill_runs(workspace)
        daemon_a.process.send_signal(signal.SIGKILL)
        await daemon_a.wait_exit()
        await client_a.close()

        def finished() -> bool:
            events = [e for _, e in stored(pg_url, cid)]
            return bool(events) and events[-1].get("stop_reason") == "end_turn"

        await wait_for(finished, "the turn to be finished")
        answers = [e.get("message") for _, e in stored(pg_url, cid) if e["type"] == "chat_response"]
        assert answers[-1] == "Finished on C."
    finally:
        await client_b.close()
        await client_c.close()
