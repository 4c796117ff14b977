"""Structured output in the provider requests (jpd/llm/structured.py): OpenAI's native
`response_format` and Responses `text.format`, Gemini's `responseJsonSchema`, Ollama's
`format`, Anthropic's forced `respond` tool turned back into text."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from jpd.core.structured import check_answer
from jpd.llm.anthropic_request import build_body as anthropic_body
from jpd.llm.base import Finish, ModelRequest, StreamEvent, TextDelta, ToolCallEvent, UserMessage
from jpd.llm.errors import ProviderError
from jpd.llm.google_request import build_body as google_body
from jpd.llm.ollama import build_body as ollama_body
from jpd.llm.openai_request import build_body as openai_body
from jpd.llm.openai_responses_request import build_body as responses_body
from jpd.llm.structured import strict_ok, tool_call_as_text

SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}


def request() -> ModelRequest:
    return ModelRequest(model="m", messages=(UserMessage(content="hi"),), response_schema=SCHEMA)


def test_openai_sends_the_schema_natively() -> None:
    body = openai_body(request())
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "response", "schema": SCHEMA, "strict": False},
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


CLOSED = {
    "type": "object",
    "properties": {
        "n": {"type": "integer"},
        "tags": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"k": {"type": "string"}},
                "required": ["k"],
                "additionalProperties": False,
            },
        },
    },
    "required": ["n", "tags"],
    "additionalProperties": False,
}


def test_strict_only_for_a_schema_in_openais_strict_subset() -> None:
    assert strict_ok(CLOSED)
    assert not strict_ok(SCHEMA)  # open object: strict mode would be refused by the API
    optional = {**CLOSED, "required": ["n"]}
    assert not strict_ok(optional)
    inner_open = json.loads(json.dumps(CLOSED))
    del inner_open["properties"]["tags"]["items"]["additionalProperties"]
    assert not strict_ok(inner_open)
    assert strict_ok({"type": "array", "items": {"type": "string"}})


def test_openai_responses_sends_text_format() -> None:
    body = responses_body(request().model_copy(update={"response_schema": CLOSED}))
    assert body["text"] == {
        "format": {"type": "json_schema", "name": "response", "schema": CLOSED, "strict": True}
    }
    assert "tools" not in body and "tool_choice" not in body
    assert responses_body(request())["text"]["format"]["strict"] is False
    assert "text" not in responses_body(request().model_copy(update={"response_schema": None}))


def test_gemini_sends_a_json_mime_type_and_the_schema() -> None:
    body = google_body(request())
    assert body["generationConfig"] == {
        "responseMimeType": "application/json",
        "responseJsonSchema": SCHEMA,
    }
    assert "tools" not in body


def test_ollama_sends_the_schema_as_format() -> None:
    body = ollama_body(request(), 4096)
    assert body["format"] == SCHEMA and "tools" not in body


def test_the_local_model_decodes_under_the_schemas_grammar() -> None:
    class Model:
        def __init__(self) -> None:
            self.grammars: list[Any] = []
            self.llama = self

        def tokenize_chat(self, messages: Any) -> list[int]:
            return [1, 2]

        def n_ctx(self) -> int:
            return 100

        def set_seed(self, seed: int) -> None:
            pass

        def grammar(self, schema: Any) -> str:
            self.grammars.append(schema)
            return "GRAMMAR"

        def generate(self, tokens: Any, **kwargs: Any) -> Any:
            self.kwargs = kwargs
            return iter(())

        input_ids: list[int] = []
        n_tokens = 0

    from jpd.llm.local import _Generation

    model = Model()
    _Generation(model, request(), None, 0)  # type: ignore[arg-type]
    assert model.grammars == [SCHEMA]
    assert model.kwargs["grammar"] == "GRAMMAR" and model.kwargs["temp"] == 0.0
