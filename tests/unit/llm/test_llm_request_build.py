"""Deterministic request bodies for Anthropic and OpenAI: shapes, cache breakpoints, bytes."""

from __future__ import annotations

import json
from typing import Any

import pytest

from jpd.llm import anthropic_request, openai_request
from jpd.llm.base import (
    AssistantMessage,
    ModelRequest,
    ToolCallPart,
    ToolChoiceAny,
    ToolChoiceAuto,
    ToolChoiceNone,
    ToolChoiceTool,
    ToolDefinition,
    ToolResultMessage,
    UserMessage,
)
from jpd.llm.errors import ProviderError
from jpd.llm.request_build import encode_body


def tools() -> tuple[ToolDefinition, ...]:
    # Built fresh each call: equal inputs, distinct objects.
    return (
        ToolDefinition(
            name="zeta",
            description="Last alphabetically, first in order",
            parameters={
                "type": "object",
                "properties": {"b": {"type": "string"}, "a": {"type": "integer"}},
                "required": ["b"],
            },
        ),
        ToolDefinition(name="alpha", description="Ünïcode", parameters={"type": "object"}),
    )


def conversation(**fields: Any) -> ModelRequest:
    return ModelRequest(
        model="m",
        system="You help.",
        messages=(
            UserMessage(content="List files"),
            AssistantMessage(
                content="Looking",
                reasoning="I should call zeta",
                reasoning_signature="sig",
                tool_calls=(ToolCallPart(id="c1", name="zeta", arguments={"b": "x", "a": 1}),),
            ),
            ToolResultMessage(tool_call_id="c1", content="a.txt"),
            AssistantMessage(content="There is a.txt"),
            UserMessage(content="Thanks; now delete it"),
        ),
        tools=tools(),
        **fields,
    )


BUILDERS = {
    "anthropic": lambda r: encode_body(anthropic_request.build_body(r)),
    "openai": lambda r: encode_body(openai_request.build_body(r)),
    "openai-compatible": lambda r: encode_body(openai_request.build_body(r, compatible=True)),
}


@pytest.mark.parametrize("build", BUILDERS.values(), ids=BUILDERS.keys())
def test_equal_requests_give_identical_bytes(build: Any) -> None:
    first = build(conversation(reasoning_effort="low", temperature=0.2))
    again = build(conversation(reasoning_effort="low", temperature=0.2))
    roundtrip = build(ModelRequest.model_validate_json(conversation().model_dump_json()))
    assert first == again
    assert roundtrip == build(conversation())
    # Tool order and schema key order are kept as given, never sorted.
    text = first.decode()
    assert text.index('"zeta"') < text.index('"alpha"')
    assert text.index('"b":{"type":"string"}') < text.index('"a":{"type":"integer"}')
    assert "Ünïcode" in text


def test_anthropic_body_shape() -> None:
    body = anthropic_request.build_body(conversation(temperature=0.5, max_tokens=100))
    assert list(body) == [
        "model",
        "max_tokens",
        "system",
        "messages",
        "tools",
        "tool_choice",
        "temperature",
        "stream",
    ]
    assert body["max_tokens"] == 100
    roles = [m["role"] for m in body["messages"]]
    assert roles == ["user", "assistant", "user", "assistant", "user"]
    assistant = body["messages"][1]["content"]
    # Thinking is off for this request, so the signed reasoning is not sent.
    assert [b["type"] for b in assistant] == ["text", "tool_use"]
    assert assistant[1] == {
        "type": "tool_use",
        "id": "c1",
        "name": "zeta",
        "input": {"b": "x", "a": 1},
    }
    assert body["messages"][2]["content"][0] == {
        "type": "tool_result",
        "tool_use_id": "c1",
        "content": "a.txt",
    }


def test_anthropic_cache_breakpoints() -> None:
    body = anthropic_request.build_body(conversation())
    assert body["system"][0]["cache_control"] == {"type": "ephemeral"}
    assert "cache_control" not in body["tools"][0]
    assert body["tools"][-1]["cache_control"] == {"type": "ephemeral"}
    marked = [
        (i, j)
        for i, message in enumerate(body["messages"])
        for j, block in enumerate(message["content"])
        if "cache_control" in block
    ]
    # The last two turns, whatever their role (an assistant turn with a large tool call
    # is then cached for the inquiry side request and the follow-up request).
    last_assistant = len(body["messages"][3]["content"]) - 1
    assert marked == [(3, last_assistant), (4, 0)]
    assert json.dumps(body).count("cache_control") == 4  # the API allows at most four


def test_anthropic_merges_consecutive_roles() -> None:
    request = ModelRequest(
        model="m",
        messages=(
            UserMessage(content="go"),
            AssistantMessage(tool_calls=(ToolCallPart(id="c1", name="t", arguments={}),)),
            ToolResultMessage(tool_call_id="c1", content="boom", is_error=True),
            UserMessage(content="and then?"),
        ),
    )
    body = anthropic_request.build_body(request)
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user"]
    last = body["messages"][-1]["content"]
    assert last[0]["is_error"] is True
    assert [b["type"] for b in last] == ["tool_result", "text"]
    assert "tools" not in body and "tool_choice" not in body


def test_anthropic_thinking_sends_signed_reasoning_back() -> None:
    request = conversation(reasoning_effort="high")
    body = anthropic_request.build_body(request)
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 16384}
    assert body["max_tokens"] == anthropic_request.DEFAULT_MAX_TOKENS + 16384
    assert body["messages"][1]["content"][0] == {
        "type": "thinking",
        "thinking": "I should call zeta",
        "signature": "sig",
    }


def test_anthropic_unsigned_reasoning_is_dropped() -> None:
    request = ModelRequest(
        model="m",
        messages=(
            UserMessage(content="q"),
            AssistantMessage(content="a", reasoning="r"),
            UserMessage(content="q2"),
        ),
        reasoning_effort="low",
    )
    body = anthropic_request.build_body(request)
    assert [b["type"] for b in body["messages"][1]["content"]] == ["text"]


@pytest.mark.parametrize(
    ("choice", "wire"),
    [
        (ToolChoiceAuto(), {"type": "auto"}),
        (ToolChoiceNone(), {"type": "none"}),
        (ToolChoiceAny(), {"type": "any"}),
        (ToolChoiceTool(name="zeta"), {"type": "tool", "name": "zeta"}),
    ],
)
def test_anthropic_tool_choice(choice: Any, wire: dict[str, str]) -> None:
    assert anthropic_request.build_body(conversation(tool_choice=choice))["tool_choice"] == wire


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"reasoning_effort": "low", "reasoning_budget": 500}, "below the minimum of 1024"),
        ({"reasoning_effort": "low", "max_tokens": 1024}, "must exceed the reasoning budget"),
        (
            {"reasoning_effort": "low", "tool_choice": ToolChoiceAny()},
            "cannot be combined with extended thinking",
        ),
    ],
)
def test_anthropic_rejects_impossible_settings(fields: dict[str, Any], message: str) -> None:
    request = ModelRequest(model="m", messages=(UserMessage(content="q"),), **fields)
    with pytest.raises(ProviderError, match=message):
        anthropic_request.build_body(request)


def test_openai_body_shape() -> None:
    body = openai_request.build_body(
        conversation(max_tokens=50, temperature=0.1, reasoning_effort="medium")
    )
    assert list(body) == [
        "model",
        "messages",
        "tools",
        "tool_choice",
        "max_completion_tokens",
        "temperature",
        "reasoning_effort",
        "stream",
        "stream_options",
    ]
    assert body["stream_options"] == {"include_usage": True}
    messages = body["messages"]
    assert messages[0] == {"role": "system", "content": "You help."}
    assert messages[2] == {
        "role": "assistant",
        "content": "Looking",
        "tool_calls": [
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "zeta", "arguments": '{"b":"x","a":1}'},
            }
        ],
    }
    assert messages[3] == {"role": "tool", "tool_call_id": "c1", "content": "a.txt"}
    assert body["tools"][0]["type"] == "function"
    assert body["tools"][0]["function"]["name"] == "zeta"


def test_openai_compatible_uses_max_tokens() -> None:
    body = openai_request.build_body(conversation(max_tokens=50), compatible=True)
    assert body["max_tokens"] == 50
    assert "max_completion_tokens" not in body


@pytest.mark.parametrize(
    ("choice", "wire"),
    [
        (ToolChoiceAuto(), "auto"),
        (ToolChoiceNone(), "none"),
        (ToolChoiceAny(), "required"),
        (ToolChoiceTool(name="zeta"), {"type": "function", "function": {"name": "zeta"}}),
    ],
)
def test_openai_tool_choice(choice: Any, wire: Any) -> None:
    assert openai_request.build_body(conversation(tool_choice=choice))["tool_choice"] == wire


def test_strict_flag_is_sent_only_when_set() -> None:
    strict = (tools()[0].model_copy(update={"strict": True}), tools()[1])
    a = anthropic_request.build_body(conversation().model_copy(update={"tools": strict}))
    o = openai_request.build_body(conversation().model_copy(update={"tools": strict}))
    assert a["tools"][0]["strict"] is True and "strict" not in a["tools"][1]
    assert o["tools"][0]["function"]["strict"] is True
    assert "strict" not in o["tools"][1]["function"]
