"""Turning a `ModelRequest` into chat-template messages for an embedded model.

Small local models know only the plain chat roles of their template (SmolLM2: ChatML
with system/user/assistant), so tool calls and results are written out as clear text
instead of template-specific tool syntax. For a forced tool call the model is told
which tool to call and its output is constrained to a JSON schema (see `tool_plan`).
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass
from typing import Any

from jpd.llm.base import (
    AssistantMessage,
    ModelRequest,
    ToolCallEvent,
    ToolChoiceAny,
    ToolChoiceTool,
    ToolDefinition,
    ToolResultMessage,
    UserMessage,
)
from jpd.llm.errors import ProviderError

ChatMessage = dict[str, str]
"""`{"role": ..., "content": ...}` as chat templates expect."""


@dataclass(frozen=True)
class ToolPlan:
    """How to force a tool call: the instruction, the output schema and its reader."""

    instruction: str
    schema: dict[str, Any]
    tools: tuple[ToolDefinition, ...]

    def read_call(self, text: str) -> ToolCallEvent:
        """Parse the constrained model output into a tool call with a fresh id."""
        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ProviderError(f"local model produced invalid tool arguments: {exc}") from exc
        name: object = self.tools[0].name
        arguments: object = value
        if len(self.tools) > 1:
            name = value.get("name") if isinstance(value, dict) else None
            arguments = value.get("arguments") if isinstance(value, dict) else None
        if not isinstance(name, str) or name not in {t.name for t in self.tools}:
            raise ProviderError("local model produced a tool call for an unknown tool")
        if not isinstance(arguments, dict):
            raise ProviderError("local model produced tool arguments that are not an object")
        return ToolCallEvent(id=new_call_id(), name=name, arguments=arguments)


def new_call_id() -> str:
    """A provider-generated tool call id (`call_<hex>`)."""
    return f"call_{secrets.token_hex(12)}"


def chat_messages(request: ModelRequest, plan: ToolPlan | None = None) -> list[ChatMessage]:
    """Render system prompt and history as role/content messages.

    Consecutive messages of one role are merged, since some templates insist on
    alternating roles. Tool results become user messages naming the tool.
    """
    out: list[ChatMessage] = []

    def add(role: str, content: str) -> None:
        if out and out[-1]["role"] == role:
            out[-1]["content"] += "\n\n" + content
        else:
            out.append({"role": role, "content": content})

    instruction = plan.instruction if plan else None
    system = "\n\n".join(s for s in (request.system, instruction) if s)
    if system:
        add("system", system)
    tool_names: dict[str, str] = {}
    for message in request.messages:
        if isinstance(message, UserMessage):
            add("user", message.content)
        elif isinstance(message, AssistantMessage):
            parts = [message.content] if message.content else []
            for call in message.tool_calls:
                tool_names[call.id] = call.name
                arguments = json.dumps(call.arguments, ensure_ascii=False)
                parts.append(f"[Called tool `{call.name}` with arguments {arguments}]")
            add("assistant", "\n".join(parts))
        elif isinstance(message, ToolResultMessage):
            name = tool_names.get(message.tool_call_id, "tool")
            outcome = "failed with error" if message.is_error else "returned"
            add("user", f"[Tool `{name}` {outcome}:]\n{message.content}")
    return out


TEMPLATE_TOKENS = 16
"""Tokens a chat template adds per message at most (role markers, separators)."""
TEMPLATE_EXTRA = 64
"""Tokens a template may add once (a BOS, a default system prompt)."""


def token_bound(request: ModelRequest) -> int:
    """More tokens than the model's prompt for `request` can have, without tokenizing:
    a byte-level tokenizer (BPE, or SentencePiece with byte fallback) makes no token of
    the text shorter than a byte."""
    messages = chat_messages(request, tool_plan(request))
    size = sum(TEMPLATE_TOKENS + len(m["content"].encode()) for m in messages)
    return size + TEMPLATE_EXTRA


def tool_plan(request: ModelRequest) -> ToolPlan | None:
    """The forced tool call for this request, or None to answer in text.

    Only `ToolChoiceTool` and `ToolChoiceAny` force a call. With `auto` a 135M model
    cannot reliably decide whether to call a tool, so it answers in text; with `none`
    tools are ignored.
    """
    choice = request.tool_choice
    if isinstance(choice, ToolChoiceTool):
        tools = tuple(t for t in request.tools if t.name == choice.name)
        if not tools:
            raise ProviderError(f"tool_choice names `{choice.name}`, which is not among the tools")
    elif isinstance(choice, ToolChoiceAny) and request.tools:
        tools = request.tools
    else:
        return None
    if len(tools) == 1:
        tool = tools[0]
        instruction = (
            f"Call the tool `{tool.name}` now: {tool.description}\n"
            "Reply with only the JSON object of its arguments, matching this JSON schema:\n"
            f"{json.dumps(tool.parameters, ensure_ascii=False)}"
        )
        # A pinned schema narrows only the grammar; the instruction shows the tool's own.
        pinned = request.pinned_arguments or tool.parameters
        return ToolPlan(instruction=instruction, schema=pinned, tools=tools)
    listing = "\n".join(
        f"- `{t.name}`: {t.description} Arguments schema: "
        f"{json.dumps(t.parameters, ensure_ascii=False)}"
        for t in tools
    )
    instruction = (
        f"Call exactly one of these tools now:\n{listing}\n"
        'Reply with only a JSON object {"name": <tool name>, "arguments": <arguments object>}.'
    )
    schema: dict[str, Any] = {
        "oneOf": [
            {
                "type": "object",
                "properties": {"name": {"const": t.name}, "arguments": t.parameters},
                "required": ["name", "arguments"],
                "additionalProperties": False,
            }
            for t in tools
        ]
    }
    return ToolPlan(instruction=instruction, schema=schema, tools=tools)
