"""What a model call sends, now that a provider's own client hands its requests to the
transport directly (jpd/llm/transport.py `StreamingPost`): the client's default headers,
each overridden by the provider's of the same name, the key's header, the body whole;
and no cookie a server set, on the next call."""

from __future__ import annotations

import json

import httpx

from jpd.llm.anthropic import AnthropicProvider
from jpd.llm.base import Finish
from jpd.llm.openai import OpenAIProvider
from tests.fixtures.fake_llm_server import FakeLLMServer
from tests.fixtures.llm_support import ANTHROPIC_KEY, OPENAI_KEY, ask, collect
from tests.fixtures.llm_wire import a_text_answer, o_text_answer, stream_reply


async def test_an_anthropic_call_sends_the_clients_defaults_under_its_own_headers(
    server: FakeLLMServer, anthropic: AnthropicProvider
) -> None:
    server.push(stream_reply(*a_text_answer("Hi")))
    events = await collect(anthropic.stream(ask("hello")))
    assert any(isinstance(e, Finish) for e in events)
    (request,) = server.requests
    headers = request.headers
    assert request.method == "POST" and request.path == "/v1/messages"
    assert headers["accept"] == "text/event-stream"  # the provider's, not httpx's */*
    assert headers["content-type"] == "application/json"
    assert headers["x-api-key"] == ANTHROPIC_KEY
    assert headers["anthropic-version"]
    assert headers["user-agent"] == httpx.AsyncClient().headers["user-agent"]
    assert "gzip" in headers["accept-encoding"]
    assert headers["host"] == server.base_url.split("//", 1)[1]
    assert int(headers["content-length"]) == len(request.body)
    assert json.loads(request.body)["messages"][0]["content"][0]["text"] == "hello"


async def test_an_openai_call_sends_its_key_as_a_bearer_token(
    server: FakeLLMServer, openai: OpenAIProvider
) -> None:
    server.push(stream_reply(*o_text_answer("Hi")))
    await collect(openai.stream(ask("hello")))
    (request,) = server.requests
    assert request.headers["authorization"] == f"Bearer {OPENAI_KEY}"
    assert request.headers["accept"] == "text/event-stream"
    assert request.path == "/v1/chat/completions"


async def test_a_cookie_a_server_sets_is_not_sent_back(
    server: FakeLLMServer, anthropic: AnthropicProvider
) -> None:
    """A provider's client serves the turns of every client and key of the daemon: what
    one answer set must not follow the others."""
    server.push(
        stream_reply(*a_text_answer("Hi"), headers={"set-cookie": "session=abc; Path=/"}),
        stream_reply(*a_text_answer("Again")),
    )
    await collect(anthropic.stream(ask("hello")))
    await collect(anthropic.stream(ask("again")))
    assert len(server.requests) == 2
    assert "cookie" not in server.requests[1].headers
