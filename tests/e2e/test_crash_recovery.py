"""kill -9 of the daemon at points of scripted turns: the log loads, no whole event is
lost or doubled, every turn has an end, at most the last checkpoint interval of
streamed text is lost (protocol.md section 12.4)."""

from __future__ import annotations

import asyncio
import json
import random
import signal
from pathlib import Path
from typing import Any

import pytest

from jpd.core.checkpoints import INTERVAL
from tests.e2e.sockets import Daemons, Listening, SocketClient, socket_env, wait_for
from tests.e2e.tools import add_tool, tool_call

CHUNK, DELAY_MS = 4, 20
RATE = CHUNK / (DELAY_MS / 1000)  # characters streamed per second
TEXT = " ".join(f"word{i}" for i in range(400))


def persisted(env: dict[str, str], conversation_id: str) -> list[dict[str, Any]]:
    path = Path(env["JP_DATA_DIR"]) / "conversations" / conversation_id / "events.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


async def start(daemons: Daemons, env: dict[str, str]) -> tuple[Listening, SocketClient]:
    daemon = await daemons.start(env)
    client = await SocketClient.connect(daemon.socket)
    await client.initialize()
    return daemon, client


async def kill(daemon: Listening, client: SocketClient) -> None:
    daemon.process.send_signal(signal.SIGKILL)
    await daemon.wait_exit()
    await client.close()


async def reopened(daemons: Daemons, env: dict[str, str], cid: str) -> list[dict[str, Any]]:
    """Start a new daemon and read the conversation through it (recovery included)."""
    _, client = await start(daemons, env)
    events = (await client.request("conversation/get", {"conversationId": cid}))["events"]
    await client.close()
    return list(events)


def check_whole(events: list[dict[str, Any]]) -> None:
    """Every turn has exactly one end; nothing doubled; every tool call answered once."""
    starts = [e["turn_id"] for e in events if e["type"] == "turn_start"]
    ends = [e["turn_id"] for e in events if e["type"] == "turn_end"]
    assert starts == ends
    requests = [e["id"] for e in events if e["type"] == "tool_call_request"]
    responses = [e["id"] for e in events if e["type"] == "tool_call_response"]
    assert sorted(requests) == sorted(responses)
    inquiries = [e["id"] for e in events if e["type"] == "inquiry_request"]
    answers = [e["id"] for e in events if e["type"] == "inquiry_response"]
    assert sorted(inquiries) == sorted(answers)
    lines = [json.dumps(e, sort_keys=True) for e in events]
    assert len(lines) == len(set(lines)), "an event was written twice"


async def test_a_kill_while_streaming_loses_at_most_one_checkpoint_interval(
    tmp_path: Path, daemons: Daemons
) -> None:
    env = socket_env(tmp_path, [{"text": TEXT, "chunk": CHUNK, "delay_ms": DELAY_MS}])
    daemon, client = await start(daemons, env)
    started = await client.request("turn/start", {"message": "stream"})
    received: list[str] = []

    def streamed() -> int:
        received[:] = [
            e["event"]["text"]
            for e in client.turn_events(started["turnId"])
            if e["event"]["kind"] == "text_delta"
        ]
        return len("".join(received))

    await wait_for(lambda: streamed() > 300, "300 characters")
    await kill(daemon, client)
    shown = "".join(received)
    events = await reopened(daemons, env, started["conversationId"])
    check_whole(events)
    (partial,) = [e for e in events if e["type"] == "chat_response"]
    assert partial["interrupted"] is True
    saved = partial["message"]
    assert TEXT.startswith(saved)
    lost = len(shown) - len(saved)
    assert lost <= RATE * INTERVAL + 10 * CHUNK, (len(shown), len(saved))
    assert events[-1] == {**events[-1], "type": "turn_end", "stop_reason": "interrupted"}


SLEEPER = """
open(os.path.join(os.getcwd(), "running"), "w").close()
time.sleep(600)
"""


async def test_a_kill_while_a_tool_runs_ends_the_call_and_the_turn(
    tmp_path: Path, daemons: Daemons
) -> None:
    env = socket_env(tmp_path, [{"text": "Running it.", **tool_call("slow")}, {"text": "never"}])
    add_tool(env, "slow", SLEEPER)
    daemon, client = await start(daemons, env)
    workspace = tmp_path / "ws"
    workspace.mkdir()
    await client.initialize(workspaceRoot=str(workspace))
    started = await client.request("turn/start", {"message": "run it"})
    await wait_for((workspace / "running").exists, "the tool to run")
    await kill(daemon, client)
    events = await reopened(daemons, env, started["conversationId"])
    check_whole(events)
    (message,) = [e for e in events if e["type"] == "chat_response"]
    assert message["message"] == "Running it."
    assert "interrupted" not in message  # it was written whole before the tool ran
    (response,) = [e for e in events if e["type"] == "tool_call_response"]
    assert response["is_error"] and response["interrupted"]


ASKER = """
if "q" not in answers:
    print(json.dumps({"type": "needs_input", "question": {"id": "q", "text": "Ship it?",
        "answer_type": {"type": "boolean"}}}))
else:
    print("shipped" if answers["q"] else "kept")
"""


async def test_a_question_pending_at_a_kill_is_cancelled_because_the_daemon_stopped(
    tmp_path: Path, daemons: Daemons
) -> None:
    env = socket_env(tmp_path, [tool_call("asker"), {"text": "never"}])
    add_tool(env, "asker", ASKER)
    daemon, client = await start(daemons, env)
    started = await client.request("turn/start", {"message": "ship", "detached": "defer"})

    async def asked() -> bool:
        return bool((await client.request("inquiry/list"))["inquiries"])

    deadline = asyncio.get_running_loop().time() + 60
    while not await asked():
        assert asyncio.get_running_loop().time() < deadline, "the question was never asked"
        await asyncio.sleep(0.05)
    await kill(daemon, client)
    events = await reopened(daemons, env, started["conversationId"])
    check_whole(events)
    (response,) = [e for e in events if e["type"] == "inquiry_response"]
    assert response == {**response, "outcome": "cancelled", "reason": "daemon_stopped"}


@pytest.mark.parametrize("seed", range(4))
async def test_kills_at_random_moments_leave_a_whole_log(
    tmp_path: Path, daemons: Daemons, seed: int
) -> None:
    """Turns with text, a tool that asks (answered from config) and more text, killed
    anywhere: streaming, the tool running, the answer being written."""
    rng = random.Random(seed)
    stream = {"text": TEXT[:200], "chunk": CHUNK, "delay_ms": 5}
    env = socket_env(tmp_path, [{**stream, **tool_call("asker")}, stream] * 4)
    add_tool(env, "asker", ASKER, **{"questions.q.answer": "true"})
    daemon, client = await start(daemons, env)
    first = await client.request("turn/start", {"message": "one"})
    await client.wait_event(first["turnId"], "turn_completed")
    cid = first["conversationId"]
    second = await client.request("turn/start", {"message": "two", "conversationId": cid})
    seen: list[dict[str, Any]] = []

    def progressed() -> bool:
        seen[:] = client.turn_events(second["turnId"])
        return len(seen) >= rng.randint(1, 40) or any(
            e["event"]["kind"] == "turn_completed" for e in seen
        )

    await wait_for(progressed, "some progress")
    await kill(daemon, client)
    events = await reopened(daemons, env, cid)
    check_whole(events)
    # What a client saw was persisted before it was published: none of it is lost.
    for event in seen:
        if event["event"]["kind"] == "tool_result":
            assert event["event"]["id"] in [
                e["id"] for e in events if e["type"] == "tool_call_response"
            ]
    ends = [e["stop_reason"] for e in events if e["type"] == "turn_end"]
    assert ends[0] == "end_turn"
    assert ends[1] in ("end_turn", "interrupted")
