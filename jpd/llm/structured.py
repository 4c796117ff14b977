"""Structured output (`turn/start` `responseSchema`, `jp query --schema`): a request whose
answer must be JSON valid against a schema. Providers with native structured output
send the schema as such (OpenAI's `response_format` and Responses `text.format`,
Gemini's `responseJsonSchema`, Ollama's `format`, the embedded model's grammar); the
others (Anthropic) force a `respond` tool whose input schema is the schema, and its call
comes back as the answer's text, so the turn sees text either way (protocol.md 5.5)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from jpd.llm.base import EventStream, Finish, StreamEvent, TextDelta, ToolCallEvent

RESPOND_TOOL = "respond"
RESPOND_DESCRIPTION = "Give your final answer as this tool's arguments."


def respond_tool(schema: dict[str, Any]) -> dict[str, Any]:
    """The forced tool's definition (Anthropic's tool shape)."""
    return {"name": RESPOND_TOOL, "description": RESPOND_DESCRIPTION, "input_schema": schema}


SCHEMA_NAME = "response"
"""The name OpenAI's structured output formats require."""


def strict_ok(schema: Any) -> bool:
    """Whether OpenAI's strict mode takes `schema`: every object closed
    (`additionalProperties: false`) with every property required. A schema outside that
    subset goes non-strict (still guided; the answer is checked either way) rather than
    refused by the API."""
    if isinstance(schema, list):
        return all(strict_ok(item) for item in schema)
    if not isinstance(schema, dict):
        return True
    if schema.get("type") == "object" or "properties" in schema:
        props = schema.get("properties") or {}
        if schema.get("additionalProperties") is not False:
            return False
        if set(schema.get("required") or ()) != set(props):
            return False
    return all(strict_ok(v) for k, v in schema.items() if k not in ("enum", "const", "default"))


def openai_format(schema: dict[str, Any]) -> dict[str, Any]:
    """The `json_schema` format of OpenAI's Responses API (`text.format`)."""
    return {
        "type": "json_schema",
        "name": SCHEMA_NAME,
        "schema": schema,
        "strict": strict_ok(schema),
    }


def instruction(schema: dict[str, Any]) -> str:
    """The system prompt's part that asks for the JSON (every provider gets it)."""
    return (
        "Answer with a single JSON value valid against this JSON schema, and nothing "
        "else (no prose, no code fence):\n" + json.dumps(schema, ensure_ascii=False)
    )


def tool_call_as_text(stream: EventStream) -> EventStream:
    """`stream` with the `respond` tool's call turned into the answer's text."""

    @asynccontextmanager
    async def wrapped() -> AsyncIterator[AsyncIterator[StreamEvent]]:
        async with stream as events:

            async def converted() -> AsyncIterator[StreamEvent]:
                async for event in events:
                    if isinstance(event, ToolCallEvent) and event.name == RESPOND_TOOL:
                        yield TextDelta(text=json.dumps(event.arguments, ensure_ascii=False))
                    elif isinstance(event, Finish) and event.reason == "tool_use":
                        yield Finish(reason="end_turn")
                    else:
                        yield event

            yield converted()

    return wrapped()
