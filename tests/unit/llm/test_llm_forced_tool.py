"""RFD 068 on the Anthropic provider: soft-forced tool choice and its single retry."""

from __future__ import annotations

import json

from jpd.llm.anthropic import AnthropicProvider
from jpd.llm.base import (
    Finish,
    ModelRequest,
    ToolCallEvent,
    ToolChoiceTool,
    ToolDefinition,
    UsageEvent,
)
from tests.fixtures.fake_llm_server import (
    FakeLLMServer,
    Reply,
)
from tests.fixtures.llm_support import (
    after_last_retry,
    ask,
    collect,
    retries,
    text_of,
)
from tests.fixtures.llm_wire import (
    a_block_start,
    a_block_stop,
    a_delta,
    a_error_body,
    a_message_delta,
    a_message_start,
    a_message_stop,
    a_text,
    a_text_answer,
    a_tool_answer,
    json_reply,
    stream_reply,
)

WEATHER = ToolDefinition(
    name="get_weather",
    description="Weather for a place",
    parameters={"type": "object", "properties": {"location": {"type": "string"}}},
)


def clean_answer() -> Reply:
    return stream_reply(*a_text_answer("Hello", ", ", "world"))


# --- RFD 068: soft-forced tool choice -------------------------------------------------

PATCHES = ToolDefinition(
    name="git_list_patches", description="List patches", parameters={"type": "object"}
)


def forced(reasoning: str = "low") -> ModelRequest:
    return ask(
        "Stage my changes",
        system="You are the stager.",
        tools=(WEATHER, PATCHES),
        tool_choice=ToolChoiceTool(name="git_list_patches"),
        reasoning_effort=reasoning,
    )


def thinking_text_answer(text: str) -> Reply:
    return stream_reply(
        a_message_start(),
        a_block_start(0, {"type": "thinking", "thinking": ""}),
        a_delta(0, {"type": "thinking_delta", "thinking": "I could just answer."}),
        a_delta(0, {"type": "signature_delta", "signature": "sig1"}),
        a_block_stop(0),
        a_block_start(1, {"type": "text", "text": ""}),
        a_text(1, text),
        a_block_stop(1),
        a_message_delta("end_turn", 7),
        a_message_stop(),
    )


async def test_soft_force_retries_once_without_reasoning(
    anthropic: AnthropicProvider, server: FakeLLMServer
) -> None:
    server.push(
        thinking_text_answer("Here is what I think."),
        stream_reply(*a_tool_answer("toolu_9", "git_list_patches", "{}")),
    )
    events = await collect(anthropic.stream(forced()))

    (retry,) = retries(events)
    assert retry.delay == 0
    assert "forced tool `git_list_patches` not called" in retry.reason
    final = after_last_retry(events)
    assert [e for e in final if isinstance(e, ToolCallEvent)] == [
        ToolCallEvent(id="toolu_9", name="git_list_patches", arguments={})
    ]
    assert final[-1] == Finish(reason="tool_use")
    # Usage covers both billed attempts.
    (usage,) = [e for e in events if isinstance(e, UsageEvent)]
    assert usage.usage.output_tokens == 7 + 20

    first, second = (json.loads(r.body) for r in server.requests)
    assert first["tool_choice"] == {"type": "auto"}
    assert "thinking" in first
    assert "You MUST call the `git_list_patches` tool" in first["system"][0]["text"]
    assert second["tool_choice"] == {"type": "tool", "name": "git_list_patches"}
    assert "thinking" not in second
    assert second["system"][0]["text"] == "You are the stager."
    assert second["messages"] == first["messages"]


async def test_soft_force_retries_at_most_once(
    anthropic: AnthropicProvider, server: FakeLLMServer
) -> None:
    server.push(
        thinking_text_answer("No tool."),
        stream_reply(*a_text_answer("Still no tool.")),
        clean_answer(),
    )
    events = await collect(anthropic.stream(forced()))
    assert len(retries(events)) == 1
    assert len(server.requests) == 2
    assert text_of(after_last_retry(events)) == "Still no tool."
    assert events[-1] == Finish(reason="end_turn")


async def test_soft_force_obeyed_needs_no_retry(
    anthropic: AnthropicProvider, server: FakeLLMServer
) -> None:
    server.push(stream_reply(*a_tool_answer("toolu_1", "git_list_patches", '{"a":', "1}")))
    events = await collect(anthropic.stream(forced()))
    assert retries(events) == []
    assert len(server.requests) == 1
    assert events[-1] == Finish(reason="tool_use")


async def test_forced_tool_without_reasoning_is_sent_as_is(
    anthropic: AnthropicProvider, server: FakeLLMServer
) -> None:
    server.push(stream_reply(*a_text_answer("text")))
    events = await collect(anthropic.stream(forced(reasoning="off")))
    assert retries(events) == []
    body = json.loads(server.requests[0].body)
    assert body["tool_choice"] == {"type": "tool", "name": "git_list_patches"}
    assert "IMPORTANT" not in body["system"][0]["text"]


async def test_soft_force_transient_failure_then_miss(
    anthropic: AnthropicProvider, server: FakeLLMServer
) -> None:
    # A network retry inside the first attempt does not count as the RFD 068 retry.
    server.push(
        json_reply(503, a_error_body("api_error", "Service unavailable")),
        thinking_text_answer("No tool."),
        stream_reply(*a_tool_answer("toolu_5", "git_list_patches", "{}")),
    )
    events = await collect(anthropic.stream(forced()))
    reasons = [r.reason for r in retries(events)]
    assert reasons[0] == "HTTP 503 api_error"
    assert "not called" in reasons[1]
    assert len(server.requests) == 3
    assert after_last_retry(events)[-1] == Finish(reason="tool_use")
