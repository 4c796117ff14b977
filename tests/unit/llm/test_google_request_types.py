"""Every Gemini request body validates against the official `google-genai` types (a test
dependency only), which forbid unknown keys: drift from the API fails here."""

from __future__ import annotations

from typing import Any

import pytest

from jpd.conversation.events import ToolImage
from jpd.llm.base import (
    AssistantMessage,
    ModelRequest,
    ToolCallPart,
    ToolDefinition,
    ToolResultMessage,
    UserMessage,
)
from jpd.llm.google_request import build_body

types = pytest.importorskip("google.genai.types")

TOOL = ToolDefinition(
    name="search",
    description="Search",
    parameters={"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]},
)
IMAGE = ToolImage(mime_type="image/png", data="iVBORw0KGgo=")


def check(body: dict[str, Any]) -> None:
    allowed = {"contents", "systemInstruction", "tools", "toolConfig", "generationConfig"}
    assert set(body) <= allowed
    for content in body["contents"]:
        types.Content.model_validate(content)
    if "systemInstruction" in body:
        types.Content.model_validate(body["systemInstruction"])
    for tool in body.get("tools", ()):
        types.Tool.model_validate(tool)
    if "toolConfig" in body:
        types.ToolConfig.model_validate(body["toolConfig"])
    if "generationConfig" in body:
        types.GenerationConfig.model_validate(body["generationConfig"])


@pytest.mark.parametrize(
    "choice",
    [{"type": "auto"}, {"type": "none"}, {"type": "any"}, {"type": "tool", "name": "search"}],
)
@pytest.mark.parametrize("effort", ["off", "high"])
def test_bodies_validate(choice: dict[str, str], effort: str) -> None:
    request = ModelRequest.model_validate(
        {
            "model": "gemini-x",
            "system": "sys",
            "messages": [
                UserMessage(content="look", images=(IMAGE,)),
                AssistantMessage(
                    content="calling",
                    reasoning="r",
                    reasoning_signature="gemini:U0lHTkFUVVJF",
                    tool_calls=(
                        ToolCallPart(id="c1", name="search", arguments={"q": "a"}),
                        ToolCallPart(id="c2", name="search", arguments={"q": "b"}),
                    ),
                ),
                ToolResultMessage(tool_call_id="c1", content="one", images=(IMAGE,)),
                ToolResultMessage(tool_call_id="c2", content="bad", is_error=True),
                AssistantMessage(content="done", reasoning_signature="gemini:VA=="),
                UserMessage(content="again"),
            ],
            "tools": [TOOL],
            "tool_choice": choice,
            "max_tokens": 100,
            "temperature": 0.5,
            "reasoning_effort": effort,
        }
    )
    body = build_body(request)
    check(body)
    roles = [content["role"] for content in body["contents"]]
    assert roles == ["user", "model", "user", "model", "user"]


def test_structured_output_and_pdf_bodies_validate() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    pdf = ToolImage(mime_type="application/pdf", data="JVBERi0xLjQK")
    request = ModelRequest(
        model="gemini-x",
        messages=(UserMessage(content="read", images=(pdf, IMAGE)),),
        response_schema=schema,
    )
    body = build_body(request)
    check(body)
    config = types.GenerationConfig.model_validate(body["generationConfig"])
    assert config.response_mime_type == "application/json"
    assert config.response_json_schema == schema
    parts = body["contents"][0]["parts"]
    assert parts[1] == {"inlineData": {"mimeType": "application/pdf", "data": "JVBERi0xLjQK"}}
