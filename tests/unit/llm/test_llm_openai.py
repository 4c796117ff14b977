"""The OpenAI / OpenAI-compatible provider against a local server speaking Chat Completions SSE."""

from __future__ import annotations

import json

import pytest

from jpd.llm.base import (
    Finish,
    ReasoningDelta,
    ToolCallEvent,
    ToolDefinition,
    UsageEvent,
)
from jpd.llm.errors import ProviderError, ProviderUnavailable
from jpd.llm.openai import OpenAIProvider
from jpd.llm.openai_request import build_body
from jpd.llm.request_build import encode_body
from jpd.protocol.usage import TokenUsage
from tests.fixtures.fake_llm_server import Cut, Drop, FakeLLMServer, Reply, Script, Send
from tests.fixtures.llm_support import (
    FAST_RETRIES,
    OPENAI_KEY,
    after_last_retry,
    ask,
    collect,
    retries,
    text_of,
)
from tests.fixtures.llm_wire import (
    json_reply,
    o_chunk,
    o_done,
    o_text_answer,
    o_usage,
    sse,
    stream_reply,
)

SEARCH = ToolDefinition(name="search", description="Search", parameters={"type": "object"})


def clean_answer() -> Reply:
    return stream_reply(*o_text_answer("Hello", ", ", "world"))


def error_body(message: str, etype: str, code: str | None = None) -> dict[str, object]:
    return {"error": {"message": message, "type": etype, "param": None, "code": code}}


async def test_streams_text_with_usage(openai: OpenAIProvider, server: FakeLLMServer) -> None:
    server.push(stream_reply(*o_text_answer("Hel", "lo", usage=o_usage(30, 2, cached=20))))
    events = await collect(openai.stream(ask("Hi", model="gpt-x", max_tokens=64)))

    # Deltas read together come merged (protocol.md 7.2): the text is what counts.
    assert text_of(events) == "Hello"
    assert events[-2:] == [
        UsageEvent(usage=TokenUsage(input_tokens=10, output_tokens=2, cache_read_tokens=20)),
        Finish(reason="end_turn"),
    ]
    (request,) = server.requests
    assert (request.method, request.path) == ("POST", "/v1/chat/completions")
    assert request.headers["authorization"] == f"Bearer {OPENAI_KEY}"
    body = json.loads(request.body)
    assert body["model"] == "gpt-x"
    assert body["max_completion_tokens"] == 64
    assert body["stream"] is True
    assert request.body == encode_body(build_body(ask("Hi", model="gpt-x", max_tokens=64)))


async def test_tool_call_deltas_are_assembled(
    openai: OpenAIProvider, server: FakeLLMServer
) -> None:
    def call(
        index: int, arguments: str, call_id: str | None = None, name: str | None = None
    ) -> bytes:
        fragment: dict[str, object] = {"index": index, "function": {"arguments": arguments}}
        if call_id:
            fragment["id"] = call_id
            fragment["type"] = "function"
            fragment["function"] = {"name": name, "arguments": arguments}
        return o_chunk({"tool_calls": [fragment]})

    server.push(
        stream_reply(
            o_chunk({"role": "assistant", "content": None}),
            call(0, "", "call_a", "search"),
            call(0, '{"qu'),
            call(1, "", "call_b", "search"),
            call(0, 'ery": "caf\\u00'),
            call(1, '{"query":'),
            call(0, 'e9"}'),
            call(1, ' "tea"}'),
            o_chunk({}, finish_reason="tool_calls"),
            o_chunk(usage=o_usage(8, 9), choices=False),
            o_done(),
        )
    )
    events = await collect(openai.stream(ask(tools=(SEARCH,))))
    assert [e for e in events if isinstance(e, ToolCallEvent)] == [
        ToolCallEvent(id="call_a", name="search", arguments={"query": "café"}),
        ToolCallEvent(id="call_b", name="search", arguments={"query": "tea"}),
    ]
    assert events[-1] == Finish(reason="tool_use")


async def test_compatible_server_without_key_and_with_reasoning(server: FakeLLMServer) -> None:
    provider = OpenAIProvider.compatible(base_url=f"{server.base_url}/v1", env={})
    server.push(
        stream_reply(
            o_chunk({"role": "assistant", "reasoning_content": "Thinking..."}),
            o_chunk({"reasoning": " more."}),
            o_chunk({"content": "Done."}),
            # Ollama-style: tool calls whole in one delta, arguments as an object, no id,
            # and finish_reason "stop".
            o_chunk(
                {
                    "tool_calls": [
                        {"index": 0, "function": {"name": "search", "arguments": {"q": 1}}}
                    ]
                }
            ),
            o_chunk({}, finish_reason="stop"),
            o_done(),
        )
    )
    try:
        events = await collect(provider.stream(ask(model="llama3", max_tokens=10)))
    finally:
        await provider.aclose()
    # Pieces read together may come merged (protocol.md 7.2): compare the text.
    reasoning = "".join(e.text for e in events if isinstance(e, ReasoningDelta))
    assert reasoning == "Thinking... more."
    assert text_of(events) == "Done."
    (tool_call,) = [e for e in events if isinstance(e, ToolCallEvent)]
    assert (tool_call.name, tool_call.arguments) == ("search", {"q": 1})
    assert tool_call.id.startswith("call_")
    assert events[-1] == Finish(reason="tool_use")
    request = server.requests[0]
    assert "authorization" not in request.headers
    assert json.loads(request.body)["max_tokens"] == 10
    assert provider.name == "openai-compatible"


async def test_compatible_server_with_optional_key(server: FakeLLMServer) -> None:
    provider = OpenAIProvider.compatible(
        base_url=server.base_url, api_key_env="ROUTER_KEY", env={"ROUTER_KEY": "r-1"}
    )
    server.push(clean_answer())
    try:
        await collect(provider.stream(ask()))
    finally:
        await provider.aclose()
    assert server.requests[0].headers["authorization"] == "Bearer r-1"
    assert server.requests[0].path == "/chat/completions"


async def test_compatible_without_base_url_says_what_to_set() -> None:
    provider = OpenAIProvider.compatible(base_url=None, env={})
    with pytest.raises(ProviderUnavailable, match=r"set providers\.openai_compatible\.base_url"):
        await collect(provider.stream(ask()))
    await provider.aclose()


async def test_missing_key_names_the_variable(server: FakeLLMServer) -> None:
    provider = OpenAIProvider(base_url=server.base_url, env={})
    with pytest.raises(ProviderUnavailable, match="set the OPENAI_API_KEY environment variable"):
        await collect(provider.stream(ask()))
    await provider.aclose()
    assert server.requests == []


async def test_openai_base_url_from_environment(server: FakeLLMServer) -> None:
    provider = OpenAIProvider(env={"OPENAI_API_KEY": "k", "OPENAI_BASE_URL": server.base_url})
    server.push(clean_answer())
    try:
        assert text_of(await collect(provider.stream(ask()))) == "Hello, world"
    finally:
        await provider.aclose()
    assert OPENAI_KEY not in repr(provider)


RETRYABLE: dict[str, Script] = {
    "http_429": json_reply(
        429,
        error_body("Rate limit reached", "requests", "rate_limit_exceeded"),
        {"retry-after-ms": "5"},
    ),
    "http_500": json_reply(500, error_body("The server had an error", "server_error")),
    "http_503": json_reply(503, {"detail": "upstream unavailable"}),
    "error_chunk_mid_stream": stream_reply(
        o_chunk({"content": "part"}),
        sse({"error": {"message": "boom", "type": "server_error"}}),
    ),
    "connection_reset": Drop(),
    "ended_without_done_or_finish": stream_reply(o_chunk({"content": "part"})),
    "cut_mid_chunk": Reply(
        headers={"content-type": "text/event-stream"},
        body=(Send(o_chunk({"content": "part"})), Send(o_chunk({"content": "x"})[:20]), Cut()),
    ),
}


@pytest.mark.parametrize("failure", RETRYABLE.values(), ids=RETRYABLE.keys())
async def test_retryable_failures(
    openai: OpenAIProvider, server: FakeLLMServer, failure: Script
) -> None:
    server.push(failure, clean_answer())
    events = await collect(openai.stream(ask()))
    assert len(retries(events)) == 1
    assert text_of(after_last_retry(events)) == "Hello, world"
    assert len({r.body for r in server.requests}) == 1
    assert len(server.requests) == 2


async def test_retry_after_ms_is_the_delay(openai: OpenAIProvider, server: FakeLLMServer) -> None:
    server.push(RETRYABLE["http_429"], clean_answer())
    events = await collect(openai.stream(ask()))
    assert retries(events)[0].delay == 0.005


async def test_finish_then_eof_without_done_is_complete(
    openai: OpenAIProvider, server: FakeLLMServer
) -> None:
    server.push(stream_reply(o_chunk({"content": "All"}), o_chunk({}, finish_reason="length")))
    events = await collect(openai.stream(ask()))
    assert retries(events) == []
    assert text_of(events) == "All"
    assert events[-1] == Finish(reason="max_tokens")


@pytest.mark.parametrize(
    ("reply", "message"),
    [
        (
            json_reply(
                400, error_body("Invalid 'messages[0]'\n bad role", "invalid_request_error")
            ),
            "openai: request rejected (400 invalid_request_error): Invalid 'messages[0]' bad role",
        ),
        (
            json_reply(
                401,
                error_body(f"Incorrect API key provided: {OPENAI_KEY}", "invalid_request_error"),
            ),
            "openai: authentication failed (401): check the API key in $OPENAI_API_KEY",
        ),
        (
            json_reply(
                429,
                error_body(
                    "You exceeded your current quota", "insufficient_quota", "insufficient_quota"
                ),
            ),
            "openai: quota exceeded (429): You exceeded your current quota;"
            " check your plan and billing",
        ),
        (
            json_reply(
                404,
                error_body(
                    "The model `gpt-9` does not exist", "invalid_request_error", "model_not_found"
                ),
            ),
            "openai: not found (404): The model `gpt-9` does not exist;"
            " check the model name and base URL",
        ),
    ],
)
async def test_non_retryable_errors_are_one_line(
    openai: OpenAIProvider, server: FakeLLMServer, reply: Reply, message: str
) -> None:
    server.push(reply)
    with pytest.raises(ProviderError) as caught:
        await collect(openai.stream(ask()))
    assert caught.value.message == message
    assert OPENAI_KEY not in str(caught.value)
    assert len(server.requests) == 1


async def test_non_retryable_error_chunk(openai: OpenAIProvider, server: FakeLLMServer) -> None:
    server.push(
        stream_reply(
            sse({"error": {"message": "context too long", "type": "invalid_request_error"}})
        )
    )
    with pytest.raises(ProviderError, match=r"error mid-stream \(invalid_request_error\): context"):
        await collect(openai.stream(ask()))
    assert len(server.requests) == 1


async def test_connection_refused_gives_up_with_advice() -> None:
    provider = OpenAIProvider.compatible(
        base_url="http://127.0.0.1:9/v1", env={}, retry_policy=FAST_RETRIES
    )
    with pytest.raises(ProviderError) as caught:
        await collect(provider.stream(ask()))
    await provider.aclose()
    assert caught.value.message.startswith(
        "openai-compatible: cannot connect to http://127.0.0.1:9"
    )
    assert "check the base URL" in caught.value.message
    assert "gave up after 4 attempts" in caught.value.message
