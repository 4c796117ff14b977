"""A question asked by a turn on one fleet member is listed and answered on another:
an invalid answer is refused (-32602) by the member it was given to and the question
waits on; the first valid answer reaches the tool; a later answer is refused."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.sockets import Daemons, RpcError, SocketClient
from tests.e2e.tools import add_tool, tool_call
from tests.fleet.test_takeover import member, start

ASKER = """
if "q" not in answers:
    print(json.dumps({"type": "needs_input", "question": {"id": "q", "text": "Ship it?",
        "answer_type": {"type": "boolean"}}}))
else:
    print("shipped" if answers["q"] else "kept")
"""


async def listed(client: SocketClient) -> list[dict[str, Any]]:
    deadline = asyncio.get_running_loop().time() + 60
    while True:
        found = (await client.request("inquiry/list"))["inquiries"]
        if found:
            return list(found)
        assert asyncio.get_running_loop().time() < deadline, "the question never showed"
        await asyncio.sleep(0.05)


async def test_a_question_is_answered_from_another_member(
    tmp_path: Path, pg_url: str, daemons: Daemons
) -> None:
    env_a = member(tmp_path / "a", pg_url, [tool_call("asker"), {"text": "done"}])
    add_tool(env_a, "asker", ASKER)
    env_b = member(tmp_path / "b", pg_url, [])
    _, client_a = await start(daemons, env_a)
    _, client_b = await start(daemons, env_b)
    try:
        started = await client_a.request("turn/start", {"message": "ship", "detached": "defer"})
        (question,) = await listed(client_b)
        assert question["conversationId"] == started["conversationId"]
        assert question["turnId"] == started["turnId"]
        inquiry = question["inquiryId"]

        # Not a boolean: refused on B, as the question's own member would (-32602), and
        # never stored: the question waits on for a valid answer.
        with pytest.raises(RpcError) as refused:
            await client_b.request("inquiry/answer", {"inquiryId": inquiry, "answer": "maybe"})
        assert refused.value.code == -32602
        assert "true or false" in str(refused.value)
        assert [q["inquiryId"] for q in await listed(client_b)] == [inquiry]
        await client_b.request("inquiry/answer", {"inquiryId": inquiry, "answer": True})
        completed = await client_a.wait_completed(started["turnId"])
        assert completed["event"]["stopReason"] == "end_turn"
        results = [
            e["event"] for e in client_a.turn_events(started["turnId"])
            if e["event"]["kind"] == "tool_result"
        ]  # fmt: skip
        assert "shipped" in str(results[-1])
        with pytest.raises(RpcError):
            await client_b.request("inquiry/answer", {"inquiryId": inquiry, "answer": False})
    finally:
        await client_a.close()
        await client_b.close()
