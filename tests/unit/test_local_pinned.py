"""The embedded model pins a forced tool's arguments in its grammar only
(protocol.md 10.4): `ModelRequest.pinned_arguments` narrows the decoded schema, the
instruction the model reads shows the tool's own schema."""

from __future__ import annotations

import json

from jpd.inquiry.answer_tool import ANSWER_INQUIRY_TOOL
from jpd.llm.base import ModelRequest, ToolChoiceTool, UserMessage
from jpd.llm.local_format import tool_plan

PINNED = {
    "type": "object",
    "properties": {
        "inquiry_id": {"type": "string", "enum": ["call_1.go.1"]},
        "answer": {"type": "string", "enum": ["true", "false"]},
    },
    "required": ["inquiry_id", "answer"],
    "additionalProperties": False,
}


def request(pinned: dict[str, object] | None) -> ModelRequest:
    return ModelRequest(
        model="m",
        messages=(UserMessage(content="Go?"),),
        tools=(ANSWER_INQUIRY_TOOL,),
        tool_choice=ToolChoiceTool(name="answer_inquiry"),
        pinned_arguments=pinned,
    )


def test_pinned_arguments_narrow_the_grammar_not_the_prompt() -> None:
    plan = tool_plan(request(PINNED))
    assert plan is not None
    assert plan.schema == PINNED
    assert json.dumps(ANSWER_INQUIRY_TOOL.parameters) in plan.instruction
    assert "call_1.go.1" not in plan.instruction


def test_without_a_pin_the_grammar_is_the_tools_schema() -> None:
    plan = tool_plan(request(None))
    assert plan is not None and plan.schema == ANSWER_INQUIRY_TOOL.parameters
