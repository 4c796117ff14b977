"""The Anthropic provider against a local server speaking the Messages streaming wire format."""

from __future__ import annotations

import json

import anyio
import pytest

from jpd.llm.anthropic import AnthropicProvider
from jpd.llm.anthropic_request import build_body
from jpd.llm.base import (
    Finish,
    ReasoningDelta,
    TextDelta,
    ToolCallEvent,
    ToolDefinition,
    UsageEvent,
)
from jpd.llm.errors import ProviderError, ProviderUnavailable
from jpd.llm.request_build import encode_body
from jpd.protocol.usage import TokenUsage
from tests.fixtures.fake_llm_server import (
    FakeLLMServer,
    Pause,
    Reply,
    Send,
)
from tests.fixtures.llm_support import (
    ANTHROPIC_KEY,
    ask,
    collect,
    text_of,
)
from tests.fixtures.llm_wire import (
    a_block_start,
    a_block_stop,
    a_delta,
    a_message_delta,
    a_message_start,
    a_message_stop,
    a_text,
    a_text_answer,
    a_tool_answer,
    sse,
    stream_reply,
)

WEATHER = ToolDefinition(
    name="get_weather",
    description="Weather for a place",
    parameters={"type": "object", "properties": {"location": {"type": "string"}}},
)


def clean_answer() -> Reply:
    return stream_reply(*a_text_answer("Hello", ", ", "world"))


async def test_streams_text_and_sends_a_wellformed_request(
    anthropic: AnthropicProvider, server: FakeLLMServer
) -> None:
    server.push(clean_answer())
    events = await collect(anthropic.stream(ask("Hi", model="claude-x")))

    # Deltas read together come merged (protocol.md 7.2): the text is what counts.
    assert text_of(events) == "Hello, world"
    assert events[-1] == Finish(reason="end_turn")
    assert isinstance(events[-2], UsageEvent)
    (request,) = server.requests
    assert (request.method, request.path) == ("POST", "/v1/messages")
    assert request.headers["x-api-key"] == ANTHROPIC_KEY
    assert request.headers["anthropic-version"] == "2023-06-01"
    assert request.headers["content-type"] == "application/json"
    body = json.loads(request.body)
    assert body["model"] == "claude-x"
    assert body["stream"] is True
    assert body["messages"][0]["content"][0]["text"] == "Hi"


async def test_tool_call_arguments_split_mid_token(
    anthropic: AnthropicProvider, server: FakeLLMServer
) -> None:
    # Fragments split inside a key, inside a value and inside a \u escape.
    parts = ['{"loc', 'ation": "Par', "is, Fr", 'ance", "unit": "c\\u00', 'e9lsius"}']
    server.push(stream_reply(*a_tool_answer("toolu_01", "get_weather", *parts, text="Let me look")))
    events = await collect(anthropic.stream(ask("Weather?", tools=(WEATHER,))))

    assert text_of(events) == "Let me look"
    calls = [e for e in events if isinstance(e, ToolCallEvent)]
    assert calls == [
        ToolCallEvent(
            id="toolu_01",
            name="get_weather",
            arguments={"location": "Paris, France", "unit": "célsius"},
        )
    ]
    assert events[-1] == Finish(reason="tool_use")


async def test_tool_call_without_arguments(
    anthropic: AnthropicProvider, server: FakeLLMServer
) -> None:
    server.push(stream_reply(*a_tool_answer("toolu_02", "list_files")))
    events = await collect(anthropic.stream(ask(tools=(WEATHER,))))
    assert [e for e in events if isinstance(e, ToolCallEvent)] == [
        ToolCallEvent(id="toolu_02", name="list_files", arguments={})
    ]


async def test_utf8_split_across_network_chunks(
    anthropic: AnthropicProvider, server: FakeLLMServer
) -> None:
    frame = a_text(0, "héllo wörld")
    cut = frame.index("é".encode()) + 1  # inside the two-byte sequence
    frames = a_text_answer()
    body = [Send(f) for f in frames[:3]] + [Send(frame[:cut]), Send(frame[cut:])]
    body += [Send(f) for f in frames[3:]]
    server.push(Reply(headers={"content-type": "text/event-stream"}, body=tuple(body)))
    events = await collect(anthropic.stream(ask()))
    assert text_of(events) == "héllo wörld"


async def test_thinking_blocks_keep_their_signature(
    anthropic: AnthropicProvider, server: FakeLLMServer
) -> None:
    server.push(
        stream_reply(
            a_message_start(),
            a_block_start(0, {"type": "thinking", "thinking": ""}),
            a_delta(0, {"type": "thinking_delta", "thinking": "Let me think"}),
            a_delta(0, {"type": "thinking_delta", "thinking": " about it."}),
            a_delta(0, {"type": "signature_delta", "signature": "EqQBCgIYAhIM1gbc"}),
            a_block_stop(0),
            a_block_start(1, {"type": "text", "text": ""}),
            a_text(1, "Answer."),
            a_block_stop(1),
            a_message_delta("end_turn", 30),
            a_message_stop(),
        )
    )
    request = ask("Why?", reasoning_effort="medium", temperature=0.3)
    events = await collect(anthropic.stream(request))

    reasoning = [e for e in events if isinstance(e, ReasoningDelta)]
    assert "".join(e.text for e in reasoning) == "Let me think about it."
    # The signature comes alone, after the block's text (never merged into it).
    assert reasoning[-1] == ReasoningDelta(text="", signature="EqQBCgIYAhIM1gbc")
    assert all(e.signature is None for e in reasoning[:-1])
    assert text_of(events) == "Answer."
    body = json.loads(server.requests[0].body)
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 4096}
    assert body["max_tokens"] > 4096
    assert "temperature" not in body  # the API rejects it with thinking on


async def test_usage_includes_cache_figures(
    anthropic: AnthropicProvider, server: FakeLLMServer
) -> None:
    server.push(
        stream_reply(
            a_message_start(input_tokens=12, cache_read=2048, cache_creation=512),
            a_block_start(0, {"type": "text", "text": ""}),
            a_text(0, "ok"),
            # Unknown events and delta types must be ignored (API versioning policy).
            a_delta(0, {"type": "citations_delta", "citation": {"cited_text": "x"}}),
            sse({"type": "future_event", "x": 1}, event="future_event"),
            a_block_stop(0),
            a_message_delta("max_tokens", 42),
            a_message_stop(),
        )
    )
    events = await collect(anthropic.stream(ask()))
    assert events[-2:] == [
        UsageEvent(
            usage=TokenUsage(
                input_tokens=12,
                output_tokens=42,
                cache_read_tokens=2048,
                cache_creation_tokens=512,
            )
        ),
        Finish(reason="max_tokens"),
    ]


async def test_missing_key_names_the_variable(server: FakeLLMServer) -> None:
    provider = AnthropicProvider(base_url=server.base_url, env={})
    try:
        with pytest.raises(ProviderUnavailable, match="set the ANTHROPIC_API_KEY environment"):
            await collect(provider.stream(ask()))
    finally:
        await provider.aclose()
    assert server.requests == []


async def test_custom_key_variable_and_env_base_url(server: FakeLLMServer) -> None:
    provider = AnthropicProvider(
        api_key_env="MY_KEY",
        env={"MY_KEY": "k-123", "ANTHROPIC_BASE_URL": server.base_url + "/"},
    )
    server.push(clean_answer())
    try:
        events = await collect(provider.stream(ask()))
    finally:
        await provider.aclose()
    assert text_of(events) == "Hello, world"
    assert server.requests[0].headers["x-api-key"] == "k-123"
    assert server.requests[0].path == "/v1/messages"


async def test_key_never_in_repr(anthropic: AnthropicProvider) -> None:
    assert ANTHROPIC_KEY not in repr(anthropic)


async def test_sent_bytes_match_the_builder(
    anthropic: AnthropicProvider, server: FakeLLMServer
) -> None:
    server.push(clean_answer())
    request = ask("Héllo", tools=(WEATHER,), system="Be brief.")
    await collect(anthropic.stream(request))
    assert server.requests[0].body == encode_body(build_body(request))


async def test_strict_tools_send_the_beta_header(
    anthropic: AnthropicProvider, server: FakeLLMServer
) -> None:
    strict = WEATHER.model_copy(update={"strict": True})
    server.push(clean_answer())
    await collect(anthropic.stream(ask(tools=(strict,))))
    assert "structured-outputs" in server.requests[0].headers["anthropic-beta"]
    assert json.loads(server.requests[0].body)["tools"][0]["strict"] is True


async def test_closing_the_stream_early_is_clean(
    anthropic: AnthropicProvider, server: FakeLLMServer
) -> None:
    server.push(clean_answer(), clean_answer())
    async with anthropic.stream(ask()) as events:
        first = await anext(events)
    assert first == TextDelta(text="Hello")
    # The provider stays usable after an abandoned stream.
    assert text_of(await collect(anthropic.stream(ask()))) == "Hello, world"


async def test_cancelling_the_consumer_stops_the_stream(
    anthropic: AnthropicProvider, server: FakeLLMServer
) -> None:
    frames = a_text_answer("first", "never")
    stalled = Reply(
        headers={"content-type": "text/event-stream"},
        body=(*(Send(f) for f in frames[:4]), Pause(3600), *(Send(f) for f in frames[4:])),
    )
    server.push(stalled)
    seen: list[object] = []
    got_first = anyio.Event()

    async def consume() -> None:
        async with anthropic.stream(ask()) as events:
            async for event in events:
                seen.append(event)
                got_first.set()

    async with anyio.create_task_group() as group:
        group.start_soon(consume)
        await got_first.wait()
        group.cancel_scope.cancel()
    assert seen == [TextDelta(text="first")]


async def test_invalid_settings_fail_before_any_request(
    anthropic: AnthropicProvider, server: FakeLLMServer
) -> None:
    with pytest.raises(ProviderError, match="must exceed the reasoning budget"):
        await collect(anthropic.stream(ask(reasoning_effort="high", max_tokens=100)))
    assert server.requests == []
