"""Every request body the Anthropic and OpenAI providers build validates against the
request types of the official `anthropic` and `openai` SDKs (test dependencies only),
unknown keys included, so drift from either API fails here.

Where the body and an SDK disagree on purpose, the test says why: the `anthropic` SDK
(1.0 and later) has no `temperature`, `top_p` or `top_k` in its request types, and the
API deprecated them for newer models. jpd sends a sampling parameter only when the user
set one (`assistant.model.parameters.temperature`; no `top_p` setting exists, so never
both), and that one key is the only difference allowed.
"""

from __future__ import annotations

import sys
from typing import Any

import pytest
import typing_extensions
from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError

from jpd.conversation.events import ToolImage
from jpd.llm import anthropic_request, openai_request, openai_responses_request
from jpd.llm.base import (
    AssistantMessage,
    ModelRequest,
    ToolCallPart,
    ToolChoiceAny,
    ToolChoiceAuto,
    ToolChoiceNone,
    ToolChoiceTool,
    ToolDefinition,
    ToolResultMessage,
    UserMessage,
)

anthropic = pytest.importorskip("anthropic")
openai = pytest.importorskip("openai")
from anthropic.types.message_create_params import MessageCreateParamsStreaming  # noqa: E402
from openai.types.chat.completion_create_params import (  # noqa: E402
    CompletionCreateParamsStreaming,
)


def _forbid_unknown_keys(package: str) -> None:
    # The SDKs' TypedDicts allow any extra key; for this check every one of them must
    # reject keys it does not define (set on the classes, in this test process only).
    for name, module in list(sys.modules.items()):
        if not name.startswith(package + ".types"):
            continue
        for value in vars(module).values():
            if typing_extensions.is_typeddict(value) and "__pydantic_config__" not in vars(value):
                value.__pydantic_config__ = ConfigDict(extra="forbid")


_forbid_unknown_keys("anthropic")
_forbid_unknown_keys("openai")
ANTHROPIC = TypeAdapter(MessageCreateParamsStreaming)
OPENAI = TypeAdapter(CompletionCreateParamsStreaming)

ECHO = ToolDefinition(
    name="echo",
    description="Echo the text.",
    parameters={"type": "object", "properties": {"text": {"type": "string"}}},
)
STRICT = ECHO.model_copy(update={"name": "strict_echo", "strict": True})
CALL = ToolCallPart(id="call_1", name="echo", arguments={"text": "hi"})
CONVERSATION = (
    UserMessage(content="echo hi"),
    AssistantMessage(
        content="", reasoning="use echo", reasoning_signature="sig", tool_calls=(CALL,)
    ),
    ToolResultMessage(tool_call_id="call_1", content="hi"),
    AssistantMessage(content="It said hi."),
    ToolResultMessage(tool_call_id="call_0", content="boom", is_error=True),
    UserMessage(content="again"),
)


PIXEL = ToolImage(mime_type="image/png", data="iVBORw0KGgo=")
PDF = ToolImage(mime_type="application/pdf", data="JVBERi0xLjQK")
ANSWER_SCHEMA = {
    "type": "object",
    "properties": {"n": {"type": "integer"}},
    "required": ["n"],
    "additionalProperties": False,
}
IMAGE_RESULTS = (
    UserMessage(content="draw"),
    AssistantMessage(content="", tool_calls=(CALL, CALL.model_copy(update={"id": "call_2"}))),
    ToolResultMessage(tool_call_id="call_1", content="a picture", images=(PIXEL,)),
    ToolResultMessage(tool_call_id="call_2", content="another", images=(PIXEL, PIXEL)),
    AssistantMessage(content="Nice."),
)


def requests() -> dict[str, ModelRequest]:
    base = ModelRequest(model="m", messages=(UserMessage(content="hi"),))
    return {
        "plain": base,
        "system_and_limit": base.model_copy(update={"system": "Be brief.", "max_tokens": 50}),
        "conversation_with_tools": base.model_copy(
            update={"messages": CONVERSATION, "tools": (ECHO, STRICT)}
        ),
        **{
            f"tool_choice_{choice.type}": base.model_copy(
                update={"tools": (ECHO,), "tool_choice": choice}
            )
            for choice in (
                ToolChoiceAuto(),
                ToolChoiceAny(),
                ToolChoiceNone(),
                ToolChoiceTool(name="echo"),
            )
        },
        "reasoning": base.model_copy(
            update={
                "messages": CONVERSATION,
                "tools": (ECHO,),
                "reasoning_effort": "high",
                "max_tokens": 20_000,
            }
        ),
        "temperature": base.model_copy(update={"temperature": 0.3}),
        "tool_result_images": base.model_copy(update={"messages": IMAGE_RESULTS, "tools": (ECHO,)}),
        "structured": base.model_copy(update={"response_schema": ANSWER_SCHEMA}),
        "pdf": base.model_copy(
            update={"messages": (UserMessage(content="read", images=(PDF, PIXEL)),)}
        ),
    }


class _ResponseTypeOnly(Exception):
    pass


def _consume(value: Any) -> None:
    # pydantic checks `Iterable[...]` fields (the SDKs' messages, tools, content blocks)
    # lazily, item by item as they are read: read them all.
    if isinstance(value, BaseModel):
        # Some unions also admit the SDK's response models, which allow any key: a
        # request block that matched only one of those is not a valid request block.
        raise _ResponseTypeOnly(type(value).__name__)
    if isinstance(value, dict):
        for item in value.values():
            _consume(item)
    elif isinstance(value, list | tuple):
        for item in value:
            _consume(item)
    elif not isinstance(value, str | bytes) and hasattr(value, "__next__"):
        for item in list(value):
            _consume(item)


def _errors(adapter: TypeAdapter[Any], body: dict[str, Any]) -> list[dict[str, Any]]:
    try:
        _consume(adapter.validate_python(body))
    except ValidationError as exc:
        return list(exc.errors())
    except _ResponseTypeOnly as exc:
        return [{"msg": f"matches only the response type {exc}"}]
    return []


@pytest.mark.parametrize("name", list(requests()))
def test_anthropic_bodies_match_the_sdk_request_type(name: str) -> None:
    body = anthropic_request.build_body(requests()[name])
    if name == "temperature":
        # On purpose (see the module docstring): sent only because the user set it.
        assert body["temperature"] == 0.3 and "top_p" not in body
        assert _errors(ANTHROPIC, body)  # the SDK has no sampling parameters
        body = {k: v for k, v in body.items() if k != "temperature"}
    else:
        assert not {"temperature", "top_p", "top_k"} & body.keys()
    assert _errors(ANTHROPIC, body) == []


@pytest.mark.parametrize("compatible", [False, True], ids=["openai", "openai-compatible"])
@pytest.mark.parametrize("name", list(requests()))
def test_openai_bodies_match_the_sdk_request_type(name: str, compatible: bool) -> None:
    body = openai_request.build_body(requests()[name], compatible=compatible)
    if name == "temperature":
        assert body["temperature"] == 0.3 and "top_p" not in body
    else:
        assert not {"temperature", "top_p"} & body.keys()
    if compatible and name == "structured":
        # On purpose: llama.cpp-style servers take the schema beside `json_object` (a
        # grammar), an extension the SDK does not know.
        assert body["response_format"] == {"type": "json_object", "schema": ANSWER_SCHEMA}
        body = {k: v for k, v in body.items() if k != "response_format"}
    if compatible and name == "pdf":  # a compatible server gets the images only
        assert [p["type"] for p in body["messages"][0]["content"]] == ["text", "image_url"]
    assert _errors(OPENAI, body) == []


def test_the_check_rejects_an_unknown_key() -> None:
    body = openai_request.build_body(requests()["plain"])
    body["messages"][0]["bogus"] = 1
    assert _errors(OPENAI, body)
    anthropic_body = anthropic_request.build_body(requests()["plain"])
    anthropic_body["messages"][0]["content"][0]["bogus"] = 1
    assert _errors(ANTHROPIC, anthropic_body)


from openai.types.responses.response_create_params import (  # noqa: E402
    ResponseCreateParamsStreaming,
)

_forbid_unknown_keys("openai")
RESPONSES = TypeAdapter(ResponseCreateParamsStreaming)
OPENAI_REASONING = (
    'openai:[{"type":"reasoning","id":"rs_1","summary":[{"type":"summary_text","text":"t"}],'
    '"encrypted_content":"gAAAA"}]'
)


@pytest.mark.parametrize("name", list(requests()))
def test_openai_responses_bodies_match_the_sdk_request_type(name: str) -> None:
    request = requests()[name]
    # The conversation's reasoning as the Responses API returned it (encrypted items).
    messages = tuple(
        m.model_copy(update={"reasoning_signature": OPENAI_REASONING})
        if isinstance(m, AssistantMessage) and m.reasoning_signature
        else m
        for m in request.messages
    )
    body = openai_responses_request.build_body(request.model_copy(update={"messages": messages}))
    assert body["store"] is False
    if any(isinstance(m, AssistantMessage) and m.reasoning_signature for m in messages):
        assert {"type": "reasoning", "id": "rs_1"}.items() <= body["input"][1].items()
    assert _errors(RESPONSES, body) == []
    bogus = {**body, "input": [*body["input"], {"role": "user", "content": "x", "bogus": 1}]}
    assert _errors(RESPONSES, bogus)
