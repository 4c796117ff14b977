"""On aiohttp's transport a streamed body is read from aiohttp's stream itself, not
through `httpx.Response.aiter_raw` (jpd/llm/transport.py `body_chunks`): the answer, the
connection kept for the next call, and a body cut or reset mid-stream (retried as a lost
connection, as httpx's errors are) are as they were through httpx."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from jpd.llm.anthropic import AnthropicProvider
from jpd.llm.base import Finish
from tests.fixtures.fake_llm_server import Cut, FakeLLMServer, Reply, Reset, Send
from tests.fixtures.llm_support import after_last_retry, ask, collect, retries, text_of
from tests.fixtures.llm_wire import (
    a_block_start,
    a_message_start,
    a_text,
    a_text_answer,
    stream_reply,
)


@pytest.fixture
def no_aiter_raw(monkeypatch: pytest.MonkeyPatch) -> None:
    def refused(self: httpx.Response, chunk_size: int | None = None) -> Any:
        raise AssertionError("the body was read through httpx's aiter_raw")

    monkeypatch.setattr(httpx.Response, "aiter_raw", refused)


@pytest.mark.usefixtures("no_aiter_raw")
async def test_answers_are_read_from_aiohttp_and_the_connection_is_kept(
    server: FakeLLMServer, anthropic: AnthropicProvider
) -> None:
    for text in ("Hello", "h\u00e9llo \U0001f600"):
        server.push(stream_reply(*a_text_answer(text)))
        events = await collect(anthropic.stream(ask()))
        assert text_of(events) == text
        assert events[-1] == Finish(reason="end_turn")
    assert server.connections == 1


CUT_SHORT = {
    "reset": Reply(
        headers={"content-type": "text/event-stream"},
        body=(Send(a_message_start()), Send(a_block_start(0, {"type": "text"})), Reset()),
    ),
    "cut mid-event": Reply(
        headers={"content-type": "text/event-stream"},
        body=(Send(a_message_start()), Send(a_text(0, "partial")[:25]), Cut()),
    ),
}


@pytest.mark.usefixtures("no_aiter_raw")
@pytest.mark.parametrize("failure", CUT_SHORT.values(), ids=CUT_SHORT.keys())
async def test_a_body_cut_short_is_retried_as_a_lost_connection(
    server: FakeLLMServer, anthropic: AnthropicProvider, failure: Reply
) -> None:
    server.push(failure, stream_reply(*a_text_answer("Hello, world")))
    events = await collect(anthropic.stream(ask()))
    assert [retry.reason for retry in retries(events)] == ["connection lost"]
    assert text_of(after_last_retry(events)) == "Hello, world"
