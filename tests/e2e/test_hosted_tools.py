"""Hosted providers end to end, tool calls and reasoning: argument deltas split
anywhere run real local tools, thinking blocks go back with their signatures, and the
forced-tool retry without reasoning (RFD 068) runs against the fake API server.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.conftest import StartJpd
from tests.e2e.hosted import (
    CLAUDE,
    ECHO,
    ECHO_PARAMS,
    OPENAI_CHAT,
    OPENAI_KEY,
    answers,
    anthropic_env,
    body,
    of_kind,
    plain,
    texts,
)
from tests.e2e.test_tools import results
from tests.e2e.test_turns import disk_events
from tests.e2e.tools import make_tool, tool_toml
from tests.fixtures.fake_llm_server import (
    FakeLLMServer,
    Reply,
    Send,
)
from tests.fixtures.llm_wire import (
    a_block_start,
    a_block_stop,
    a_delta,
    a_message_delta,
    a_message_start,
    a_message_stop,
    a_text_answer,
    a_tool_answer,
    o_chunk,
    o_done,
    o_text_answer,
    o_usage,
    stream_reply,
)


@pytest.fixture
def fake() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as server:
        yield server


# --- tools and reasoning ---------------------------------------------------------------


def split_inside(frame: bytes, marker: bytes) -> tuple[Send, Send]:
    """Two chunks, cut inside `marker` (here: inside a multi-byte UTF-8 character)."""
    cut = frame.index(marker) + 1
    return Send(frame[:cut]), Send(frame[cut:])


async def test_tool_call_with_split_argument_deltas_runs_a_local_tool(
    jpd_factory: StartJpd, home: Path, fake: FakeLLMServer
) -> None:
    # `{"text": "héllo wörld"}` arrives in fragments cut mid-key, mid-word and
    # between the escape of a character; one SSE frame is also split on the wire
    # inside a two-byte UTF-8 sequence.
    frames = a_tool_answer(
        "toolu_01", "echo", '{"te', 'xt": "h\\u00', "e9llo w", "ö", 'rld"}', text="Let me echo."
    )
    wire: list[Send] = []
    for frame in frames:
        wire += split_inside(frame, "ö".encode()) if "ö".encode() in frame else [Send(frame)]
    fake.push(
        Reply(headers={"content-type": "text/event-stream"}, body=tuple(wire)),
        stream_reply(*a_text_answer("It said héllo wörld.")),
    )
    command = make_tool(home, "echo", ECHO)
    daemon = await jpd_factory(
        model=CLAUDE,
        env=anthropic_env(fake),
        config=tool_toml("echo", command, run='"unattended"') + ECHO_PARAMS,
    )
    await daemon.initialize()
    started, events = await daemon.run_turn("echo héllo wörld")
    assert events[-1]["event"]["stopReason"] == "end_turn"
    [call] = of_kind(events, "tool_call")
    assert call == {
        "kind": "tool_call",
        "id": "toolu_01",
        "name": "echo",
        "arguments": {"text": "héllo wörld"},
        "hidden": False,
        "title": 'echo(text="héllo wörld")',
        "toolKind": "other",
        "locations": [],
    }
    [result] = results(daemon, started["turnId"])
    assert result["content"].strip() == "echo:héllo wörld" and not result["isError"]

    first, follow_up = (body(r) for r in fake.requests)
    echo = next(t for t in first["tools"] if t["name"] == "echo")
    assert echo["input_schema"]["required"] == ["text"]
    assistant, user = follow_up["messages"][-2:]
    assert assistant["role"] == "assistant"
    assert plain(assistant["content"]) == [
        {"type": "text", "text": "Let me echo."},
        {"type": "tool_use", "id": "toolu_01", "name": "echo", "input": {"text": "héllo wörld"}},
    ]
    assert user["role"] == "user"
    [tool_result] = user["content"]
    assert tool_result["type"] == "tool_result" and tool_result["tool_use_id"] == "toolu_01"
    assert tool_result["content"].strip() == "echo:héllo wörld"

    types = [e["type"] for e in disk_events(home, started["conversationId"])]
    assert types == [
        "turn_start",
        "chat_request",
        "chat_response",
        "tool_call_request",
        "tool_call_response",
        "chat_response",
        "turn_end",
    ]


async def test_openai_tool_call_fragments_run_a_local_tool_with_reasoning_effort(
    jpd_factory: StartJpd, home: Path, fake: FakeLLMServer
) -> None:
    call = {"index": 0, "id": "call_abc", "type": "function"}
    fake.push(
        stream_reply(
            o_chunk({"role": "assistant", "content": None}),
            o_chunk({"tool_calls": [{**call, "function": {"name": "echo", "arguments": ""}}]}),
            o_chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"te'}}]}),
            o_chunk({"tool_calls": [{"index": 0, "function": {"arguments": 'xt": "ok"}'}}]}),
            o_chunk({}, finish_reason="tool_calls"),
            o_chunk(usage=o_usage(50, 12), choices=False),
            o_done(),
        ),
        stream_reply(*o_text_answer("echoed")),
    )
    command = make_tool(home, "echo", ECHO)
    daemon = await jpd_factory(
        model="openai/o-x",
        env={"OPENAI_API_KEY": OPENAI_KEY, "OPENAI_BASE_URL": f"{fake.base_url}/v1"},
        config='[assistant.reasoning]\neffort = "high"\n'
        + OPENAI_CHAT
        + tool_toml("echo", command, run='"unattended"')
        + ECHO_PARAMS,
    )
    await daemon.initialize()
    started, events = await daemon.run_turn("echo ok")
    assert events[-1]["event"]["stopReason"] == "end_turn"
    [result] = results(daemon, started["turnId"])
    assert result["content"].strip() == "echo:ok"
    first, follow_up = (body(r) for r in fake.requests)
    assert first["reasoning_effort"] == "high" and first["tool_choice"] == "auto"
    assistant, tool = follow_up["messages"][-2:]
    assert assistant["tool_calls"] == [
        {
            "id": "call_abc",
            "type": "function",
            "function": {"name": "echo", "arguments": '{"text":"ok"}'},
        }
    ]
    assert tool["role"] == "tool" and tool["tool_call_id"] == "call_abc"
    assert tool["content"].strip() == "echo:ok"
    assert "".join(texts(events)) == "echoed"


def thinking_then_tool(signature: str) -> list[bytes]:
    return [
        a_message_start(),
        a_block_start(0, {"type": "thinking", "thinking": ""}),
        a_delta(0, {"type": "thinking_delta", "thinking": "The user wants "}),
        a_delta(0, {"type": "thinking_delta", "thinking": "an echo."}),
        a_delta(0, {"type": "signature_delta", "signature": signature}),
        a_block_stop(0),
        a_block_start(1, {"type": "tool_use", "id": "toolu_02", "name": "echo", "input": {}}),
        a_delta(1, {"type": "input_json_delta", "partial_json": '{"text": "x"}'}),
        a_block_stop(1),
        a_message_delta("tool_use", 30),
        a_message_stop(),
    ]


async def test_thinking_block_and_signature_go_back_with_the_tool_result(
    jpd_factory: StartJpd, home: Path, fake: FakeLLMServer
) -> None:
    fake.push(
        stream_reply(*thinking_then_tool("EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxf")),
        stream_reply(*a_text_answer("done")),
    )
    command = make_tool(home, "echo", ECHO)
    daemon = await jpd_factory(
        model=CLAUDE,
        env=anthropic_env(fake),
        config='[assistant.reasoning]\neffort = "low"\n'
        + tool_toml("echo", command, run='"unattended"')
        + ECHO_PARAMS,
    )
    await daemon.initialize()
    started, events = await daemon.run_turn("echo x")
    assert events[-1]["event"]["stopReason"] == "end_turn"
    # Deltas that arrive together are merged (protocol.md 7.2): the text is what counts.
    reasoning = [e["text"] for e in of_kind(events, "reasoning_delta")]
    assert "".join(reasoning) == "The user wants an echo."

    first, follow_up = (body(r) for r in fake.requests)
    assert first["thinking"] == {"type": "enabled", "budget_tokens": 1024}
    assert follow_up["thinking"] == first["thinking"]
    assert plain(follow_up["messages"][-2]["content"])[0] == {
        "type": "thinking",
        "thinking": "The user wants an echo.",
        "signature": "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxf",
    }
    persisted = disk_events(home, started["conversationId"])
    thought = next(e for e in persisted if e["type"] == "chat_response" and "reasoning" in e)
    assert thought["reasoning"] == "The user wants an echo."


async def test_forced_tool_with_thinking_retries_once_without_reasoning(
    jpd_factory: StartJpd, home: Path, fake: FakeLLMServer
) -> None:
    # protocol.md 9.2: the forced choice is softened to `auto` while thinking is on; the
    # model ignores the directive, so the turn loop keeps that answer, records a
    # `forced_tool_retry` and sends the request once more with thinking off and the real
    # tool_choice, after a note; that answer's tool call runs.
    fake.push(
        stream_reply(*a_text_answer("I would rather not.")),
        stream_reply(*a_tool_answer("toolu_03", "echo", '{"text"', ': "forced"}')),
        stream_reply(*a_text_answer("done")),
    )
    command = make_tool(home, "echo", ECHO)
    daemon = await jpd_factory(
        model=CLAUDE,
        env=anthropic_env(fake),
        config='[assistant]\ntool_choice = "echo"\n[assistant.reasoning]\neffort = "low"\n'
        + tool_toml("echo", command, run='"unattended"')
        + ECHO_PARAMS,
    )
    await daemon.initialize()
    started, events = await daemon.run_turn("go")
    assert events[-1]["event"]["stopReason"] == "end_turn"
    assert of_kind(events, "retry") == []  # nothing streamed is voided
    [told] = of_kind(events, "forced_tool_retry")
    assert told["tool"] == "echo" and "Call it now." in told["message"]
    [result] = results(daemon, started["turnId"])
    assert result["content"].strip() == "echo:forced"

    soft, forced, after = (body(r) for r in fake.requests)
    assert soft["tool_choice"] == {"type": "auto"} and "thinking" in soft
    assert "You MUST call the `echo` tool" in soft["system"][0]["text"]
    assert forced["tool_choice"] == {"type": "tool", "name": "echo"}
    assert "thinking" not in forced and "system" not in forced
    note = "Your previous answer did not call the `echo` tool. Call it now."
    assert plain(forced["messages"][-2]["content"]) == [
        {"type": "text", "text": "I would rather not."}
    ]
    assert plain(forced["messages"][-1]["content"]) == [{"type": "text", "text": note}]
    # The tool cycle began without a signed thinking block, so it continues without.
    assert "thinking" not in after and after["tool_choice"] == {"type": "auto"}
    persisted = disk_events(home, started["conversationId"])
    [retry] = [e for e in persisted if e["type"] == "forced_tool_retry"]
    assert (retry["tool"], retry["message"]) == ("echo", note)
    messages = [a["message"] for a in answers(home, started["conversationId"]) if a["message"]]
    assert messages == ["I would rather not.", "done"]
