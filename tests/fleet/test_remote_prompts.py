"""A turn queued on a full member runs on another; its question is asked of the client
that started it, attached on the first member, exactly as if the turn ran there
(`inquiry/prompt` with the same params, an invalid answer asked again with
`previousError`, `inquiry/resolved` once answered), and the detached policy applies
only when no member has a client attached that can answer."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import psycopg

from tests.e2e.sockets import Daemons, RpcError, SocketClient, wait_for
from tests.e2e.tools import add_tool, tool_call
from tests.fleet.test_fleet_questions import ASKER
from tests.fleet.test_takeover import kill_runs, member, start, stored
from tests.fleet.test_turn_queue import ONE

PROMPTING = {"prompt": {"answerTypes": ["boolean"]}}


async def full_member(
    tmp_path: Path, daemons: Daemons, url: str
) -> tuple[Path, SocketClient, SocketClient]:
    """Member A, running one turn at a time, busy with a slow tool; returns (its
    workspace, that turn's client, a client of A able to answer boolean questions)."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    env_a = member(tmp_path / "a", url, [{"text": "Busy.", **tool_call("slow")}], "a", ONE)
    daemon_a, busy = await start(daemons, env_a, workspaceRoot=str(workspace))
    client = await SocketClient.connect(daemon_a.socket)
    await client.initialize(capabilities=PROMPTING)
    await busy.request("turn/start", {"message": "be busy"})
    await wait_for((workspace / "runs").exists, "A's tool to run")
    return workspace, busy, client


def watchers(url: str, cid: str) -> int:
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT count(*) FROM jpd_watchers WHERE conversation_id = %s", (cid,)
        ).fetchone()
    return int(row[0]) if row else 0


def asker_member(tmp_path: Path, url: str) -> dict[str, str]:
    env = member(tmp_path / "b", url, [tool_call("asker"), {"text": "done"}])
    add_tool(env, "asker", ASKER)
    return env


def tool_results(client: SocketClient, turn: str) -> list[dict[str, Any]]:
    return [
        e["event"] for e in client.turn_events(turn) if e["event"]["kind"] == "tool_result"
    ]  # fmt: skip


async def test_the_client_that_queued_a_turn_is_asked_its_question_as_if_it_ran_there(
    tmp_path: Path, pg_url: str, daemons: Daemons
) -> None:
    workspace, busy, client = await full_member(tmp_path, daemons, pg_url)
    prompts: list[dict[str, Any]] = []

    async def answer(params: dict[str, Any]) -> dict[str, Any]:
        prompts.append(params)
        return {"answer": "maybe" if len(prompts) == 1 else True}

    client.handlers["inquiry/prompt"] = answer
    _, client_b = await start(daemons, asker_member(tmp_path, pg_url))
    try:
        # `deny`: were the client on A not counted, B would refuse the question at once.
        started = await client.request("turn/start", {"message": "ship", "detached": "deny"})
        turn, cid = started["turnId"], started["conversationId"]
        completed = await client.wait_completed(turn)
        assert completed["event"]["stopReason"] == "end_turn"
        assert "shipped" in str(tool_results(client, turn)[-1])
        first, again = prompts
        assert first["conversationId"] == cid and first["turnId"] == turn
        assert first["toolName"] == "asker"
        assert first["source"] == {"type": "tool", "name": "asker"}
        assert first["question"]["id"] == "q"
        assert first["question"]["answerType"] == {"type": "boolean"}
        assert "previousError" not in first
        assert "true or false" in again["previousError"]
        assert {k: v for k, v in again.items() if k != "previousError"} == first
        resolved = await client.wait_notification("inquiry/resolved")
        assert resolved["params"]["inquiryId"] == first["inquiryId"]
        assert resolved["params"]["outcome"] == "answered"
        events = [e for _, e in stored(pg_url, cid)]
        (response,) = [e for e in events if e["type"] == "inquiry_response"]
        assert response["outcome"] == "answered" and response["answer"] is True
    finally:
        kill_runs(workspace)
        for each in (busy, client, client_b):
            await each.close()


async def test_a_permission_request_is_relayed_to_the_client_that_queued_the_turn(
    tmp_path: Path, pg_url: str, daemons: Daemons
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    env_a = member(tmp_path / "a", pg_url, [{"text": "Busy.", **tool_call("slow")}], "a", ONE)
    daemon_a, busy = await start(daemons, env_a, workspaceRoot=str(workspace))
    client = await SocketClient.connect(daemon_a.socket)
    await client.initialize(capabilities={"permission": True})
    await busy.request("turn/start", {"message": "be busy"})
    await wait_for((workspace / "runs").exists, "A's tool to run")
    asked: list[dict[str, Any]] = []

    async def allow(params: dict[str, Any]) -> dict[str, Any]:
        asked.append(params)
        return {"allow": True}

    client.handlers["tool/permission"] = allow
    env_b = member(tmp_path / "b", pg_url, [tool_call("deploy"), {"text": "done"}])
    add_tool(env_b, "deploy", 'print("deployed")', run='"ask"')
    _, client_b = await start(daemons, env_b)
    try:
        started = await client.request("turn/start", {"message": "deploy", "detached": "deny"})
        turn = started["turnId"]
        assert (await client.wait_completed(turn))["event"]["stopReason"] == "end_turn"
        assert "deployed" in str(tool_results(client, turn)[-1])
        (permission,) = asked
        assert permission["toolName"] == "deploy" and permission["kind"] == "run"
        assert permission["turnId"] == turn
    finally:
        kill_runs(workspace)
        for each in (busy, client, client_b):
            await each.close()


async def test_a_dismissed_prompt_on_the_other_member_cancels_the_question(
    tmp_path: Path, pg_url: str, daemons: Daemons
) -> None:
    workspace, busy, client = await full_member(tmp_path, daemons, pg_url)

    async def dismiss(params: dict[str, Any]) -> dict[str, Any]:
        raise RpcError({"code": -32800, "message": "cancelled by the user"})

    client.handlers["inquiry/prompt"] = dismiss
    _, client_b = await start(daemons, asker_member(tmp_path, pg_url))
    try:
        started = await client.request("turn/start", {"message": "ship"})
        turn, cid = started["turnId"], started["conversationId"]
        assert (await client.wait_completed(turn))["event"]["stopReason"] == "end_turn"
        assert "cancelled" in str(tool_results(client, turn)[-1])
        resolved = await client.wait_notification("inquiry/resolved")
        assert resolved["params"]["outcome"] == "cancelled"
        events = [e for _, e in stored(pg_url, cid)]
        (response,) = [e for e in events if e["type"] == "inquiry_response"]
        assert response["outcome"] == "cancelled" and response["reason"] == "user"
    finally:
        kill_runs(workspace)
        for each in (busy, client, client_b):
            await each.close()


async def test_with_nobody_attached_anywhere_the_detached_policy_decides_at_once(
    tmp_path: Path, pg_url: str, daemons: Daemons
) -> None:
    workspace, busy, client = await full_member(tmp_path, daemons, pg_url)
    prompts: list[dict[str, Any]] = []

    async def answer(params: dict[str, Any]) -> dict[str, Any]:
        prompts.append(params)
        return {"answer": True}

    client.handlers["inquiry/prompt"] = answer
    try:
        started = await client.request("turn/start", {"message": "ship", "detached": "deny"})
        cid = started["conversationId"]
        assert watchers(pg_url, cid) == 1  # recorded before the turn was queued
        await client.request("turn/detach", {"conversationId": cid})
        await wait_for(lambda: watchers(pg_url, cid) == 0, "A to forget its client there")
        _, client_b = await start(daemons, asker_member(tmp_path, pg_url))

        def ended() -> bool:
            events = [e for _, e in stored(pg_url, cid)]
            return bool(events) and events[-1]["type"] == "turn_end"

        await wait_for(ended, "B to run the turn")
        events = [e for _, e in stored(pg_url, cid)]
        (response,) = [e for e in events if e["type"] == "inquiry_response"]
        assert response["outcome"] == "cancelled"
        assert response["reason"] == "no_prompt_backend"
        assert prompts == []  # refused without an offer: none was made
        await client_b.close()
    finally:
        kill_runs(workspace)
        for each in (busy, client):
            await each.close()


async def test_a_prompt_answered_on_another_member_is_resolved_for_the_client_asked(
    tmp_path: Path, pg_url: str, daemons: Daemons
) -> None:
    """The client on A is asked and does not answer; a client of B (where the turn runs)
    answers with `inquiry/answer`: A's client is sent `inquiry/resolved`, its prompt
    abandoned, and the tool has B's answer."""
    workspace, busy, client = await full_member(tmp_path, daemons, pg_url)
    asked = asyncio.Event()

    async def hold(params: dict[str, Any]) -> dict[str, Any]:
        asked.set()
        await asyncio.Event().wait()  # a person away from the keyboard
        raise AssertionError("unreachable")

    client.handlers["inquiry/prompt"] = hold
    _, client_b = await start(daemons, asker_member(tmp_path, pg_url))
    try:
        started = await client.request("turn/start", {"message": "ship", "detached": "deny"})
        turn, cid = started["turnId"], started["conversationId"]
        await asyncio.wait_for(asked.wait(), 60)
        (question,) = (await client_b.request("inquiry/list"))["inquiries"]
        assert question["conversationId"] == cid
        await client_b.request(
            "inquiry/answer", {"inquiryId": question["inquiryId"], "answer": True}
        )
        resolved = await client.wait_notification("inquiry/resolved")
        assert resolved["params"]["inquiryId"] == question["inquiryId"]
        assert resolved["params"]["outcome"] == "answered"
        assert (await client.wait_completed(turn))["event"]["stopReason"] == "end_turn"
        assert "shipped" in str(tool_results(client, turn)[-1])
    finally:
        kill_runs(workspace)
        for each in (busy, client, client_b):
            await each.close()
