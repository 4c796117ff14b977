"""Request-to-prompt conversion for the local provider (no model needed)."""

from __future__ import annotations

import json
from typing import Any

import pytest

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
from jpd.llm.errors import ProviderError
from jpd.llm.local_format import chat_messages, new_call_id, tool_plan

WEATHER = ToolDefinition(
    name="weather",
    description="Get the weather.",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}},
)
TIME = ToolDefinition(
    name="time", description="Get the time.", parameters={"type": "object", "properties": {}}
)


def _request(**kwargs: Any) -> ModelRequest:
    kwargs.setdefault("messages", (UserMessage(content="hi"),))
    return ModelRequest(model="smollm2", **kwargs)


def test_history_becomes_plain_chat_roles() -> None:
    request = _request(
        system="Be brief.",
        messages=(
            UserMessage(content="weather in Paris?"),
            AssistantMessage(
                content="Let me look.",
                tool_calls=(ToolCallPart(id="c1", name="weather", arguments={"city": "Paris"}),),
            ),
            ToolResultMessage(tool_call_id="c1", content="sunny"),
            ToolResultMessage(tool_call_id="zz", content="boom", is_error=True),
            UserMessage(content="thanks"),
        ),
    )
    assert chat_messages(request) == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "weather in Paris?"},
        {
            "role": "assistant",
            "content": 'Let me look.\n[Called tool `weather` with arguments {"city": "Paris"}]',
        },
        # Consecutive user-side messages merge; unknown call ids still read clearly.
        {
            "role": "user",
            "content": "[Tool `weather` returned:]\nsunny\n\n"
            "[Tool `tool` failed with error:]\nboom\n\nthanks",
        },
    ]


def test_no_system_message_without_system_prompt() -> None:
    assert chat_messages(_request()) == [{"role": "user", "content": "hi"}]


@pytest.mark.parametrize("choice", [ToolChoiceAuto(), ToolChoiceNone()])
def test_unforced_tool_choice_answers_in_text(choice: ToolChoiceAuto | ToolChoiceNone) -> None:
    assert tool_plan(_request(tools=(WEATHER,), tool_choice=choice)) is None


def test_any_without_tools_answers_in_text() -> None:
    assert tool_plan(_request(tool_choice=ToolChoiceAny())) is None


def test_named_tool_constrains_to_its_arguments() -> None:
    plan = tool_plan(_request(tools=(WEATHER, TIME), tool_choice=ToolChoiceTool(name="weather")))
    assert plan is not None
    assert plan.schema == WEATHER.parameters
    assert "`weather`" in plan.instruction
    system = chat_messages(_request(system="Base."), plan)[0]
    assert system["role"] == "system"
    assert system["content"].startswith("Base.\n\nCall the tool `weather`")
    call = plan.read_call('{"city": "Oslo"}')
    assert (call.name, call.arguments) == ("weather", {"city": "Oslo"})
    assert call.id.startswith("call_")


def test_named_tool_must_exist() -> None:
    with pytest.raises(ProviderError, match="`nope`"):
        tool_plan(_request(tools=(WEATHER,), tool_choice=ToolChoiceTool(name="nope")))


def test_any_of_several_tools_wraps_name_and_arguments() -> None:
    plan = tool_plan(_request(tools=(WEATHER, TIME), tool_choice=ToolChoiceAny()))
    assert plan is not None
    names = [alt["properties"]["name"]["const"] for alt in plan.schema["oneOf"]]
    assert names == ["weather", "time"]
    call = plan.read_call(json.dumps({"name": "time", "arguments": {}}))
    assert (call.name, call.arguments) == ("time", {})


@pytest.mark.parametrize(
    "text", ['{"name": "other", "arguments": {}}', '{"name": "time"}', "[1]", "{not json"]
)
def test_malformed_tool_output_is_a_provider_error(text: str) -> None:
    plan = tool_plan(_request(tools=(WEATHER, TIME), tool_choice=ToolChoiceAny()))
    assert plan is not None
    with pytest.raises(ProviderError):
        plan.read_call(text)


def test_call_ids_are_unique() -> None:
    assert len({new_call_id() for _ in range(100)}) == 100
