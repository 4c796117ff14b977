"""Lifecycle and error codes of the real daemon over stdio."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from pygls.exceptions import JsonRpcException

from tests.e2e.conftest import StartJpd
from tests.e2e.harness import INIT_PARAMS, Jpd
from tests.e2e.rawclient import RawJpd


async def test_initialize_returns_protocol_version_and_server_info(jpd_factory: StartJpd) -> None:
    daemon = await jpd_factory()
    result = await daemon.request(
        "initialize",
        {**INIT_PARAMS, "capabilities": {"prompt": {"answerTypes": ["boolean", "secret"]}}},
    )
    assert result["protocolVersion"] == 1
    assert result["serverInfo"]["name"] == "jpd"
    assert "turn/start" in result["capabilities"]["methods"]


async def test_request_before_initialize_is_refused(jpd_factory: StartJpd) -> None:
    daemon = await jpd_factory()
    with pytest.raises(JsonRpcException) as info:
        await daemon.request("conversation/list")
    assert info.value.code == -32002
    # ... and the daemon still serves once initialized.
    await daemon.initialize()
    assert (await daemon.request("conversation/list"))["conversations"] == []


async def test_unknown_method(jpd: Jpd) -> None:
    with pytest.raises(JsonRpcException) as info:
        await jpd.request("no/such/method", {})
    assert info.value.code == -32601


@pytest.mark.parametrize(
    ("method", "params", "where"),
    [
        ("turn/start", {"mesage": "typo"}, "message"),
        ("turn/start", {"message": 42}, "message"),
        ("turn/cancel", {}, "turnId"),
        ("conversation/get", ["positional"], "params"),
        ("initialize", {"protocolVersion": 2, "clientInfo": {"name": "x"}}, "protocolVersion"),
    ],
)
async def test_invalid_params_list_validation_errors_without_traceback(
    jpd: Jpd, method: str, params: object, where: str
) -> None:
    with pytest.raises(JsonRpcException) as info:
        await jpd.request(method, params)
    err = info.value
    assert err.code == -32602
    assert isinstance(err.data, list) and err.data
    assert where in err.message or where == "params"
    assert "Traceback" not in str(err.data) and "Traceback" not in err.message
    assert (await jpd.request("turn/list"))["turns"] == []


async def test_requests_after_shutdown_get_invalid_request_and_exit_code_is_zero(
    jpd: Jpd,
) -> None:
    assert await jpd.request("shutdown") is None
    with pytest.raises(JsonRpcException) as info:
        await jpd.request("conversation/list")
    assert info.value.code == -32600
    jpd.notify("exit")
    assert await asyncio.wait_for(jpd.process.wait(), 20) == 0


async def test_exit_without_shutdown_exits_one(jpd: Jpd) -> None:
    jpd.notify("exit")
    assert await asyncio.wait_for(jpd.process.wait(), 20) == 1


async def test_cancel_request_answers_request_cancelled_and_turn_keeps_running(
    jpd_factory: StartJpd,
) -> None:
    daemon = await jpd_factory(responses=[{"text": "slow " * 20, "chunk": 5, "delay_ms": 50}])
    await daemon.initialize()
    started = await daemon.request("turn/start", {"message": "hi"})
    waiting = asyncio.ensure_future(
        daemon.client.protocol.send_request_async(
            "turn/wait", {"turnId": started["turnId"]}, msg_id="wait-1"
        )
    )
    await daemon.wait_event(started["turnId"], "text_delta")
    daemon.notify("$/cancelRequest", {"id": "wait-1"})
    with pytest.raises(JsonRpcException) as info:
        await asyncio.wait_for(waiting, 20)
    assert info.value.code == -32800
    # Cancelling the wait does not cancel the turn.
    done = await daemon.wait_event(started["turnId"], "turn_completed")
    assert done["event"]["stopReason"] == "end_turn"


def test_garbage_frames_and_invalid_json_get_parse_errors_and_serving_continues(
    home: Path,
) -> None:
    raw = RawJpd({"JP_DATA_DIR": str(home / "data"), "JPD_LOG_LEVEL": "WARNING"})
    raw.write(b"this is not a header\r\n\r\n")
    reply = raw.read()
    assert reply["id"] is None and reply["error"]["code"] == -32700

    raw.write(b"Content-Length: 9\r\n\r\n{not json")
    reply = raw.read()
    assert reply["id"] is None and reply["error"]["code"] == -32700

    raw.send({"jsonrpc": "2.0", "id": 7, "method": 12})
    reply = raw.read()
    assert reply["id"] == 7 and reply["error"]["code"] == -32600

    raw.write(b"[1, 2]".join([b"Content-Length: 6\r\n\r\n", b""]))
    assert raw.read()["error"]["code"] == -32600

    raw.send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INIT_PARAMS})
    reply = raw.read()
    assert reply["id"] == 1 and reply["result"]["protocolVersion"] == 1
    raw.send({"jsonrpc": "2.0", "id": 2, "method": "conversation/list"})
    assert raw.read() == {"jsonrpc": "2.0", "id": 2, "result": {"conversations": []}}

    code, stderr = raw.close()
    assert code == 1  # input ended without shutdown/exit
    assert "malformed frame" in stderr and "invalid JSON" in stderr
    assert "Traceback" not in stderr
