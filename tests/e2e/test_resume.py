"""`turn/resume` after kill -9 of the daemon (protocol.md sections 5.20 and 12.4): a new
daemon lists the cut turn as resumable and continues it under the same ids."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from jpd.conversation.resume import CONTINUE_INSTRUCTION
from tests.e2e.harness import write_script
from tests.e2e.sockets import Daemons, RpcError, SocketClient, run_jp_async, socket_env, wait_for
from tests.e2e.test_crash_recovery import ASKER, TEXT, kill, persisted, start
from tests.e2e.tools import add_tool, tool_call


def recording(env: dict[str, str], tmp_path: Path) -> Path:
    """Make the scripted model record every request it gets; returns the record file."""
    record = tmp_path / "requests.jsonl"
    config = Path(env["JP_CONFIG"])
    config.write_text(
        config.read_text().replace("[providers.test]\n", f'[providers.test]\nrecord = "{record}"\n')
    )
    return record


def requests(record: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in record.read_text().splitlines() if line.strip()]


async def pending_ids(client: SocketClient) -> list[str]:
    return [i["inquiryId"] for i in (await client.request("inquiry/list"))["inquiries"]]


async def wait_pending(client: SocketClient) -> list[str]:
    deadline = asyncio.get_running_loop().time() + 60
    while not (ids := await pending_ids(client)):
        assert asyncio.get_running_loop().time() < deadline, "no question was asked"
        await asyncio.sleep(0.05)
    return ids


async def resumable(client: SocketClient) -> list[dict[str, Any]]:
    return [t for t in (await client.request("turn/list"))["turns"] if t.get("resumable")]


async def test_a_question_pending_at_a_kill_is_asked_again_under_its_id_and_the_tool_runs(
    tmp_path: Path, daemons: Daemons
) -> None:
    env = socket_env(tmp_path, [{"text": "Checking.", **tool_call("asker")}])
    record = recording(env, tmp_path)
    add_tool(env, "asker", ASKER)
    daemon, client = await start(daemons, env)
    started = await client.request("turn/start", {"message": "ship", "detached": "defer"})
    cid, tid = started["conversationId"], started["turnId"]
    assert await wait_pending(client) == ["call_1.q.1"]
    await kill(daemon, client)

    write_script(tmp_path / "script.json", [{"text": "Shipped it."}])
    _, client = await start(daemons, env)
    (listed,) = await resumable(client)
    assert listed == {**listed, "turnId": tid, "conversationId": cid, "resumable": True}
    resumed = await client.request(
        "turn/resume", {"conversationId": cid, "turnId": tid, "detached": "defer"}
    )
    assert resumed == {"conversationId": cid, "turnId": tid}
    assert await wait_pending(client) == ["call_1.q.1"]  # the same inquiry id
    with pytest.raises(RpcError) as busy:
        await client.request("turn/resume", {"conversationId": cid, "turnId": tid})
    assert busy.value.code == -32005
    assert await resumable(client) == []
    await client.request("inquiry/answer", {"inquiryId": "call_1.q.1", "answer": True})
    done = await client.wait_completed(tid)
    assert done["event"]["stopReason"] == "end_turn"
    kinds = [e["event"]["kind"] for e in client.turn_events(tid)]
    assert kinds[0] == "turn_started" and kinds[-1] == "turn_completed"
    (result,) = [e["event"] for e in client.turn_events(tid) if e["event"]["kind"] == "tool_result"]
    assert result["id"] == "call_1" and result["content"].strip() == "shipped"

    # The model got exactly one result for the call: the new one, not the interrupted one.
    last = requests(record)[-1]["messages"]
    results = [m for m in last if m.get("tool_call_id") == "call_1"]
    assert [r["content"].strip() for r in results] == ["shipped"]
    events = persisted(env, cid)
    assert [e["id"] for e in events if e["type"] == "inquiry_request"] == ["call_1.q.1"] * 2
    assert [e["type"] for e in events].count("turn_resume") == 1
    assert events[-1] == {**events[-1], "type": "turn_end", "stop_reason": "end_turn"}
    with pytest.raises(RpcError) as ended:  # it ended normally: nothing to resume
        await client.request("turn/resume", {"conversationId": cid, "turnId": tid})
    assert ended.value.code == -32602
    # A later daemon builds the same history from the log (sanitized: one result per call).
    got = (await client.request("conversation/get", {"conversationId": cid}))["events"]
    responses = [e for e in got if e["type"] == "tool_call_response"]
    assert [r.get("interrupted") for r in responses] == [True, None]
    await client.close()


async def test_a_turn_cut_while_streaming_asks_the_model_to_continue(
    tmp_path: Path, daemons: Daemons
) -> None:
    env = socket_env(tmp_path, [{"text": TEXT, "chunk": 4, "delay_ms": 20}])
    record = recording(env, tmp_path)
    daemon, client = await start(daemons, env)
    started = await client.request("turn/start", {"message": "stream"})
    cid, tid = started["conversationId"], started["turnId"]

    def checkpointed() -> bool:
        return any(e["type"] == "chat_checkpoint" for e in persisted(env, cid))

    await wait_for(checkpointed, "a checkpoint")
    await kill(daemon, client)

    write_script(tmp_path / "script.json", [{"text": " and the rest."}])
    _, client = await start(daemons, env)
    await client.request("turn/resume", {"conversationId": cid, "turnId": tid})
    done = await client.wait_completed(tid)
    assert done["event"]["stopReason"] == "end_turn"
    messages = requests(record)[-1]["messages"]
    assert messages[-1] == {**messages[-1], "role": "user", "content": CONTINUE_INSTRUCTION}
    cut = messages[-2]
    assert cut["role"] == "assistant" and cut["content"] and TEXT.startswith(cut["content"])
    events = persisted(env, cid)
    assert [e["type"] for e in events[-5:]] == [
        "turn_end",
        "turn_resume",
        "chat_request",
        "chat_response",
        "turn_end",
    ]
    await client.close()


COUNTER = """
with open(os.path.join(os.getcwd(), "counted"), "a") as fh:
    fh.write("run\\n")
print("counted")
"""

SLEEP_ONCE = """
marker = os.path.join(os.getcwd(), "slept")
if not os.path.exists(marker):
    open(marker, "w").close()
    time.sleep(600)
print("woke")
"""


async def test_recorded_results_are_not_rerun_and_the_errors(
    tmp_path: Path, daemons: Daemons
) -> None:
    calls = {
        "tool_calls": [
            {"id": "call_a", "name": "counter", "arguments": {}},
            {"id": "call_b", "name": "sleeper", "arguments": {}},
        ]
    }
    env = socket_env(tmp_path, [calls])
    add_tool(env, "counter", COUNTER)
    add_tool(env, "sleeper", SLEEP_ONCE)
    workspace = tmp_path / "ws"
    workspace.mkdir()
    daemon, client = await start(daemons, env)
    await client.initialize(workspaceRoot=str(workspace))
    started = await client.request("turn/start", {"message": "run both"})
    cid, tid = started["conversationId"], started["turnId"]

    def counted_and_sleeping() -> bool:
        responses = [e for e in persisted(env, cid) if e["type"] == "tool_call_response"]
        return (workspace / "slept").exists() and len(responses) == 1

    await wait_for(counted_and_sleeping, "the counter's result and the sleeper running")
    await kill(daemon, client)

    write_script(tmp_path / "script.json", [{"text": "Both done."}])
    _, client = await start(daemons, env)
    await client.initialize(workspaceRoot=str(workspace))
    for params, code in [
        ({"conversationId": "c-20260101T000000-00000000", "turnId": tid}, -32001),
        ({"conversationId": cid, "turnId": "t-000000000000"}, -32001),
        ({"conversationId": "../x", "turnId": tid}, -32602),
    ]:
        with pytest.raises(RpcError) as error:
            await client.request("turn/resume", params)
        assert error.value.code == code, params
    await client.request("turn/resume", {"conversationId": cid, "turnId": tid})
    assert (await client.wait_completed(tid))["event"]["stopReason"] == "end_turn"
    assert (workspace / "counted").read_text() == "run\n"  # ran once, before the kill
    results = [e["event"] for e in client.turn_events(tid) if e["event"]["kind"] == "tool_result"]
    assert [(r["id"], r["content"].strip()) for r in results] == [("call_b", "woke")]
    # A new turn makes the resumed one no longer the last: not resumable any more.
    await client.close()


async def test_jp_turn_resume_resumes_the_latest_resumable_turn(
    tmp_path: Path, daemons: Daemons
) -> None:
    env = socket_env(tmp_path, [{"text": TEXT, "chunk": 4, "delay_ms": 20}])
    daemon, client = await start(daemons, env)
    started = await client.request("turn/start", {"message": "stream"})
    cid = started["conversationId"]
    await wait_for(
        lambda: any(e["type"] == "chat_checkpoint" for e in persisted(env, cid)), "a checkpoint"
    )
    await kill(daemon, client)
    write_script(tmp_path / "script.json", [{"text": "RESUMED-OUTPUT"}])
    await daemons.start(env)
    listed = await run_jp_async(env, "turn", "ls")
    assert "interrupted: jp turn resume" in listed.stdout
    cancel = await run_jp_async(env, "turn", "cancel")  # nothing runs: it is not running
    assert cancel.returncode == 4, cancel.stderr
    done = await run_jp_async(env, "turn", "resume")
    assert done.returncode == 0, done.stderr
    assert "RESUMED-OUTPUT" in done.stdout
    events = persisted(env, cid)
    assert events[-1] == {**events[-1], "type": "turn_end", "stop_reason": "end_turn"}
    again = await run_jp_async(env, "turn", "resume")
    assert again.returncode != 0
    assert "no resumable turn" in again.stderr


async def test_acp_session_resume_continues_an_interrupted_turn(
    tmp_path: Path, daemons: Daemons
) -> None:
    from tests.e2e.acp_client import Editor, jp_acp, make_env

    env = make_env(tmp_path, daemons, [{"text": TEXT, "chunk": 4, "delay_ms": 20}])
    ws = str(tmp_path / "ws")
    daemon, client = await start(daemons, env)
    await client.initialize(workspaceRoot=ws)
    started = await client.request("turn/start", {"message": "stream"})
    cid = started["conversationId"]
    await wait_for(
        lambda: any(e["type"] == "chat_checkpoint" for e in persisted(env, cid)), "a checkpoint"
    )
    await kill(daemon, client)
    write_script(tmp_path / "script.json", [{"text": "EDITOR-SEES-THIS"}])
    editor = Editor()
    async with jp_acp(env, editor, tmp_path / "acp.log") as (conn, _):
        await conn.initialize(protocol_version=1)
        await conn.resume_session(cwd=ws, session_id=cid, mcp_servers=[])
        await editor.wait_for(lambda: "EDITOR-SEES-THIS" in editor.text(), "the continuation")

    def ended() -> bool:
        last = persisted(env, cid)[-1]
        return last["type"] == "turn_end" and last["stop_reason"] == "end_turn"

    await wait_for(ended, "the resumed turn to end")
