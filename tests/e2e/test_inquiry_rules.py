"""Inquiry rules that need the real daemon (listed in tests/conformance/test_recording.py):
the turn cache across tool cycles and turns, a wrong-shaped answer from a real client or
`inquiry/answer`, and a question pending when the daemon stops cleanly."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path
from typing import Any

import pytest
from pygls.exceptions import JsonRpcException

from tests.e2e.conftest import StartJpd
from tests.e2e.sockets import Daemons, SocketClient, persisted, wait_for
from tests.e2e.test_inquiries import _wait_pending, asker, start
from tests.e2e.test_socket_inquiries import env_with_asker
from tests.e2e.test_tools import call, results
from tests.e2e.test_turns import disk_events

BOOLEAN = {"prompt": {"answerTypes": ["boolean"]}}


def responses(home: Path, conversation_id: str) -> list[dict[str, Any]]:
    """The recorded inquiry responses, without timestamps."""
    return [
        {k: v for k, v in e.items() if k != "timestamp"}
        for e in disk_events(home, conversation_id)
        if e["type"] == "inquiry_response"
    ]


async def test_a_remembered_answer_lasts_for_the_turn_and_no_longer(
    jpd_factory: StartJpd, home: Path
) -> None:
    """protocol.md 10.1: an answer remembered in one tool cycle answers the same question in
    a later cycle of the same turn (recorded `answered`), and is forgotten at the next turn."""
    script = [call("asker", "c1"), call("asker", "c2"), {"text": "done"}]
    script += [call("asker", "c3"), {"text": "done again"}]
    daemon = await start(jpd_factory, home, responses=script, capabilities=BOOLEAN)

    async def answer(params: dict[str, Any]) -> Any:
        return {"answer": True, "remember": True}

    daemon.on_prompt = answer
    first, _ = await daemon.run_turn("go")
    assert [p["inquiryId"] for p in daemon.prompts] == ["c1.q.1"]
    conversation = first["conversationId"]
    second, _ = await daemon.run_turn("again", conversationId=conversation)

    assert [p["inquiryId"] for p in daemon.prompts] == ["c1.q.1", "c3.q.1"]
    for turn in (first, second):
        contents = [r["content"].strip() for r in results(daemon, turn["turnId"])]
        assert contents and all(c == "got=true" for c in contents)
    assert responses(home, conversation) == [
        {"type": "inquiry_response", "id": f"{c}.q.1", "outcome": "answered", "answer": True}
        for c in ("c1", "c2", "c3")
    ]


async def test_a_wrong_shaped_answer_from_a_client_is_sent_back(
    jpd_factory: StartJpd, home: Path
) -> None:
    """protocol.md 10.3: a result that is not `{answer, remember?}` gets the question again
    with `previousError`; it stays open until a valid answer, and the daemon keeps serving."""
    daemon = await start(jpd_factory, home, body=asker(), capabilities=BOOLEAN)
    replies = iter([True, {"answer": True, "remember": "yes"}, {"answer": False}])

    async def answer(params: dict[str, Any]) -> Any:
        return next(replies)

    daemon.on_prompt = answer
    started, _ = await daemon.run_turn("go")

    first, second, third = daemon.prompts
    assert "previousError" not in first
    assert second["previousError"].startswith("invalid result for inquiry/prompt")
    assert "remember" in third["previousError"]
    assert {p["inquiryId"] for p in daemon.prompts} == {"call_1.q.1"}
    [result] = results(daemon, started["turnId"])
    assert result["content"].strip() == "got=false"
    assert responses(home, started["conversationId"]) == [
        {"type": "inquiry_response", "id": "call_1.q.1", "outcome": "answered", "answer": False}
    ]
    assert daemon.process.returncode is None


@pytest.mark.parametrize(
    ("params", "problem"),
    [
        ({"answer": True, "remember": "yes"}, "remember"),
        ({"answer": True, "remember": 1}, "remember"),
        ({"answer": True, "extra": 1}, "extra"),
        ({"answer": "yes"}, "must be true or false"),
    ],
)
async def test_a_wrong_shaped_inquiry_answer_is_refused_and_the_question_stays_open(
    jpd_factory: StartJpd, home: Path, params: dict[str, Any], problem: str
) -> None:
    """protocol.md 5.17: `inquiry/answer` params of the wrong shape, or an answer that does
    not fit, get -32602 saying what is wrong; the question stays pending and answerable."""
    daemon = await start(jpd_factory, home)
    started = await daemon.request("turn/start", {"message": "go"})
    await _wait_pending(daemon)

    with pytest.raises(JsonRpcException) as refused:
        await daemon.request("inquiry/answer", {"inquiryId": "call_1.q.1", **params})

    assert refused.value.code == -32602
    assert problem in f"{refused.value.message} {refused.value.data}"
    listed = (await daemon.request("inquiry/list"))["inquiries"]
    assert [i["inquiryId"] for i in listed] == ["call_1.q.1"]
    answer = {"inquiryId": "call_1.q.1", "answer": False}
    assert await daemon.request("inquiry/answer", answer) == {"accepted": True}
    await daemon.wait_event(started["turnId"], "turn_completed")
    assert responses(home, started["conversationId"]) == [
        {"type": "inquiry_response", "id": "call_1.q.1", "outcome": "answered", "answer": False}
    ]


@pytest.mark.parametrize("how", ["daemon/stop", "SIGTERM"])
async def test_a_question_pending_at_a_clean_stop_is_recorded_daemon_stopped(
    tmp_path: Path, daemons: Daemons, how: str
) -> None:
    """protocol.md 10.3: a question open when the daemon stops cleanly (`daemon/stop`,
    SIGTERM) is recorded cancelled with reason `daemon_stopped` (protocol.md 12.2, 5.19);
    clients are told it was cancelled and the turn ends `cancelled`."""
    env = env_with_asker(tmp_path)
    daemon = await daemons.start(env)
    asker_client = await SocketClient.connect(daemon.socket)
    asked = asyncio.Event()

    async def never_answers(params: dict[str, Any]) -> Any:
        asked.set()
        await asyncio.Event().wait()

    asker_client.handlers["inquiry/prompt"] = never_answers
    await asker_client.initialize(capabilities=BOOLEAN)
    started = await asker_client.request("turn/start", {"message": "go"})
    await asyncio.wait_for(asked.wait(), 60)

    if how == "daemon/stop":
        stopper = await SocketClient.connect(daemon.socket)
        await stopper.initialize()
        result = await stopper.request("daemon/stop")
        assert [t["turnId"] for t in result["cancelledTurns"]] == [started["turnId"]]
    else:
        daemon.process.send_signal(signal.SIGTERM)

    done = await asker_client.wait_event(started["turnId"], "turn_completed")
    assert done["event"]["stopReason"] == "cancelled"
    assert await daemon.wait_exit() == 0
    await wait_for(
        lambda: any(n["method"] == "inquiry/resolved" for n in asker_client.notifications),
        "inquiry/resolved",
    )
    [resolved] = [
        n["params"] for n in asker_client.notifications if n["method"] == "inquiry/resolved"
    ]
    assert resolved["inquiryId"] == "call_1.q.1" and resolved["outcome"] == "cancelled"
    events = persisted(env, started["conversationId"])
    inquiry = [
        {k: v for k, v in e.items() if k != "timestamp"}
        for e in events
        if e["type"] == "inquiry_response"
    ]
    assert inquiry == [
        {
            "type": "inquiry_response",
            "id": "call_1.q.1",
            "outcome": "cancelled",
            "reason": "daemon_stopped",
        }
    ]
    assert events[-1]["type"] == "turn_end" and events[-1]["stop_reason"] == "cancelled"


async def test_an_answer_read_after_turn_cancel_finds_the_question_gone(
    jpd_factory: StartJpd, home: Path
) -> None:
    """protocol.md 3: `turn/cancel` and then `inquiry/answer` sent back to back on one
    connection: the cancel was answered first, so the answer gets -32001 and the
    question is recorded cancelled (reason `user`); clients hear `cancelled`."""
    daemon = await start(jpd_factory, home)
    started = await daemon.request("turn/start", {"message": "go"})
    pending = await _wait_pending(daemon)
    cancel = asyncio.ensure_future(daemon.request("turn/cancel", {"turnId": started["turnId"]}))
    answer = asyncio.ensure_future(
        daemon.request("inquiry/answer", {"inquiryId": pending["inquiryId"], "answer": True})
    )
    assert await cancel == {"cancelled": True}
    with pytest.raises(JsonRpcException) as info:
        await answer
    assert info.value.code == -32001
    done = await daemon.wait_event(started["turnId"], "turn_completed")
    assert done["event"]["stopReason"] == "cancelled"
    recorded = responses(home, started["conversationId"])
    assert [(r["outcome"], r.get("reason")) for r in recorded] == [("cancelled", "user")]
    await wait_for(
        lambda: any(r["outcome"] == "cancelled" for r in daemon.resolved), "inquiry/resolved"
    )
