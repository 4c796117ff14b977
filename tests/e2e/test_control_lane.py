"""Control requests on a stdio daemon, answered by its reader thread (protocol.md
section 3): what they report is what the loop did before their answer was sent."""

from __future__ import annotations

import pytest
from pygls.exceptions import JsonRpcException

from tests.e2e.conftest import StartJpd

SLOW = {"text": "word " * 200, "chunk": 5, "delay_ms": 20}


async def test_a_turn_whose_start_was_answered_is_listed_and_in_the_status(
    jpd_factory: StartJpd,
) -> None:
    daemon = await jpd_factory(responses=[SLOW])
    await daemon.initialize()
    started = await daemon.request("turn/start", {"message": "long please"})
    # No event awaited: the answer to turn/start is enough.
    listed = await daemon.request("turn/list")
    status = await daemon.request("daemon/status")
    assert [t["turnId"] for t in listed["turns"]] == [started["turnId"]]
    assert [t["turnId"] for t in status["runningTurns"]] == [started["turnId"]]
    assert status["pid"] == daemon.process.pid
    assert status["clients"] == 1 and status.get("socketPath") is None
    assert (await daemon.request("turn/cancel", {"turnId": started["turnId"]}))["cancelled"]
    done = await daemon.wait_event(started["turnId"], "turn_completed", timeout=30)
    assert done["event"]["stopReason"] == "cancelled"
    assert (await daemon.request("turn/list"))["turns"] == []


async def test_control_requests_after_shutdown_get_32600(jpd_factory: StartJpd) -> None:
    daemon = await jpd_factory()
    await daemon.initialize()
    await daemon.request("shutdown")
    for method in ("turn/list", "daemon/status"):
        with pytest.raises(JsonRpcException) as info:
            await daemon.request(method)
        assert info.value.code == -32600
    daemon.notify("exit")
    assert await daemon.process.wait() == 0
