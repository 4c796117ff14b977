"""The Gemini provider against a local server speaking `streamGenerateContent?alt=sse`."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from jpd.llm.base import (
    AssistantMessage,
    Finish,
    ModelRequest,
    ReasoningDelta,
    ToolCallEvent,
    ToolCallPart,
    ToolDefinition,
    ToolResultMessage,
    UsageEvent,
    UserMessage,
)
from jpd.llm.errors import ContextOverflow, ProviderError, ProviderUnavailable
from jpd.llm.google import GoogleProvider
from jpd.protocol.usage import TokenUsage
from tests.fixtures.fake_llm_server import Cut, FakeLLMServer, Reply, Send
from tests.fixtures.llm_support import (
    FAST_RETRIES,
    after_last_retry,
    ask,
    collect,
    retries,
    text_of,
)
from tests.fixtures.llm_wire import json_reply, sse, stream_reply

KEY = "AIza-test-SECRET-4242424242"
SEARCH = ToolDefinition(name="search", description="Search", parameters={"type": "object"})


def chunk(*parts: dict[str, Any], finish: str | None = None, usage: bool = False) -> bytes:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": list(parts)}, "index": 0}
    if finish:
        candidate["finishReason"] = finish
    data: dict[str, Any] = {"candidates": [candidate], "modelVersion": "gemini-x"}
    if usage:
        data["usageMetadata"] = {
            "promptTokenCount": 40,
            "cachedContentTokenCount": 30,
            "candidatesTokenCount": 5,
            "thoughtsTokenCount": 7,
            "totalTokenCount": 52,
        }
    return sse(data)


@pytest.fixture
async def google(server: FakeLLMServer) -> AsyncIterator[GoogleProvider]:
    provider = GoogleProvider(
        base_url=f"{server.base_url}/v1beta",
        env={"GEMINI_API_KEY": KEY},
        timeout=5.0,
        retry_policy=FAST_RETRIES,
    )
    yield provider
    await provider.aclose()


async def test_streams_text_and_usage_with_the_key_in_a_header(
    google: GoogleProvider, server: FakeLLMServer
) -> None:
    server.push(
        stream_reply(
            chunk({"text": "Hel"}),
            chunk({"text": "lo"}, finish="STOP", usage=True),
        )
    )
    events = await collect(google.stream(ask("Hi", model="gemini-x", max_tokens=64)))

    assert text_of(events) == "Hello"
    assert events[-2:] == [
        UsageEvent(usage=TokenUsage(input_tokens=10, output_tokens=12, cache_read_tokens=30)),
        Finish(reason="end_turn"),
    ]
    (request,) = server.requests
    assert request.path == "/v1beta/models/gemini-x:streamGenerateContent?alt=sse"
    assert request.headers["x-goog-api-key"] == KEY
    assert KEY not in request.path
    body = json.loads(request.body)
    assert body["contents"] == [{"role": "user", "parts": [{"text": "Hi"}]}]
    assert body["generationConfig"] == {"maxOutputTokens": 64}


async def test_function_calls_thoughts_and_the_signature(
    google: GoogleProvider, server: FakeLLMServer
) -> None:
    server.push(
        stream_reply(
            chunk({"text": "Planning", "thought": True}),
            chunk(
                {"functionCall": {"name": "search", "args": {"q": "x"}}, "thoughtSignature": "SIG"},
                {"functionCall": {"name": "search", "args": {"q": "y"}}},
                finish="STOP",
                usage=True,
            ),
        )
    )
    request = ask("Find", model="gemini-x", tools=(SEARCH,), reasoning_effort="low")
    events = await collect(google.stream(request))

    assert [e.text for e in events if isinstance(e, ReasoningDelta)] == ["Planning", ""]
    signed = [e for e in events if isinstance(e, ReasoningDelta) and e.signature]
    assert [e.signature for e in signed] == ["gemini:SIG"]
    calls = [e for e in events if isinstance(e, ToolCallEvent)]
    assert [(c.name, c.arguments) for c in calls] == [
        ("search", {"q": "x"}),
        ("search", {"q": "y"}),
    ]
    assert all(c.id for c in calls) and calls[0].id != calls[1].id
    assert events[-1] == Finish(reason="tool_use")
    body = json.loads(server.requests[0].body)
    assert body["generationConfig"]["thinkingConfig"] == {
        "includeThoughts": True,
        "thinkingBudget": 1024,
    }
    assert body["tools"] == [
        {
            "functionDeclarations": [
                {
                    "name": "search",
                    "description": "Search",
                    "parametersJsonSchema": {"type": "object"},
                }
            ]
        }
    ]
    assert body["toolConfig"] == {"functionCallingConfig": {"mode": "AUTO"}}


async def test_history_sends_function_responses_and_the_signature_back(
    google: GoogleProvider, server: FakeLLMServer
) -> None:
    server.push(stream_reply(chunk({"text": "done"}, finish="STOP")))
    request = ModelRequest(
        model="gemini-x",
        system="Be brief",
        messages=(
            UserMessage(content="Find"),
            AssistantMessage(
                reasoning="",
                reasoning_signature="gemini:SIG",
                tool_calls=(ToolCallPart(id="c1", name="search", arguments={"q": "x"}),),
            ),
            ToolResultMessage(tool_call_id="c1", content="found", is_error=False),
        ),
        tools=(SEARCH,),
        tool_choice={"type": "tool", "name": "search"},
    )
    await collect(google.stream(request))
    body = json.loads(server.requests[0].body)
    assert body["systemInstruction"] == {"parts": [{"text": "Be brief"}]}
    assert body["contents"][1:] == [
        {
            "role": "model",
            "parts": [
                {
                    "functionCall": {"id": "c1", "name": "search", "args": {"q": "x"}},
                    "thoughtSignature": "SIG",
                }
            ],
        },
        {
            "role": "user",
            "parts": [
                {
                    "functionResponse": {
                        "id": "c1",
                        "name": "search",
                        "response": {"content": "found"},
                    }
                }
            ],
        },
    ]
    assert body["toolConfig"] == {
        "functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["search"]}
    }


async def test_another_providers_signature_is_not_sent(
    google: GoogleProvider, server: FakeLLMServer
) -> None:
    server.push(stream_reply(chunk({"text": "ok"}, finish="STOP")))
    request = ModelRequest(
        model="gemini-x",
        messages=(
            UserMessage(content="Find"),
            AssistantMessage(
                reasoning="thinking",
                reasoning_signature="anthropic-signature",
                tool_calls=(ToolCallPart(id="c1", name="search", arguments={}),),
            ),
            ToolResultMessage(tool_call_id="c1", content="x", is_error=True),
        ),
    )
    await collect(google.stream(request))
    contents = json.loads(server.requests[0].body)["contents"]
    assert contents[1]["parts"][0]["thoughtSignature"] == "skip_thought_signature_validator"
    assert contents[2]["parts"][0]["functionResponse"]["response"] == {"error": "x"}


async def test_a_cut_stream_is_retried_and_a_503_too(
    google: GoogleProvider, server: FakeLLMServer
) -> None:
    server.push(
        Reply(
            headers={"content-type": "text/event-stream"},
            body=(Send(chunk({"text": "par"})), Cut()),
        ),
        json_reply(503, {"error": {"code": 503, "message": "overloaded", "status": "UNAVAILABLE"}}),
        stream_reply(chunk({"text": "whole"}, finish="STOP")),
    )
    events = await collect(google.stream(ask(model="gemini-x")))
    assert len(retries(events)) == 2
    assert text_of(after_last_retry(events)) == "whole"


async def test_a_stream_without_finish_reason_is_retried(
    google: GoogleProvider, server: FakeLLMServer
) -> None:
    server.push(
        stream_reply(chunk({"text": "half"})), stream_reply(chunk({"text": "ok"}, finish="STOP"))
    )
    events = await collect(google.stream(ask(model="gemini-x")))
    assert len(retries(events)) == 1 and text_of(after_last_retry(events)) == "ok"


async def test_errors_are_one_line_without_the_key(
    google: GoogleProvider, server: FakeLLMServer
) -> None:
    server.push(
        json_reply(
            400,
            {
                "error": {
                    "code": 400,
                    "message": f"API key {KEY} not valid",
                    "status": "INVALID_ARGUMENT",
                }
            },
        )
    )
    with pytest.raises(ProviderError) as caught:
        await collect(google.stream(ask(model="gemini-x")))
    assert KEY not in caught.value.message and "400" in caught.value.message


async def test_the_token_limit_refusal_is_an_overflow_with_its_window(
    google: GoogleProvider, server: FakeLLMServer
) -> None:
    message = "The input token count (9000) exceeds the maximum number of tokens allowed (8192)."
    server.push(
        json_reply(400, {"error": {"code": 400, "message": message, "status": "INVALID_ARGUMENT"}})
    )
    with pytest.raises(ContextOverflow) as caught:
        await collect(google.stream(ask(model="gemini-x")))
    assert (caught.value.window, caught.value.requested) == (8192, 9000)


async def test_a_blocked_prompt_and_an_error_chunk_fail_the_call(
    google: GoogleProvider, server: FakeLLMServer
) -> None:
    server.push(stream_reply(sse({"promptFeedback": {"blockReason": "SAFETY"}})))
    with pytest.raises(ProviderError, match="blocked"):
        await collect(google.stream(ask(model="gemini-x")))
    server.push(
        stream_reply(sse({"error": {"code": 500, "message": "boom", "status": "INTERNAL"}})),
        stream_reply(chunk({"text": "ok"}, finish="MAX_TOKENS")),
    )
    events = await collect(google.stream(ask(model="gemini-x")))
    assert len(retries(events)) == 1 and events[-1] == Finish(reason="max_tokens")


async def test_images_go_as_inline_data(google: GoogleProvider, server: FakeLLMServer) -> None:
    from jpd.conversation.events import ToolImage

    server.push(stream_reply(chunk({"text": "a cat"}, finish="STOP")))
    image = ToolImage(mime_type="image/png", data="iVBORw0KGgo=")
    request = ModelRequest(
        model="gemini-x", messages=(UserMessage(content="What?", images=(image,)),)
    )
    await collect(google.stream(request))
    parts = json.loads(server.requests[0].body)["contents"][0]["parts"]
    assert parts[1] == {"inlineData": {"mimeType": "image/png", "data": "iVBORw0KGgo="}}


async def test_a_missing_key_names_the_variable(server: FakeLLMServer) -> None:
    provider = GoogleProvider(base_url=server.base_url, env={})
    with pytest.raises(ProviderUnavailable, match="GEMINI_API_KEY"):
        await collect(provider.stream(ask(model="gemini-x")))
    await provider.aclose()
    assert server.requests == []


async def test_garbled_events_are_retried_and_bad_arguments_fail(
    google: GoogleProvider, server: FakeLLMServer
) -> None:
    server.push(
        stream_reply(sse("{not json")),
        stream_reply(chunk({"functionCall": {"name": "search", "args": [1]}}, finish="STOP")),
    )
    with pytest.raises(ProviderError, match="non-object arguments for tool `search`"):
        await collect(google.stream(ask(model="gemini-x", tools=(SEARCH,))))
    assert len(server.requests) == 2
    # A model name cannot reach another path of the server.
    server.push(stream_reply(chunk({"text": "ok"}, finish="STOP")))
    await collect(google.stream(ask(model="../../x?y")))
    assert server.requests[-1].path.startswith("/v1beta/models/..%2F..%2Fx%3Fy:")
