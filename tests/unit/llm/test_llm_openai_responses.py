"""`openai/<model>` on the Responses API against a local server speaking its SSE events."""

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
from jpd.llm.errors import ContextOverflow, ProviderError
from jpd.llm.openai_responses import OpenAIResponsesProvider
from jpd.protocol.usage import TokenUsage
from tests.fixtures.fake_llm_server import Cut, FakeLLMServer, Reply, Send
from tests.fixtures.llm_support import (
    FAST_RETRIES,
    OPENAI_KEY,
    after_last_retry,
    ask,
    collect,
    retries,
    text_of,
)
from tests.fixtures.llm_wire import json_reply, sse, stream_reply

SEARCH = ToolDefinition(name="search", description="Search", parameters={"type": "object"})
USAGE = {
    "input_tokens": 50,
    "input_tokens_details": {"cached_tokens": 40},
    "output_tokens": 9,
    "output_tokens_details": {"reasoning_tokens": 6},
    "total_tokens": 59,
}


def ev(kind: str, **fields: Any) -> bytes:
    return sse({"type": kind, **fields}, event=kind)


def completed(status: str = "completed", **response: Any) -> bytes:
    kind = "response.completed" if status == "completed" else f"response.{status}"
    return ev(kind, response={"id": "resp_1", "status": status, "usage": USAGE, **response})


REASONING_ITEM = {
    "type": "reasoning",
    "id": "rs_1",
    "summary": [{"type": "summary_text", "text": "Think"}],
    "encrypted_content": "gAAAAENCRYPTED",
}


@pytest.fixture
async def responses(server: FakeLLMServer) -> AsyncIterator[OpenAIResponsesProvider]:
    provider = OpenAIResponsesProvider(
        base_url=f"{server.base_url}/v1",
        env={"OPENAI_API_KEY": OPENAI_KEY},
        timeout=5.0,
        retry_policy=FAST_RETRIES,
    )
    yield provider
    await provider.aclose()


async def test_streams_text_and_usage(
    responses: OpenAIResponsesProvider, server: FakeLLMServer
) -> None:
    server.push(
        stream_reply(
            ev("response.created", response={"id": "resp_1", "status": "in_progress"}),
            ev("response.output_text.delta", item_id="msg_1", output_index=0, delta="Hel"),
            ev("response.output_text.delta", item_id="msg_1", output_index=0, delta="lo"),
            completed(),
        )
    )
    events = await collect(responses.stream(ask("Hi", model="gpt-x", max_tokens=64, system="S")))
    assert text_of(events) == "Hello"
    assert events[-2:] == [
        UsageEvent(usage=TokenUsage(input_tokens=10, output_tokens=9, cache_read_tokens=40)),
        Finish(reason="end_turn"),
    ]
    (request,) = server.requests
    assert request.path == "/v1/responses"
    assert request.headers["authorization"] == f"Bearer {OPENAI_KEY}"
    body = json.loads(request.body)
    assert body == {
        "model": "gpt-x",
        "instructions": "S",
        "input": [{"role": "user", "content": "Hi"}],
        "max_output_tokens": 64,
        "store": False,
        "stream": True,
    }


async def test_reasoning_and_function_calls_are_carried_to_the_next_request(
    responses: OpenAIResponsesProvider, server: FakeLLMServer
) -> None:
    call = {
        "type": "function_call",
        "id": "fc_1",
        "call_id": "call_1",
        "name": "search",
        "arguments": '{"q":"x"}',
    }
    server.push(
        stream_reply(
            ev("response.reasoning_summary_part.added", item_id="rs_1", summary_index=0),
            ev("response.reasoning_summary_text.delta", item_id="rs_1", delta="Think"),
            ev("response.reasoning_summary_part.added", item_id="rs_1", summary_index=1),
            ev("response.reasoning_summary_text.delta", item_id="rs_1", delta="More"),
            ev("response.output_item.done", output_index=0, item=REASONING_ITEM),
            ev("response.function_call_arguments.delta", item_id="fc_1", delta='{"q"'),
            ev("response.output_item.done", output_index=1, item=call),
            completed(),
        )
    )
    request = ask("Find", model="o-x", tools=(SEARCH,), reasoning_effort="high")
    events = await collect(responses.stream(request))
    reasoning = "".join(e.text for e in events if isinstance(e, ReasoningDelta))
    assert reasoning == "Think\n\nMore"
    [signed] = [e for e in events if isinstance(e, ReasoningDelta) and e.signature]
    assert signed.signature is not None and signed.signature.startswith("openai:")
    [tool_call] = [e for e in events if isinstance(e, ToolCallEvent)]
    assert tool_call == ToolCallEvent(id="call_1", name="search", arguments={"q": "x"})
    assert events[-1] == Finish(reason="tool_use")
    first = json.loads(server.requests[0].body)
    assert first["reasoning"] == {"effort": "high", "summary": "auto"}
    assert first["include"] == ["reasoning.encrypted_content"]
    assert first["store"] is False
    assert first["tool_choice"] == "auto"

    server.push(stream_reply(ev("response.output_text.delta", delta="done"), completed()))
    follow = ModelRequest(
        model="o-x",
        messages=(
            UserMessage(content="Find"),
            AssistantMessage(
                reasoning=reasoning,
                reasoning_signature=signed.signature,
                tool_calls=(ToolCallPart(id="call_1", name="search", arguments={"q": "x"}),),
            ),
            ToolResultMessage(tool_call_id="call_1", content="found"),
        ),
        tools=(SEARCH,),
        tool_choice={"type": "tool", "name": "search"},
        reasoning_effort="high",
    )
    await collect(responses.stream(follow))
    second = json.loads(server.requests[1].body)
    assert second["input"][1:] == [
        REASONING_ITEM,
        {"type": "function_call", "call_id": "call_1", "name": "search", "arguments": '{"q":"x"}'},
        {"type": "function_call_output", "call_id": "call_1", "output": "found"},
    ]
    assert second["tool_choice"] == {"type": "function", "name": "search"}


async def test_another_providers_signature_is_not_sent(
    responses: OpenAIResponsesProvider, server: FakeLLMServer
) -> None:
    server.push(stream_reply(completed()))
    request = ModelRequest(
        model="o-x",
        messages=(
            UserMessage(content="a"),
            AssistantMessage(content="b", reasoning="r", reasoning_signature="gemini:U0lH"),
            UserMessage(content="c"),
        ),
    )
    await collect(responses.stream(request))
    assert json.loads(server.requests[0].body)["input"] == [
        {"role": "user", "content": "a"},
        {"role": "assistant", "content": "b"},
        {"role": "user", "content": "c"},
    ]


async def test_incomplete_is_max_tokens(
    responses: OpenAIResponsesProvider, server: FakeLLMServer
) -> None:
    server.push(
        stream_reply(
            ev("response.output_text.delta", delta="cut"),
            completed("incomplete", incomplete_details={"reason": "max_output_tokens"}),
        )
    )
    events = await collect(responses.stream(ask(model="gpt-x")))
    assert events[-1] == Finish(reason="max_tokens")


async def test_retries_on_cut_streams_and_server_errors(
    responses: OpenAIResponsesProvider, server: FakeLLMServer
) -> None:
    server.push(
        Reply(body=(Send(ev("response.output_text.delta", delta="par")), Cut())),
        json_reply(500, {"error": {"message": "boom", "type": "server_error", "code": None}}),
        stream_reply(ev("error", code="server_error", message="try again")),
        stream_reply(ev("response.output_text.delta", delta="whole"), completed()),
    )
    events = await collect(responses.stream(ask(model="gpt-x")))
    assert len(retries(events)) == 3
    assert text_of(after_last_retry(events)) == "whole"


async def test_failures_and_overflows(
    responses: OpenAIResponsesProvider, server: FakeLLMServer
) -> None:
    failed = {"code": "invalid_prompt", "message": f"bad {OPENAI_KEY}"}
    server.push(stream_reply(completed("failed", error=failed)))
    with pytest.raises(ProviderError) as caught:
        await collect(responses.stream(ask(model="gpt-x")))
    assert "invalid_prompt" in caught.value.message and OPENAI_KEY not in caught.value.message
    message = (
        "This model's maximum context length is 8192 tokens. However, your messages "
        "resulted in 9000 tokens."
    )
    body = {
        "error": {
            "message": message,
            "type": "invalid_request_error",
            "code": "context_length_exceeded",
        }
    }
    server.push(json_reply(400, body))
    with pytest.raises(ContextOverflow) as overflow:
        await collect(responses.stream(ask(model="gpt-x")))
    assert overflow.value.window == 8192


async def test_garbled_events_are_retried_and_bad_arguments_fail(
    responses: OpenAIResponsesProvider, server: FakeLLMServer
) -> None:
    bad_call = {"type": "function_call", "call_id": "c", "name": "search", "arguments": "{oops"}
    server.push(
        stream_reply(sse("{not json")),
        stream_reply(ev("response.output_item.done", item=bad_call), completed()),
    )
    with pytest.raises(ProviderError, match="invalid JSON arguments for tool `search`"):
        await collect(responses.stream(ask(model="gpt-x", tools=(SEARCH,))))
    assert len(server.requests) == 2
