"""Two conversations whose tool calls share an id (`call_1`) ask the same question:
both stay answerable (protocol.md section 5.17)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.e2e.sockets import Daemons, RpcError, SocketClient, socket_env
from tests.e2e.tools import SHIP_IT, add_tool, tool_call


async def test_the_same_inquiry_id_in_two_conversations_is_told_apart(
    tmp_path: Path, daemons: Daemons
) -> None:
    call = tool_call("asker")
    env = socket_env(tmp_path, [call, call, {"text": "one"}, {"text": "two"}])
    add_tool(env, "asker", SHIP_IT)
    daemon = await daemons.start(env)
    client = await SocketClient.connect(daemon.socket)
    await client.initialize()
    first = await client.request("turn/start", {"message": "a", "detached": "defer"})
    second = await client.request("turn/start", {"message": "b", "detached": "defer"})

    async def pending() -> list[dict[str, object]]:
        return list((await client.request("inquiry/list"))["inquiries"])

    inquiries: list[dict[str, object]] = []

    async def both_pending() -> bool:
        inquiries[:] = await pending()
        return len(inquiries) == 2

    deadline = asyncio.get_running_loop().time() + 30
    while not await both_pending():
        assert asyncio.get_running_loop().time() < deadline, inquiries
        await asyncio.sleep(0.05)
    assert {i["inquiryId"] for i in inquiries} == {"call_1.q.1"}
    assert {i["conversationId"] for i in inquiries} == {
        first["conversationId"],
        second["conversationId"],
    }

    with pytest.raises(RpcError) as ambiguous:
        await client.request("inquiry/answer", {"inquiryId": "call_1.q.1", "answer": True})
    assert ambiguous.value.code == -32602
    assert "pass conversationId" in str(ambiguous.value)

    for started, answer in ((second, False), (first, True)):
        await client.request(
            "inquiry/answer",
            {
                "inquiryId": "call_1.q.1",
                "answer": answer,
                "conversationId": started["conversationId"],
            },
        )
    for started, expected in ((first, "got=true"), (second, "got=false")):
        await client.wait_event(started["turnId"], "turn_completed")
        (result,) = [
            e["event"]
            for e in client.turn_events(started["turnId"])
            if e["event"]["kind"] == "tool_result"
        ]
        assert result["content"].strip() == expected
    assert await pending() == []
    await client.close()
