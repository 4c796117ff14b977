"""The LLM inquiry backend end to end (RFD 028/033/034): side requests built on the
turn's request, parallel inquiries, the inquiry model, cancellation and provider errors.

The scripted `test` provider records every request it receives, so the tests compare
the side request with the turn's own request exactly as a provider would send them.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from jpd.llm.anthropic_request import build_body
from jpd.llm.base import ModelRequest
from jpd.llm.request_build import encode_body
from tests.e2e.conftest import StartJpd
from tests.e2e.harness import Jpd
from tests.e2e.test_inquiries import asker, inquiry_pair
from tests.e2e.test_tools import call, results
from tests.e2e.test_turns import disk_events
from tests.e2e.tools import make_tool, tool_toml

TO_ASSISTANT = 'questions.q.target = "assistant"\n'
BIG = "The quick brown fox jumps over the lazy dog. " * 200
"""A large tool argument, to check it is never sent again."""


def record_lines(home: Path) -> list[str]:
    return (home / "requests.jsonl").read_text().splitlines()


def encode(value: Any) -> bytes:
    """JSON the way the request builders serialise: insertion order, no sorting."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=False).encode()


async def start_asker(
    jpd_factory: StartJpd,
    home: Path,
    responses: list[dict[str, Any]],
    settings: str = TO_ASSISTANT,
    config: str = "",
    body: str | None = None,
) -> Jpd:
    command = make_tool(home, "asker", body or asker())
    daemon = await jpd_factory(
        responses=responses,
        config=config + tool_toml("asker", command, run='"unattended"') + settings,
    )
    await daemon.initialize()
    return daemon


def pinned_tools(parent: dict[str, Any], side: dict[str, Any], inquiry_id: str) -> None:
    """On a provider that does not constrain decoding (every hosted one, and the
    scripted one) the side request's tools and `tool_choice` are the parent's, byte for
    byte, and nothing is pinned (protocol.md 10.4, RFD 033)."""
    assert encode(side["tools"]) == encode(parent["tools"])
    assert encode(side["tool_choice"]) == encode(parent["tool_choice"])
    assert side["pinned_arguments"] is None
    assert f'inquiry_id "{inquiry_id}"' in side["messages"][-1]["content"]


async def test_side_request_messages_start_with_the_parents_byte_for_byte(
    jpd_factory: StartJpd, home: Path
) -> None:
    daemon = await start_asker(
        jpd_factory,
        home,
        responses=[call("asker", content=BIG), {"answer_inquiry": "true"}, {"text": "done"}],
        config='[assistant]\nsystem_prompt = "You are terse."\n',
        settings=TO_ASSISTANT + 'parameters.content = { type = "string", required = true }\n',
    )
    started, _ = await daemon.run_turn("go")
    [result] = results(daemon, started["turnId"])
    assert result["content"].strip() == "got=true"
    parent_line, side_line, follow_line = record_lines(home)
    parent, side = json.loads(parent_line), json.loads(side_line)
    prefix = len(parent["messages"])

    # As recorded (pydantic's JSON, key order kept): tools, tool_choice, system and the
    # messages prefix are the parent's.
    pinned_tools(parent, side, "call_1.q.1")
    assert encode(side["system"]) == encode(parent["system"]) == b'"You are terse."'
    assert encode(side["messages"][:prefix]) == encode(parent["messages"])

    # As the Anthropic request builder sends them.
    parent_body = build_body(ModelRequest.model_validate_json(parent_line))
    side_body = build_body(ModelRequest.model_validate_json(side_line))
    assert encode(side_body["system"]) == encode(parent_body["system"])
    parent_turns = parent_body["messages"]
    # Breakpoints sit on the newest two turns, so the parent's last turn carries one
    # that the side request moves on; they mark where to cache and are not content.
    # The API's look-back from the side request's breakpoints finds the parent's entry.
    side_prefix = side_body["messages"][: len(parent_turns)]
    assert encode(strip_breakpoints(side_prefix)) == encode(strip_breakpoints(parent_turns))
    marked = [i for i, m in enumerate(side_body["messages"]) if "cache_control" in json.dumps(m)]
    assert marked == [len(side_body["messages"]) - 2, len(side_body["messages"]) - 1]
    assert encode_body(side_body).count(b"The quick brown fox") == 200  # once, in the call

    # After the prefix: the asking call (the model's own output, which the follow-up
    # request carries too), its paused result and the question; nothing re-sends the
    # arguments, and the answer comes back without them.
    asking, paused, question = side["messages"][prefix:]
    assert asking["tool_calls"] == [
        {"id": "call_1", "name": "asker", "arguments": {"content": BIG}}
    ]
    assert paused["role"] == "tool" and paused["content"].startswith("Tool paused")
    assert question["role"] == "user" and "Proceed?" in question["content"]
    for message in (paused, question):
        assert "quick brown fox" not in json.dumps(message)
    follow = json.loads(follow_line)
    assert follow_line.count("The quick brown fox") == 200  # no re-call with the arguments
    assert [m["role"] for m in follow["messages"]] == ["user", "assistant", "tool"]
    assert "answer_inquiry" not in json.dumps(follow["messages"])


def strip_breakpoints(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: strip_breakpoints(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [strip_breakpoints(v) for v in value]
    return value


async def test_later_turn_side_request_messages_differ_only_in_moved_breakpoints(
    jpd_factory: StartJpd, home: Path
) -> None:
    daemon = await start_asker(
        jpd_factory,
        home,
        responses=[{"text": "noted"}, call("asker"), {"answer_inquiry": "false"}, {"text": "ok"}],
    )
    first, _ = await daemon.run_turn("background")
    await daemon.run_turn("go", conversationId=first["conversationId"])
    _, parent_line, side_line, _ = record_lines(home)
    parent, side = json.loads(parent_line), json.loads(side_line)
    prefix = len(parent["messages"])
    pinned_tools(parent, side, "call_1.q.1")
    assert encode(side["messages"][:prefix]) == encode(parent["messages"])

    # The builder puts its message breakpoints on the newest turns, so an older turn may
    # carry one in the parent body and not in the side body. Breakpoints mark where to
    # cache; they are not part of the cached content, which is identical.
    parent_body = build_body(ModelRequest.model_validate_json(parent_line))
    side_body = build_body(ModelRequest.model_validate_json(side_line))
    parent_turns = parent_body["messages"]
    side_prefix = side_body["messages"][: len(parent_turns)]
    assert encode(strip_breakpoints(side_prefix)) == encode(strip_breakpoints(parent_turns))


PARALLEL_ASKER = """
types = {"b": {"type": "boolean"}, "s": {"type": "select", "options": ["red", "blue"]},
         "t": {"type": "text"}}
if "q" not in answers:
    print(json.dumps({"type": "needs_input", "question": {"id": "q", "text": "Which?",
                      "answer_type": types[args["kind"]]}}))
else:
    with open(options["record"], "a") as f:  # interleaves with the provider's record
        f.write(json.dumps({"tool_got": args["kind"]}) + "\\n")
    print("got=" + json.dumps(answers["q"]))
"""


async def test_parallel_inquiries_overlap_and_each_answer_arrives_typed(
    jpd_factory: StartJpd, home: Path
) -> None:
    calls = {
        "tool_calls": [
            {"id": f"c{i}", "name": "asker", "arguments": {"kind": kind}}
            for i, kind in enumerate("bst", start=1)
        ]
    }
    # Each scripted answer serves whichever inquiry asks; each waits before answering.
    answer = {
        "answer_inquiry": {"c1.q.1": "TRUE", "c2.q.1": "blue", "c3.q.1": "free text"},
        "delay_ms": 2000,
    }
    daemon = await start_asker(
        jpd_factory,
        home,
        responses=[calls, answer, answer, answer, {"text": "done"}],
        body=PARALLEL_ASKER,
        settings=TO_ASSISTANT
        + f'options.record = "{home / "requests.jsonl"}"\n'
        + 'parameters.kind = { type = "string", required = true }\n',
    )
    started, events = await daemon.run_turn("go")
    assert events[-1]["event"]["stopReason"] == "end_turn"
    # Each result comes when its call ends: compare by call id.
    got = {r["id"]: r["content"].strip() for r in results(daemon, started["turnId"])}
    assert got == {"c1": "got=true", "c2": 'got="blue"', "c3": 'got="free text"'}
    persisted = disk_events(home, started["conversationId"])
    answers = {e["id"]: e["answer"] for e in persisted if e["type"] == "inquiry_response"}
    assert answers == {"c1.q.1": True, "c2.q.1": "blue", "c3.q.1": "free text"}

    # Overlap, by order alone: all three side requests reached the provider before
    # any tool received its answer. Serialized inquiries would put an answer (and the
    # tool's re-run) between the first and the last side request.
    lines = [json.loads(x) for x in record_lines(home)]
    sides = [i for i, x in enumerate(lines) if "messages" in x and _asked(x)]
    got = [i for i, x in enumerate(lines) if "tool_got" in x]
    assert len(sides) == 3 and len(got) == 3
    assert max(sides) < min(got)
    assert sorted(str(_asked(lines[i])) for i in sides) == ["c1.q.1", "c2.q.1", "c3.q.1"]


def _asked(request: dict[str, Any]) -> str | None:
    """The inquiry id a side request asks about (its last message is the question)."""
    last = request["messages"][-1]
    if last["role"] != "user" or 'inquiry_id "' not in last["content"]:
        return None
    return str(last["content"].split('inquiry_id "', 1)[1].split('"', 1)[0])


async def test_inquiry_model_merges_question_target_inquiry_and_assistant(
    jpd_factory: StartJpd, home: Path
) -> None:
    command = make_tool(home, "plain", asker())
    config = (
        '[assistant]\nsystem_prompt = "Main."\n'
        "[assistant.model.parameters]\ntemperature = 0.5\n"
        '[conversation.inquiry.assistant]\nsystem_prompt = "Answer tool questions."\n'
        '[conversation.inquiry.assistant.model]\nid = "test/inquirer"\n'
        "parameters = { max_tokens = 77 }\n"
        + tool_toml("plain", command, run='"unattended"')
        + TO_ASSISTANT
    )
    target = (
        'questions.q.target = { model = { id = "test/special", '
        "parameters = { max_tokens = 5 } } }\n"
    )
    daemon = await start_asker(
        jpd_factory,
        home,
        responses=[
            call("asker", "c1"),
            {"answer_inquiry": "true"},
            call("plain", "c2"),
            {"answer_inquiry": "false"},
            {"text": "done"},
        ],
        config=config,
        settings=target,
    )
    started, _ = await daemon.run_turn("go")
    assert [r["content"].strip() for r in results(daemon, started["turnId"])] == [
        "got=true",
        "got=false",
    ]
    parent1, side1, parent2, side2, follow = [json.loads(x) for x in record_lines(home)]
    for turn_request in (parent1, parent2, follow):
        assert turn_request["model"] == "scripted" and turn_request["max_tokens"] is None
        assert turn_request["system"] == "Main."
    # Per-question target first, then conversation.inquiry.assistant, then assistant.
    assert (side1["model"], side1["max_tokens"]) == ("special", 5)
    assert (side2["model"], side2["max_tokens"]) == ("inquirer", 77)
    for side, call_id in ((side1, "c1"), (side2, "c2")):
        assert side["system"] == "Answer tool questions."
        assert side["temperature"] == 0.5
        pinned_tools(parent1, side, f"{call_id}.q.1")


async def test_unknown_inquiry_model_is_backend_error(jpd_factory: StartJpd, home: Path) -> None:
    daemon = await start_asker(
        jpd_factory,
        home,
        responses=[call("asker"), {"text": "ok"}],
        settings='questions.q.target = { model = { id = "nosuch/model" } }\n',
    )
    started, _ = await daemon.run_turn("go")
    [result] = results(daemon, started["turnId"])
    assert result["isError"] and "nosuch/model" in result["content"]
    _, response = inquiry_pair(home, started["conversationId"])
    assert response["reason"] == "backend_error"


async def test_turn_cancel_during_inquiry_cancels_it_with_reason_user(
    jpd_factory: StartJpd, home: Path
) -> None:
    daemon = await start_asker(
        jpd_factory,
        home,
        responses=[call("asker"), {"answer_inquiry": "true", "delay_ms": 120_000}],
    )
    started = await daemon.request("turn/start", {"message": "go"})
    for _ in range(600):  # until the side request has reached the provider
        if (home / "requests.jsonl").exists() and len(record_lines(home)) == 2:
            break
        await asyncio.sleep(0.05)
    assert _asked(json.loads(record_lines(home)[1])) == "call_1.q.1"
    assert (await daemon.request("turn/cancel", {"turnId": started["turnId"]}))["cancelled"]
    done = await daemon.wait_event(started["turnId"], "turn_completed", timeout=30)
    assert done["event"]["stopReason"] == "cancelled"
    persisted = disk_events(home, started["conversationId"])
    _, response = inquiry_pair(home, started["conversationId"])
    assert response["outcome"] == "cancelled" and response["reason"] == "user"
    [tool_response] = [e for e in persisted if e["type"] == "tool_call_response"]
    assert tool_response["is_error"] and "cancel" in tool_response["content"]
    assert persisted[-1]["type"] == "turn_end" and persisted[-1]["stop_reason"] == "cancelled"
    assert len(record_lines(home)) == 2  # no further model call after the cancel


async def test_provider_error_in_side_request_is_backend_error(
    jpd_factory: StartJpd, home: Path
) -> None:
    daemon = await start_asker(
        jpd_factory,
        home,
        responses=[call("asker"), {"error": "overloaded_error: try later"}, {"text": "ok"}],
    )
    started, events = await daemon.run_turn("go")
    assert events[-1]["event"]["stopReason"] == "end_turn"  # the turn goes on
    [result] = results(daemon, started["turnId"])
    assert result["isError"] and "overloaded_error: try later" in result["content"]
    _, response = inquiry_pair(home, started["conversationId"])
    assert response["outcome"] == "cancelled" and response["reason"] == "backend_error"


async def test_inquiry_on_the_embedded_model_is_trimmed_to_its_context(
    jpd_factory: StartJpd, home: Path
) -> None:
    """A scripted turn whose inquiries go to the real embedded model: the long first
    exchange would overflow its context, so the side request drops it."""
    long_text = "Notes on the quarterly numbers, line by line. " * 400  # ~18k characters
    daemon = await start_asker(
        jpd_factory,
        home,
        responses=[{"text": "noted"}, call("asker"), {"text": "done"}],
        config=(
            '[conversation.inquiry.assistant.model]\nid = "local/smollm2"\n'
            "parameters = { max_tokens = 48 }\n"
            "[providers.local]\nn_ctx = 2048\n"
        ),
        body=asker().replace('"Proceed?"', '"Is 2 greater than 1?"'),
    )
    first, _ = await daemon.run_turn(long_text)
    started, events = await daemon.run_turn("go", conversationId=first["conversationId"])
    assert events[-1]["event"]["stopReason"] == "end_turn"
    [result] = results(daemon, started["turnId"])
    assert result["content"].strip() in ("got=true", "got=false"), result["content"]
    _, response = inquiry_pair(home, started["conversationId"])
    assert response["outcome"] == "answered" and isinstance(response["answer"], bool)
    # The turn's own model still saw everything.
    parent = json.loads(record_lines(home)[1])
    assert parent["messages"][0]["content"] == long_text
