"""The Ollama provider against a local server speaking `/api/chat` NDJSON."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from jpd.llm.base import (
    AssistantMessage,
    Finish,
    ModelRequest,
    ToolCallEvent,
    ToolCallPart,
    ToolDefinition,
    ToolResultMessage,
    UsageEvent,
    UserMessage,
)
from jpd.llm.errors import ContextOverflow, ProviderError
from jpd.llm.ollama import OllamaProvider, build_body
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
from tests.fixtures.llm_wire import json_reply

SEARCH = ToolDefinition(name="search", description="Search", parameters={"type": "object"})


def line(message: dict[str, Any] | None = None, **fields: Any) -> bytes:
    data: dict[str, Any] = {"model": "qwen3", "created_at": "2026-01-01T00:00:00Z"}
    data["message"] = {"role": "assistant", "content": "", **(message or {})}
    data.update(fields)
    data.setdefault("done", False)
    return (json.dumps(data) + "\n").encode()


def done(reason: str = "stop") -> bytes:
    return line(done=True, done_reason=reason, prompt_eval_count=21, eval_count=4)


def ndjson(*lines: bytes) -> Reply:
    return Reply(
        headers={"content-type": "application/x-ndjson"}, body=tuple(Send(x) for x in lines)
    )


@pytest.fixture
async def ollama(server: FakeLLMServer) -> AsyncIterator[OllamaProvider]:
    provider = OllamaProvider(
        base_url=server.base_url, timeout=5.0, retry_policy=FAST_RETRIES, context_window=8192
    )
    yield provider
    await provider.aclose()


async def test_streams_text_thinking_and_usage(
    ollama: OllamaProvider, server: FakeLLMServer
) -> None:
    # Lines split across network chunks, and the last one without its newline.
    raw = line({"thinking": "hmm"}) + line({"content": "Hel"}) + line({"content": "lo"})
    server.push(ndjson(raw[:17], raw[17:50], raw[50:], done().rstrip(b"\n")))
    events = await collect(
        ollama.stream(ask("Hi", model="qwen3", max_tokens=50, reasoning_effort="low"))
    )

    assert text_of(events) == "Hello"
    assert events[-2:] == [
        UsageEvent(usage=TokenUsage(input_tokens=21, output_tokens=4)),
        Finish(reason="end_turn"),
    ]
    (request,) = server.requests
    assert request.path == "/api/chat"
    assert "authorization" not in request.headers
    body = json.loads(request.body)
    assert body["think"] is True
    assert body["options"] == {"num_ctx": 8192, "num_predict": 50}
    assert body["stream"] is True


async def test_tool_calls_and_history(ollama: OllamaProvider, server: FakeLLMServer) -> None:
    calls = [{"function": {"name": "search", "arguments": {"q": "x"}}}]
    server.push(ndjson(line({"tool_calls": calls}), done()))
    events = await collect(ollama.stream(ask("Find", model="qwen3", tools=(SEARCH,))))
    (call,) = [e for e in events if isinstance(e, ToolCallEvent)]
    assert (call.name, call.arguments) == ("search", {"q": "x"}) and call.id
    assert events[-1] == Finish(reason="tool_use")
    assert json.loads(server.requests[0].body)["tools"][0]["function"]["name"] == "search"

    request = ModelRequest(
        model="qwen3",
        system="sys",
        messages=(
            UserMessage(content="Find"),
            AssistantMessage(
                reasoning="r",
                tool_calls=(ToolCallPart(id="c1", name="search", arguments={"q": "x"}),),
            ),
            ToolResultMessage(tool_call_id="c1", content="found"),
        ),
        tools=(SEARCH,),
        tool_choice={"type": "none"},
    )
    body = build_body(request)
    assert "tools" not in body
    assert body["messages"] == [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "Find"},
        {
            "role": "assistant",
            "content": "",
            "thinking": "r",
            "tool_calls": [{"function": {"name": "search", "arguments": {"q": "x"}}}],
        },
        {"role": "tool", "content": "found", "tool_name": "search"},
    ]


async def test_a_forced_tool_is_asked_for_in_the_system_prompt(
    ollama: OllamaProvider, server: FakeLLMServer
) -> None:
    server.push(ndjson(line({"content": "a"}), done()))
    request = ask(
        "Find", model="qwen3", tools=(SEARCH,), tool_choice={"type": "tool", "name": "search"}
    )
    await collect(ollama.stream(request))
    body = json.loads(server.requests[0].body)
    assert body["messages"][0] == {
        "role": "system",
        "content": "IMPORTANT: You MUST call the `search` tool in your response.",
    }
    assert [t["function"]["name"] for t in body["tools"]] == ["search"]


async def test_length_is_max_tokens(ollama: OllamaProvider, server: FakeLLMServer) -> None:
    server.push(ndjson(line({"content": "a"}), done("length")))
    events = await collect(ollama.stream(ask(model="qwen3")))
    assert events[-1] == Finish(reason="max_tokens")


async def test_cut_streams_and_busy_servers_are_retried(
    ollama: OllamaProvider, server: FakeLLMServer
) -> None:
    server.push(
        Reply(body=(Send(line({"content": "par"})), Cut())),
        json_reply(503, {"error": "server busy"}),
        ndjson(line({"content": "whole"})),
        ndjson(line({"content": "ok"}), done()),
    )
    events = await collect(ollama.stream(ask(model="qwen3")))
    assert len(retries(events)) == 3
    assert text_of(after_last_retry(events)) == "ok"


async def test_errors(ollama: OllamaProvider, server: FakeLLMServer) -> None:
    server.push(json_reply(404, {"error": "model 'nope' not found"}))
    with pytest.raises(ProviderError, match="not found"):
        await collect(ollama.stream(ask(model="nope")))
    server.push(ndjson(line({"content": "a"}), b'{"error": "model runner crashed"}\n'))
    with pytest.raises(ProviderError, match="runner crashed"):
        await collect(ollama.stream(ask(model="qwen3")))
    server.push(json_reply(400, {"error": "the input length exceeds the context length"}))
    with pytest.raises(ContextOverflow):
        await collect(ollama.stream(ask(model="qwen3")))


async def test_model_names_from_tags(ollama: OllamaProvider, server: FakeLLMServer) -> None:
    tags = {"models": [{"name": "qwen3:8b", "model": "qwen3:8b"}, {"name": "llama3.2:latest"}]}
    server.push(json_reply(200, tags))
    assert await ollama.model_names() == ["llama3.2:latest", "qwen3:8b"]
    assert server.requests[-1].method == "GET" and server.requests[-1].path == "/api/tags"


def test_bodies_validate_against_the_ollama_types() -> None:
    ollama_types = pytest.importorskip("ollama._types")
    from jpd.conversation.events import ToolImage

    image = ToolImage(mime_type="image/png", data="iVBORw0KGgo=")
    request = ModelRequest(
        model="qwen3",
        system="sys",
        messages=(
            UserMessage(content="look", images=(image,)),
            AssistantMessage(
                content="x",
                reasoning="r",
                tool_calls=(ToolCallPart(id="c1", name="search", arguments={"q": "x"}),),
            ),
            ToolResultMessage(tool_call_id="c1", content="found"),
        ),
        tools=(SEARCH,),
        max_tokens=10,
        temperature=0.2,
        reasoning_effort="high",
    )
    body = build_body(request, 4096)
    ollama_types.ChatRequest.model_validate(body)
    for message in body["messages"]:
        # The SDK holds images as `Image` objects, serialised as the base64 text sent.
        images = [ollama_types.Image(value=data) for data in message.get("images", ())]
        checked = ollama_types.Message.model_validate({**message, "images": images or None})
        assert [image.model_dump() for image in images] == message.get("images", [])
        assert checked.role == message["role"]
    ollama_types.Options.model_validate(body["options"])
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}}
    structured = build_body(request.model_copy(update={"response_schema": schema}))
    assert ollama_types.ChatRequest.model_validate(structured).format == schema


async def test_garbled_lines_are_retried_and_bad_arguments_fail(
    ollama: OllamaProvider, server: FakeLLMServer
) -> None:
    server.push(
        ndjson(b'{"message": {"content": "x"\n'),
        ndjson(line({"content": "fine"}), done()),
    )
    events = await collect(ollama.stream(ask(model="qwen3")))
    assert len(retries(events)) == 1 and text_of(after_last_retry(events)) == "fine"
    calls = [{"function": {"name": "search", "arguments": "not an object"}}]
    server.push(ndjson(line({"tool_calls": calls}), done()))
    with pytest.raises(ProviderError, match="non-object arguments"):
        await collect(ollama.stream(ask(model="qwen3", tools=(SEARCH,))))


async def test_listing_fails_in_one_line_naming_the_server(
    ollama: OllamaProvider, server: FakeLLMServer
) -> None:
    server.push(json_reply(500, {"error": "boom"}))
    with pytest.raises(ProviderError, match=r"^ollama: cannot list the models at http://"):
        await ollama.model_names()
    server.push(Reply(headers={"content-type": "application/json"}, body=(Send(b"<html>"),)))
    with pytest.raises(ProviderError, match="cannot list the models"):
        await ollama.model_names()
    # Odd shapes list what they can: no `models`, entries that are not objects or named.
    server.push(json_reply(200, {"tags": []}))
    assert await ollama.model_names() == []
    server.push(json_reply(200, {"models": ["x", {"name": 3}, {"name": "ok:1b"}]}))
    assert await ollama.model_names() == ["ok:1b"]


async def test_a_server_that_is_down_is_unavailable_in_jp_models() -> None:
    from jpd.config import Config
    from jpd.llm.registry import ProviderRegistry

    with FakeLLMServer() as down:
        base = down.base_url  # a port nothing listens on once the server is closed
    cfg = Config.model_validate({"providers": {"ollama": {"base_url": base}}})
    models, problem = await ProviderRegistry({}).server_models("ollama", cfg)
    assert models is None and problem is not None
    assert problem.startswith(f"ollama: cannot list the models at {base}")
    assert "\n" not in problem
