"""`conversation/compact` through the real daemon (protocol.md 5.25 and 12.5)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pygls.exceptions import JsonRpcException

from tests.e2e.conftest import StartJpd
from tests.e2e.sockets import Daemons, run_jp, socket_env

LONG = "a long answer. " * 200


async def test_compact_records_a_summary_the_next_turn_is_sent(
    jpd_factory: StartJpd, home: Path
) -> None:
    daemon = await jpd_factory(
        responses=[
            {"text": LONG},
            {"text": LONG},
            {"text": LONG},
            {"text": "Goal: testing. Constraints: 'use tabs'."},
            {"text": "after"},
        ]
    )
    await daemon.initialize()
    started, _ = await daemon.run_turn("first, always use tabs")
    cid = started["conversationId"]
    for message in ("second", "third"):
        await daemon.run_turn(message, conversationId=cid)
    before = (await daemon.request("conversation/get", {"conversationId": cid}))["events"]

    result = await daemon.request(
        "conversation/compact", {"conversationId": cid, "instructions": "keep the rules"}
    )
    assert result["compacted"] is True and result["method"] == "summary"
    assert result["tokensAfter"] < result["tokensBefore"]

    after = (await daemon.request("conversation/get", {"conversationId": cid}))["events"]
    assert after[: len(before)] == before  # nothing rewritten, one event appended
    event = after[-1]
    assert event["type"] == "context_compacted" and event["trigger"] == "manual"
    assert event["instructions"] == "keep the rules"
    assert event["summary"].startswith("Goal: testing.")
    requests = [json.loads(x) for x in (home / "requests.jsonl").read_text().splitlines()]
    assert "keep the rules" in requests[-1]["messages"][-1]["content"]

    await daemon.run_turn("fourth", conversationId=cid)
    requests = [json.loads(x) for x in (home / "requests.jsonl").read_text().splitlines()]
    sent = requests[-1]["messages"]
    assert sent[0]["content"].startswith("[context:") and "Goal: testing." in sent[0]["content"]
    assert sent[-1]["content"] == "fourth"
    assert len(sent) < 7  # the three first exchanges are no longer sent in full


async def test_compact_errors_leave_the_daemon_running(jpd_factory: StartJpd) -> None:
    daemon = await jpd_factory(responses=[{"text": "ok"}])
    await daemon.initialize()
    with pytest.raises(JsonRpcException):
        await daemon.request("conversation/compact", {"conversationId": "c-missing0000"})
    with pytest.raises(JsonRpcException):
        await daemon.request("conversation/compact", {"conversationId": "../etc"})
    _, events = await daemon.run_turn("still here")
    assert events[-1]["event"]["stopReason"] == "end_turn"


async def test_jp_conversation_compact(tmp_path: Path, daemons: Daemons) -> None:
    env = socket_env(
        tmp_path,
        [{"text": LONG}, {"text": LONG}, {"text": LONG}, {"text": "Goal: jp compacts."}],
    )
    await daemons.start(env)
    assert run_jp(env, "query", "--new", "one").returncode == 0
    assert run_jp(env, "query", "two").returncode == 0
    assert run_jp(env, "query", "three").returncode == 0
    done = run_jp(env, "conversation", "compact", "--instructions", "keep names")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("jp: context summarised: ")
    conversation = run_jp(env, "conversation", "ls", "--ids").stdout.strip()
    shown = run_jp(env, "conversation", "show", conversation).stdout
    assert "context compacted (manual, summary)" in shown and "Goal: jp compacts." in shown
    missing = run_jp(env, "conversation", "compact", "nope")
    assert missing.returncode == 1 and "not found" in missing.stderr
