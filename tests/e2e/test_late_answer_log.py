"""A prompt answered elsewhere while a client still shows it: the daemon ignores that
client's late answer quietly (no traceback in its log; protocol.md section 10.3)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from tests.e2e.sockets import Daemons, SocketClient, socket_env
from tests.e2e.tools import SHIP_IT, add_tool, tool_call

PROMPTS = {"capabilities": {"prompt": {"answerTypes": ["boolean"]}}}


async def test_a_late_answer_after_inquiry_answer_leaves_no_traceback(
    tmp_path: Path, daemons: Daemons
) -> None:
    env = socket_env(tmp_path, [tool_call("asker"), {"text": "done"}])
    add_tool(env, "asker", SHIP_IT)
    daemon = await daemons.start(env)
    shower = await SocketClient.connect(daemon.socket)
    await shower.initialize(**PROMPTS)
    asked = asyncio.Event()
    release = asyncio.Event()

    async def slow_answer(params: dict[str, Any]) -> dict[str, Any]:
        asked.set()
        await release.wait()  # the person is still looking at the prompt
        return {"answer": False}

    shower.handlers["inquiry/prompt"] = slow_answer
    started = await shower.request("turn/start", {"message": "ship"})
    await asyncio.wait_for(asked.wait(), 30)
    other = await SocketClient.connect(daemon.socket)
    await other.initialize()
    await other.request("inquiry/answer", {"inquiryId": "call_1.q.1", "answer": True})
    await shower.wait_event(started["turnId"], "turn_completed")
    release.set()  # the late answer goes out now
    await asyncio.sleep(0.5)
    assert (await shower.request("turn/list"))["turns"] == []
    await shower.close()
    await other.close()
    await daemon.stop()
    log = (Path(env["JP_LOG_DIR"]) / "jpd.log").read_text()
    assert "Traceback" not in log and "InvalidStateError" not in log, log[-3000:]
    results = [
        e for e in shower.turn_events(started["turnId"]) if e["event"]["kind"] == "tool_result"
    ]
    assert results[0]["event"]["content"].strip() == "got=true"
