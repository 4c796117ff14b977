"""Control requests on the daemon's socket, answered by the connection's reader thread
(protocol.md section 3): what they report is what the loop did before their answer was
sent, on any connection; a newcomer's `initialize` (answered by its thread) takes effect
before anything it sends next."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.sockets import Daemons, RpcError, SocketClient, socket_env

SLOW = {"text": "word " * 200, "chunk": 5, "delay_ms": 20}


async def test_a_newcomer_lists_and_cancels_a_turn_another_client_started(
    tmp_path: Path, daemons: Daemons
) -> None:
    daemon = await daemons.start(socket_env(tmp_path, [SLOW]))
    starter = await SocketClient.connect(daemon.socket)
    await starter.initialize()
    started = await starter.request("turn/start", {"message": "long please"})

    newcomer = await SocketClient.connect(daemon.socket)
    result = await newcomer.initialize(clientInfo={"name": "newcomer", "version": "1"})
    assert "turn/list" in result["capabilities"]["methods"]
    listed = await newcomer.request("turn/list")
    status = await newcomer.request("daemon/status")
    assert [t["turnId"] for t in listed["turns"]] == [started["turnId"]]
    assert [t["turnId"] for t in status["runningTurns"]] == [started["turnId"]]
    assert status["clients"] == 2 and status["socketPath"] == str(daemon.socket)
    # A request the loop handles comes after the thread's `initialize` took effect.
    conversations = await newcomer.request("conversation/list", {})
    assert started["conversationId"] in [
        c["conversationId"] for c in conversations["conversations"]
    ]

    assert (await newcomer.request("turn/cancel", {"turnId": started["turnId"]}))["cancelled"]
    done = await starter.wait_completed(started["turnId"])
    assert done["event"]["stopReason"] == "cancelled"
    assert (await newcomer.request("turn/list"))["turns"] == []


async def test_socket_lifecycle_rules_hold_on_the_lane(tmp_path: Path, daemons: Daemons) -> None:
    daemon = await daemons.start(socket_env(tmp_path, []))
    client = await SocketClient.connect(daemon.socket)
    with pytest.raises(RpcError) as early:
        await client.request("turn/list")
    assert early.value.error["code"] == -32002
    await client.initialize()
    await client.request("shutdown")
    for method in ("turn/list", "daemon/status", "initialize"):
        with pytest.raises(RpcError) as info:
            await client.request(method)
        assert info.value.error["code"] == -32600
    client.notify("exit")
    await client.closed.wait()
    other = await SocketClient.connect(daemon.socket)  # the daemon serves on
    await other.initialize()
    assert (await other.request("daemon/status"))["clients"] == 1
