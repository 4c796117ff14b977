"""Structured output in the provider requests (jpd/llm/structured.py): OpenAI's native
`response_format`, Anthropic's forced `respond` tool turned back into text."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest

from jpd.core.structured import check_answer
from jpd.llm.anthropic_request import build_body as anthropic_body
from jpd.llm.base import Finish, ModelRequest, StreamEvent, TextDelta, ToolCallEvent, UserMessage
from jpd.llm.errors import ProviderError
from jpd.llm.openai_request import build_body as openai_body
from jpd.llm.structured import tool_call_as_text

SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}


def request() -> ModelRequest:
    return ModelRequest(model="m", messages=(UserMessage(content="hi"),), response_schema=SCHEMA)


def test_openai_sends_the_schema_natively() -> None:
    body = openai_body(request())
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "response", "schema": SCHEMA},
    }
    assert openai_body(request(), compatible=True)["response_format"] == {
        "type": "json_object",
        "schema": SCHEMA,
    }


def test_anthropic_forces_a_respond_tool() -> None:
    body = anthropic_body(request())
    assert body["tools"] == [
        {"name": "respond", "description": body["tools"][0]["description"], "input_schema": SCHEMA}
    ]
    assert body["tool_choice"] == {"type": "tool", "name": "respond"}
    assert "thinking" not in body


async def test_the_respond_call_comes_back_as_text() -> None:
    @asynccontextmanager
    async def stream() -> AsyncIterator[AsyncIterator[StreamEvent]]:
        async def events() -> AsyncIterator[StreamEvent]:
            yield ToolCallEvent(id="1", name="respond", arguments={"n": 3})
            yield Finish(reason="tool_use")

        yield events()

    async with tool_call_as_text(stream()) as events:
        got = [event async for event in events]
    assert got == [TextDelta(text='{"n": 3}'), Finish(reason="end_turn")]


def test_answers_are_checked() -> None:
    assert check_answer(' {"n": 1} ', SCHEMA) == {"n": 1}
    assert check_answer('```json\n{"n": 1}\n```', SCHEMA) == {"n": 1}
    with pytest.raises(ProviderError, match="not JSON"):
        check_answer("n is 1", SCHEMA)
    with pytest.raises(ProviderError, match="n: 'x' is not of type 'integer'"):
        check_answer('{"n": "x"}', SCHEMA)
