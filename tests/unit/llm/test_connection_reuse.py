"""A streamed answer read to its final event leaves the HTTP connection open for the
next model call (jpd/llm/stream_reader.py `_drain`): a new connection per call would
cost a TCP and, against a hosted API, a TLS handshake before every request."""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio
import pytest

from jpd.llm import stream_reader
from jpd.llm.anthropic import AnthropicProvider
from jpd.llm.base import Finish, TextDelta
from jpd.llm.openai import OpenAIProvider
from tests.fixtures.fake_llm_server import FakeLLMServer
from tests.fixtures.llm_support import ask, collect
from tests.fixtures.llm_wire import a_text_answer, o_text_answer, stream_reply


async def test_anthropic_calls_share_one_connection(
    server: FakeLLMServer, anthropic: AnthropicProvider
) -> None:
    for _ in range(3):
        server.push(stream_reply(*a_text_answer("Hi")))
        events = await collect(anthropic.stream(ask("hello")))
        assert any(isinstance(e, Finish) for e in events)
    assert len(server.requests) == 3
    assert server.connections == 1


async def test_openai_calls_share_one_connection(
    server: FakeLLMServer, openai: OpenAIProvider
) -> None:
    for _ in range(3):
        server.push(stream_reply(*o_text_answer("Hi")))
        events = await collect(openai.stream(ask("hello")))
        assert any(isinstance(e, Finish) for e in events)
    assert server.connections == 1


async def test_a_body_that_goes_on_after_the_final_event_is_cut_off(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A server that keeps sending after the final event does not hold the stream."""
    monkeypatch.setattr(stream_reader, "DRAIN_TIMEOUT", 0.05)

    async def endless() -> AsyncIterator[bytes]:
        yield b"data: end\n\n"
        while True:
            await anyio.sleep(0.01)
            yield b": still here\n\n"

    def handle(data: str, out: stream_reader.Batch) -> bool:
        out.text("x")
        out.add(Finish(reason="end_turn"))
        return True

    with anyio.fail_after(5):
        events = [e async for e in stream_reader.stream_events(endless(), handle)]
    assert events == [TextDelta(text="x"), Finish(reason="end_turn")]
