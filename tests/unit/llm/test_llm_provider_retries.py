"""Retries on the three newer wire formats (Gemini, Ollama, OpenAI's Responses API): the
shared HTTP part waits as a 429 asks, gives up after its retries in one line, and never
retries a request the server called bad. Each against a fake of its own wire format."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

import pytest

from jpd.llm.base import Provider
from jpd.llm.errors import ProviderError
from jpd.llm.google import GoogleProvider
from jpd.llm.ollama import OllamaProvider
from jpd.llm.openai_responses import OpenAIResponsesProvider
from tests.fixtures.fake_llm_server import FakeLLMServer, Reply
from tests.fixtures.llm_support import (
    FAST_RETRIES,
    OPENAI_KEY,
    after_last_retry,
    ask,
    collect,
    retries,
    text_of,
)
from tests.fixtures.llm_wire import json_reply, stream_reply
from tests.unit.llm.test_llm_google import KEY, chunk
from tests.unit.llm.test_llm_ollama import done, line, ndjson
from tests.unit.llm.test_llm_openai_responses import completed, ev


@dataclass(frozen=True)
class Wire:
    name: str
    make: Callable[[str], Provider]
    answer: Callable[[], Reply]
    """A whole answer saying "ok"."""
    error: Callable[[int], Reply]
    """An HTTP error as this API words it."""
    secret: str | None


WIRES = [
    Wire(
        "google",
        lambda base: GoogleProvider(
            base_url=f"{base}/v1beta",
            env={"GEMINI_API_KEY": KEY},
            timeout=5.0,
            retry_policy=FAST_RETRIES,
        ),
        lambda: stream_reply(chunk({"text": "ok"}, finish="STOP")),
        lambda status: json_reply(status, {"error": {"code": status, "message": "no"}}),
        KEY,
    ),
    Wire(
        "ollama",
        lambda base: OllamaProvider(base_url=base, timeout=5.0, retry_policy=FAST_RETRIES),
        lambda: ndjson(line({"content": "ok"}), done()),
        lambda status: json_reply(status, {"error": "no"}),
        None,
    ),
    Wire(
        "openai",
        lambda base: OpenAIResponsesProvider(
            base_url=f"{base}/v1",
            env={"OPENAI_API_KEY": OPENAI_KEY},
            timeout=5.0,
            retry_policy=FAST_RETRIES,
        ),
        lambda: stream_reply(ev("response.output_text.delta", delta="ok"), completed()),
        lambda status: json_reply(
            status, {"error": {"message": "no", "type": "server_error", "code": None}}
        ),
        OPENAI_KEY,
    ),
]


@pytest.fixture(params=WIRES, ids=[w.name for w in WIRES])
def wire(request: pytest.FixtureRequest) -> Wire:
    chosen: Wire = request.param
    return chosen


@pytest.fixture
async def provider(wire: Wire, server: FakeLLMServer) -> AsyncIterator[Provider]:
    made = wire.make(server.base_url)
    yield made
    await made.aclose()


async def test_a_429_is_waited_for_as_asked(
    wire: Wire, provider: Provider, server: FakeLLMServer
) -> None:
    busy = wire.error(429)
    busy.headers["retry-after"] = "0"
    server.push(busy, wire.answer())
    events = await collect(provider.stream(ask(model="m")))
    [retry] = retries(events)
    assert retry.attempt == 1
    assert text_of(after_last_retry(events)) == "ok"
    assert len(server.requests) == 2


async def test_gives_up_after_its_retries_in_one_line(
    wire: Wire, provider: Provider, server: FakeLLMServer
) -> None:
    server.push(*(wire.error(503) for _ in range(4)), wire.answer())
    with pytest.raises(ProviderError) as caught:
        await collect(provider.stream(ask(model="m")))
    assert len(server.requests) == 4  # the first try and three retries
    message = caught.value.message
    assert message.startswith(f"{wire.name}: ") and "gave up after 4 attempts" in message
    assert "\n" not in message
    assert wire.secret is None or wire.secret not in message


async def test_a_bad_request_is_not_retried(
    wire: Wire, provider: Provider, server: FakeLLMServer
) -> None:
    server.push(wire.error(400), wire.answer())
    with pytest.raises(ProviderError) as caught:
        await collect(provider.stream(ask(model="m")))
    assert len(server.requests) == 1
    assert not caught.value.retryable
