"""Questions across several clients on one socket: late attach, races, disconnects."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.sockets import Daemons, RpcError, SocketClient, persisted, socket_env, wait_for
from tests.e2e.tools import SHIP_IT, add_tool, tool_call

PROMPTS = {"capabilities": {"prompt": {"answerTypes": ["boolean"]}}}


def env_with_asker(home: Path) -> dict[str, str]:
    """A daemon whose model calls `asker` (asking "Ship it?") once, then says "done"."""
    env = socket_env(home, [tool_call("asker"), {"text": "done"}])
    add_tool(env, "asker", SHIP_IT)
    return env


def tool_result(client: SocketClient, turn_id: str) -> dict[str, Any]:
    return next(
        e["event"] for e in client.turn_events(turn_id) if e["event"]["kind"] == "tool_result"
    )


async def test_question_asked_while_nobody_is_attached_reaches_a_later_client(
    tmp_path: Path, daemons: Daemons
) -> None:
    """protocol.md 10.3: a question deferred while nobody is attached is offered to a client
    that attaches later; every client hears `inquiry/resolved`."""
    env = env_with_asker(tmp_path)
    daemon = await daemons.start(env)
    starter = await SocketClient.connect(daemon.socket)
    await starter.initialize()
    started = await starter.request("turn/start", {"message": "go"})
    await starter.close()  # nobody left: the question is deferred (the default policy)

    watcher = await SocketClient.connect(daemon.socket)
    await watcher.initialize()
    pending = (await watcher.request("inquiry/list"))["inquiries"]
    for _ in range(200):
        if pending:
            break
        await asyncio.sleep(0.05)
        pending = (await watcher.request("inquiry/list"))["inquiries"]
    assert pending and pending[0]["deferred"] is True

    answerer = await SocketClient.connect(daemon.socket)
    asked: list[dict[str, Any]] = []

    async def answer(params: dict[str, Any]) -> Any:
        asked.append(params)
        return {"answer": True}

    answerer.handlers["inquiry/prompt"] = answer
    await answerer.initialize(**PROMPTS)
    await answerer.request(
        "turn/attach", {"conversationId": started["conversationId"], "fromSeq": 0}
    )
    done = await answerer.wait_event(started["turnId"], "turn_completed")
    assert done["event"]["stopReason"] == "end_turn"
    assert tool_result(answerer, started["turnId"])["content"].strip() == "got=true"
    assert [a["inquiryId"] for a in asked] == ["call_1.q.1"]
    # Every connected client heard that the question was resolved.
    await wait_for(
        lambda: any(n["method"] == "inquiry/resolved" for n in watcher.notifications),
        "inquiry/resolved at the watcher",
    )
    for client in (watcher, answerer):
        await client.close()


async def test_two_clients_first_answer_wins_and_the_other_is_told(
    tmp_path: Path, daemons: Daemons
) -> None:
    """protocol.md 10.3: the first valid answer wins; the other client is told."""
    env = env_with_asker(tmp_path)
    daemon = await daemons.start(env)
    first = await SocketClient.connect(daemon.socket)
    second = await SocketClient.connect(daemon.socket)
    release = asyncio.Event()

    async def quick(params: dict[str, Any]) -> Any:
        return {"answer": False}

    async def late(params: dict[str, Any]) -> Any:
        await release.wait()
        return {"answer": True}

    first.handlers["inquiry/prompt"] = quick
    second.handlers["inquiry/prompt"] = late
    await first.initialize(**PROMPTS)
    await second.initialize(**PROMPTS)
    started = await first.request("turn/start", {"message": "go"})
    await second.request("turn/attach", {"conversationId": started["conversationId"]})
    done = await first.wait_event(started["turnId"], "turn_completed")
    assert done["event"]["stopReason"] == "end_turn"
    assert tool_result(first, started["turnId"])["content"].strip() == "got=false"
    resolved = [n for n in second.notifications if n["method"] == "inquiry/resolved"]
    assert resolved and resolved[0]["params"]["inquiryId"] == "call_1.q.1"
    assert resolved[0]["params"]["outcome"] == "answered"
    # The late answer arrives after the fact: ignored, and the daemon keeps serving.
    release.set()
    with pytest.raises(RpcError) as info:
        await second.request("inquiry/answer", {"inquiryId": "call_1.q.1", "answer": True})
    assert info.value.code == -32001
    assert (await second.request("turn/list"))["turns"] == []
    answers = [
        e for e in persisted(env, started["conversationId"]) if e["type"] == "inquiry_response"
    ]
    assert [(a["outcome"], a["answer"]) for a in answers] == [("answered", False)]
    for client in (first, second):
        await client.close()


async def test_client_disconnecting_while_asked_falls_to_the_detached_policy(
    tmp_path: Path, daemons: Daemons
) -> None:
    """protocol.md 10.3: when the last asked client disconnects, the detached policy decides."""
    env = env_with_asker(tmp_path)
    daemon = await daemons.start(env)
    asker_client = await SocketClient.connect(daemon.socket)
    prompted = asyncio.Event()

    async def vanish(params: dict[str, Any]) -> Any:
        prompted.set()
        await asyncio.sleep(3600)

    asker_client.handlers["inquiry/prompt"] = vanish
    await asker_client.initialize(**PROMPTS)
    observer = await SocketClient.connect(daemon.socket)
    await observer.initialize()
    started = await asker_client.request("turn/start", {"message": "go", "detached": "deny"})
    await observer.request("turn/attach", {"conversationId": started["conversationId"]})
    await asyncio.wait_for(prompted.wait(), 60)
    await asker_client.close()
    done = await observer.wait_event(started["turnId"], "turn_completed")
    assert done["event"]["stopReason"] == "end_turn"
    result = tool_result(observer, started["turnId"])
    assert result["isError"] and "`deny`" in result["content"]
    response = next(
        e for e in persisted(env, started["conversationId"]) if e["type"] == "inquiry_response"
    )
    assert response["outcome"] == "cancelled" and response["reason"] == "no_prompt_backend"
    await observer.close()


async def test_inquiry_answers_from_two_clients_at_once_one_wins_and_is_recorded(
    tmp_path: Path, daemons: Daemons
) -> None:
    """protocol.md 3 and 5.17: two clients answer a deferred question at the same moment
    (each connection's reader thread claims it as it reads it): exactly one is accepted,
    the other gets -32001; the winner is recorded, the tool goes on with it, and a
    `turn/list` answered after the acceptance no longer lists the question."""
    env = env_with_asker(tmp_path)
    daemon = await daemons.start(env)
    first = await SocketClient.connect(daemon.socket)
    second = await SocketClient.connect(daemon.socket)
    await first.initialize()
    await second.initialize()
    started = await first.request("turn/start", {"message": "go"})
    listed = (await second.request("turn/list"))["inquiries"]
    for _ in range(200):
        if listed:
            break
        await asyncio.sleep(0.05)
        listed = (await second.request("turn/list"))["inquiries"]
    assert [i["inquiryId"] for i in listed] == ["call_1.q.1"] and listed[0]["deferred"]

    async def answer(client: SocketClient, value: bool) -> dict[str, Any] | RpcError:
        try:
            result: dict[str, Any] = await client.request(
                "inquiry/answer", {"inquiryId": "call_1.q.1", "answer": value}
            )
        except RpcError as error:
            return error
        # Seen by the control request answered after it, on either connection.
        assert (await first.request("turn/list"))["inquiries"] == []
        assert (await second.request("turn/list"))["inquiries"] == []
        return result

    outcomes = await asyncio.gather(answer(first, False), answer(second, True))
    accepted = [i for i, o in enumerate(outcomes) if o == {"accepted": True}]
    refused = [o for o in outcomes if isinstance(o, RpcError)]
    assert len(accepted) == 1 and [e.code for e in refused] == [-32001]
    won = [False, True][accepted[0]]

    done = await first.wait_event(started["turnId"], "turn_completed")
    assert done["event"]["stopReason"] == "end_turn"
    assert tool_result(first, started["turnId"])["content"].strip() == f"got={str(won).lower()}"
    answers = [
        e for e in persisted(env, started["conversationId"]) if e["type"] == "inquiry_response"
    ]
    assert [(a["outcome"], a["answer"]) for a in answers] == [("answered", won)]
    for client in (first, second):
        await wait_for(
            lambda c=client: any(
                n["method"] == "inquiry/resolved" and n["params"]["outcome"] == "answered"
                for n in c.notifications
            ),
            "inquiry/resolved at both clients",
        )
        await client.close()
