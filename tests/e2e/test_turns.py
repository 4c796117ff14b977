"""Full turns through the real daemon with the scripted `test` provider."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from pygls.exceptions import JsonRpcException

from tests.e2e.conftest import StartJpd
from tests.e2e.harness import Jpd

SLOW = {"text": "word " * 200, "chunk": 5, "delay_ms": 20}


def runs(names: list[str]) -> list[str]:
    """`names` with each run of repeated names as one."""
    return [n for i, n in enumerate(names) if i == 0 or names[i - 1] != n]


def kinds(events: list[dict]) -> list[str]:
    return [e["event"]["kind"] for e in events]


def disk_events(home: Path, conversation_id: str) -> list[dict]:
    path = home / "data" / "conversations" / conversation_id / "events.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


async def test_full_turn_streams_and_persists(jpd_factory: StartJpd, home: Path) -> None:
    daemon = await jpd_factory(
        responses=[
            {
                "reasoning": "think",
                "text": "Hello there, friend.",
                "chunk": 4,
                "usage": {"input_tokens": 11, "output_tokens": 5},
            }
        ]
    )
    await daemon.initialize()
    started, events = await daemon.run_turn("Say hello")
    assert started["conversationId"] and started["turnId"]

    assert kinds(events)[0] == "turn_started"
    assert kinds(events)[-1] == "turn_completed"
    assert events[-1]["event"]["stopReason"] == "end_turn"
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    text = "".join(e["event"]["text"] for e in events if e["event"]["kind"] == "text_delta")
    assert text == "Hello there, friend."
    usage = next(e["event"]["usage"] for e in events if e["event"]["kind"] == "usage")
    assert usage == {"inputTokens": 11, "outputTokens": 5}

    got = await daemon.request("conversation/get", {"conversationId": started["conversationId"]})
    persisted = got["events"]
    assert [e["type"] for e in persisted] == [
        "turn_start",
        "chat_request",
        "chat_response",
        "chat_response",
        "turn_end",
    ]
    assert persisted[1]["content"] == "Say hello"
    assert persisted[2]["reasoning"] == "think"
    assert persisted[3]["message"] == "Hello there, friend."
    assert persisted[3]["usage"] == {"input_tokens": 11, "output_tokens": 5}
    assert persisted[4]["stop_reason"] == "end_turn"
    assert all("timestamp" in e for e in persisted)
    assert disk_events(home, started["conversationId"]) == persisted

    listed = (await daemon.request("conversation/list"))["conversations"]
    assert [c["conversationId"] for c in listed] == [started["conversationId"]]
    assert listed[0]["title"] == "Say hello" and listed[0]["eventCount"] == 5


async def test_second_turn_sends_history_to_the_model(jpd_factory: StartJpd, home: Path) -> None:
    daemon = await jpd_factory(responses=[{"text": "first answer"}, {"text": "second answer"}])
    await daemon.initialize()
    first, _ = await daemon.run_turn("one")
    second, _ = await daemon.run_turn("two", conversationId=first["conversationId"])
    assert second["conversationId"] == first["conversationId"]
    requests = [json.loads(x) for x in (home / "requests.jsonl").read_text().splitlines()]
    assert [m["role"] for m in requests[1]["messages"]] == ["user", "assistant", "user"]
    assert requests[1]["messages"][1]["content"] == "first answer"
    # seq keeps counting across turns of one conversation.
    seqs = [e["seq"] for e in daemon.events]
    assert seqs == list(range(1, len(seqs) + 1))


async def test_an_edited_config_file_applies_to_the_next_turn(
    jpd_factory: StartJpd, home: Path
) -> None:
    daemon = await jpd_factory(
        responses=[{"text": "one"}, {"text": "two"}, {"text": "three"}],
        config='[assistant]\nsystem_prompt = "first prompt"\n',
    )
    await daemon.initialize()
    # Older than a file the daemon reads again on every turn however it looks (2 s,
    # jpd/config/cache.py), so the second turn takes the unchanged config from the cache.
    await asyncio.sleep(2.1)
    for message in ("a", "b"):
        _, events = await daemon.run_turn(message)
        assert events[-1]["event"]["stopReason"] == "end_turn"
    config = home / "config.toml"
    config.write_text(config.read_text().replace("first prompt", "other prompt"))  # same size
    _, events = await daemon.run_turn("c")
    assert events[-1]["event"]["stopReason"] == "end_turn"
    requests = [json.loads(x) for x in (home / "requests.jsonl").read_text().splitlines()]
    assert [r["system"] for r in requests] == ["first prompt", "first prompt", "other prompt"]


async def test_cancel_mid_stream_keeps_what_was_received(jpd_factory: StartJpd, home: Path) -> None:
    daemon = await jpd_factory(responses=[SLOW])
    await daemon.initialize()
    started = await daemon.request("turn/start", {"message": "long please"})
    await daemon.wait_event(started["turnId"], "text_delta")
    running = await daemon.request("turn/list")
    assert [t["turnId"] for t in running["turns"]] == [started["turnId"]]
    assert (await daemon.request("turn/cancel", {"turnId": started["turnId"]}))["cancelled"]
    done = await daemon.wait_event(started["turnId"], "turn_completed", timeout=10)
    assert done["event"]["stopReason"] == "cancelled"

    persisted = disk_events(home, started["conversationId"])
    assert persisted[-1]["type"] == "turn_end" and persisted[-1]["stop_reason"] == "cancelled"
    partial = persisted[-2]["message"]
    assert partial and SLOW["text"].startswith(partial) and partial != SLOW["text"]
    assert (await daemon.request("turn/list"))["turns"] == []
    assert (await daemon.request("turn/cancel", {"turnId": started["turnId"]}))[
        "cancelled"
    ] is False


async def test_provider_error_ends_turn_with_error(jpd_factory: StartJpd, home: Path) -> None:
    daemon = await jpd_factory(responses=[{"error": "upstream exploded"}])
    await daemon.initialize()
    started, events = await daemon.run_turn("hi")
    end = events[-1]["event"]
    assert end == {"kind": "turn_completed", "stopReason": "error", "error": "upstream exploded"}
    assert disk_events(home, started["conversationId"])[-1]["error"] == "upstream exploded"
    # The daemon keeps serving after a failed turn.
    assert (await daemon.request("turn/list"))["turns"] == []


async def test_call_to_unknown_tool_gets_error_response_and_loop_continues(
    jpd_factory: StartJpd, home: Path
) -> None:
    daemon = await jpd_factory(
        responses=[
            {"tool_calls": [{"id": "call_1", "name": "ls", "arguments": {"path": "."}}]},
            {"text": "Sorry, I cannot list files."},
        ]
    )
    await daemon.initialize()
    started, events = await daemon.run_turn("list files")
    # Deltas arriving within one tick are merged (protocol.md section 7.2): count runs.
    assert runs(kinds(events)) == [
        "turn_started",
        "tool_call",
        "tool_result",
        "text_delta",
        "turn_completed",
    ]
    text = "".join(e["event"]["text"] for e in events if e["event"]["kind"] == "text_delta")
    assert text == "Sorry, I cannot list files."
    result = events[2]["event"]
    assert result["isError"] and "'ls' does not exist" in result["content"]
    assert "describe_tools" in result["content"]  # the model is told what exists
    types = [e["type"] for e in disk_events(home, started["conversationId"])]
    assert types == [
        "turn_start",
        "chat_request",
        "tool_call_request",
        "tool_call_response",
        "chat_response",
        "turn_end",
    ]
    requests = [json.loads(x) for x in (home / "requests.jsonl").read_text().splitlines()]
    assert requests[1]["messages"][-1]["role"] == "tool"


async def test_invalid_turn_config_names_key_and_daemon_keeps_serving(jpd: Jpd) -> None:
    with pytest.raises(JsonRpcException) as info:
        await jpd.request(
            "turn/start", {"message": "x", "config": {"assistant": {"modle": {"id": "a/b"}}}}
        )
    assert info.value.code == -32003
    assert "assistant.modle" in info.value.message and "turn/start" in info.value.message
    with pytest.raises(JsonRpcException) as info:
        await jpd.request("turn/start", {"message": "x", "model": "nonsense"})
    assert info.value.code == -32003
    with pytest.raises(JsonRpcException) as info:
        await jpd.request("turn/start", {"message": "x", "model": "nosuch/model"})
    assert info.value.code == -32004 and "nosuch" in info.value.message
    _, events = await jpd.run_turn("still fine")
    assert events[-1]["event"]["stopReason"] == "end_turn"


async def test_invalid_config_file_is_reported_per_turn(jpd_factory: StartJpd) -> None:
    daemon = await jpd_factory(config='[daemon]\nidle_timeout = "soon"\n')
    await daemon.initialize()
    with pytest.raises(JsonRpcException) as info:
        await daemon.request("turn/start", {"message": "x"})
    assert info.value.code == -32003
    assert "config.toml" in info.value.message and "daemon.idle_timeout" in info.value.message


async def test_conversation_ids_are_validated_and_missing_ones_not_found(jpd: Jpd) -> None:
    for bad in ("../etc", "a/b", "..", ""):
        with pytest.raises(JsonRpcException) as info:
            await jpd.request("conversation/get", {"conversationId": bad})
        assert info.value.code == -32602, bad
    with pytest.raises(JsonRpcException) as info:
        await jpd.request("conversation/get", {"conversationId": "c-missing"})
    assert info.value.code == -32001
    with pytest.raises(JsonRpcException) as info:
        await jpd.request("turn/start", {"message": "x", "conversationId": "c-missing"})
    assert info.value.code == -32001


async def test_busy_conversation_and_delete(jpd_factory: StartJpd, home: Path) -> None:
    daemon = await jpd_factory(responses=[SLOW, {"text": "later"}])
    await daemon.initialize()
    started = await daemon.request("turn/start", {"message": "slow"})
    cid = started["conversationId"]
    with pytest.raises(JsonRpcException) as info:
        await daemon.request("turn/start", {"message": "again", "conversationId": cid})
    assert info.value.code == -32005
    with pytest.raises(JsonRpcException) as info:
        await daemon.request("conversation/delete", {"conversationId": cid})
    assert info.value.code == -32005
    await daemon.request("turn/cancel", {"turnId": started["turnId"]})
    await daemon.wait_event(started["turnId"], "turn_completed")
    assert await daemon.request("conversation/delete", {"conversationId": cid}) == {"deleted": True}
    assert not (home / "data" / "conversations" / cid).exists()
    assert (await daemon.request("conversation/list"))["conversations"] == []


async def test_exit_during_a_turn_records_it_as_cancelled(
    jpd_factory: StartJpd, home: Path
) -> None:
    daemon = await jpd_factory(responses=[SLOW])
    await daemon.initialize()
    started = await daemon.request("turn/start", {"message": "slow"})
    await daemon.wait_event(started["turnId"], "text_delta")
    await daemon.request("shutdown")
    daemon.notify("exit")
    assert await asyncio.wait_for(daemon.process.wait(), 20) == 0
    persisted = disk_events(home, started["conversationId"])
    assert persisted[-1]["type"] == "turn_end"
    assert persisted[-1]["stop_reason"] == "cancelled"


async def test_attach_replays_events_after_from_seq(jpd_factory: StartJpd) -> None:
    daemon = await jpd_factory(responses=[{"text": "abcdefgh", "chunk": 2}])
    await daemon.initialize()
    started, events = await daemon.run_turn("hi")
    daemon.events.clear()
    result = await daemon.request(
        "turn/attach", {"conversationId": started["conversationId"], "fromSeq": 3}
    )
    assert result["lastSeq"] == len(events) and result["oldestSeq"] == 1
    await daemon.wait_event(started["turnId"], "turn_completed")
    assert [e["seq"] for e in daemon.events] == list(range(4, len(events) + 1))
    detached = await daemon.request("turn/detach", {"conversationId": started["conversationId"]})
    assert detached == {"detached": True}


async def test_rejected_turn_start_leaves_no_conversation_behind(jpd: Jpd) -> None:
    with pytest.raises(JsonRpcException) as info:
        await jpd.request(
            "turn/start", {"message": "x", "config": {"assistant": {"tool_choice": "nope"}}}
        )
    assert info.value.code == -32003 and "assistant.tool_choice" in info.value.message
    with pytest.raises(JsonRpcException):
        await jpd.request("turn/start", {"message": "x", "tools": [{"enable": True, "name": "?"}]})
    assert (await jpd.request("conversation/list"))["conversations"] == []


async def test_replay_buffer_is_bounded_and_attach_says_where_it_starts(
    jpd_factory: StartJpd,
) -> None:
    daemon = await jpd_factory(
        responses=[{"text": "abcdefghij", "chunk": 1}], config="[daemon]\nreplay_buffer = 4\n"
    )
    await daemon.initialize()
    started, events = await daemon.run_turn("hi")
    daemon.events.clear()
    result = await daemon.request(
        "turn/attach", {"conversationId": started["conversationId"], "fromSeq": 0}
    )
    assert result["lastSeq"] == len(events)
    assert result["oldestSeq"] == len(events) - 3
    await daemon.wait_event(started["turnId"], "turn_completed")
    assert [e["seq"] for e in daemon.events] == list(range(len(events) - 3, len(events) + 1))


async def test_create_names_a_new_conversation_and_the_workspace_is_recorded(
    jpd_factory: StartJpd, home: Path
) -> None:
    daemon = await jpd_factory(responses=[{"text": "one"}, {"text": "two"}])
    workspace = home / "ws"
    workspace.mkdir()
    await daemon.initialize(workspaceRoot=str(workspace))
    chosen = "c-20261123T000000-0123abcd"
    started, _ = await daemon.run_turn("first", conversationId=chosen, create=True)
    assert started["conversationId"] == chosen
    assert disk_events(home, chosen)[0]["workspace"] == str(workspace)
    listed = await daemon.request("conversation/list")
    assert listed["conversations"][0]["conversationId"] == chosen
    assert listed["conversations"][0]["workspace"] == str(workspace)

    with pytest.raises(JsonRpcException) as exists:
        await daemon.request(
            "turn/start", {"message": "again", "conversationId": chosen, "create": True}
        )
    assert exists.value.code == -32602 and "already exists" in str(exists.value)
    with pytest.raises(JsonRpcException) as missing:
        await daemon.request("turn/start", {"message": "x", "create": True})
    assert missing.value.code == -32602
    # The refused requests created nothing and the conversation still continues.
    _, events = await daemon.run_turn("second", conversationId=chosen)
    assert events[-1]["event"]["stopReason"] == "end_turn"
    assert len((await daemon.request("conversation/list"))["conversations"]) == 1
