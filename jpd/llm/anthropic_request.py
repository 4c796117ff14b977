"""Anthropic Messages API request bodies, built deterministically.

The same `ModelRequest` always yields the same bytes: every object is built in a
fixed key order, tools and messages keep their given order, and the body is
serialised by `request_build.encode_body`. Prompt caching depends on it: a
cache hit needs a byte-identical prefix.

Cache breakpoints (`cache_control`, at most four per request): the last tool,
the system prompt, and the last two turns (after a compaction: the summary and the
last turn). The previous request's cached prefix is found through the API's
look-back from these breakpoints; marking the turn before the last (not only user
turns) also caches an assistant turn with tool calls, so an inquiry side request
(protocol.md 10.4) and the follow-up request both read a large tool call back from
cache instead of paying for it twice.
"""

from __future__ import annotations

from typing import Any

from jpd.llm.base import (
    FOREIGN_SIGNATURES,
    PDF,
    AssistantMessage,
    Message,
    ModelRequest,
    ToolChoice,
    ToolDefinition,
    ToolResultMessage,
    UserMessage,
)
from jpd.llm.errors import ProviderError
from jpd.llm.history import SUMMARY_HEADER, TRIM_NOTE

DEFAULT_MAX_TOKENS = 8192
MIN_THINKING_BUDGET = 1024
EFFORT_BUDGET = {"low": 1024, "medium": 4096, "high": 16384}
"""Thinking budget (tokens) per `assistant.reasoning.effort` when no budget is set."""

Block = dict[str, Any]


SUMMARY_PREFIXES = (SUMMARY_HEADER, TRIM_NOTE)


def _ephemeral() -> Block:
    return {"type": "ephemeral"}


def thinking_budget(request: ModelRequest) -> int | None:
    """The extended-thinking budget for `request`, or None when thinking is off.

    Thinking is also off when the tool cycle being continued was started by an
    assistant message without a signed thinking block (e.g. the no-reasoning
    retry of protocol.md 9.2): the API rejects thinking there.
    """
    if request.reasoning_effort == "off":
        return None
    if _open_tool_cycle_unsigned(request.messages):
        return None
    return request.reasoning_budget or EFFORT_BUDGET[request.reasoning_effort]


def _open_tool_cycle_unsigned(messages: tuple[Message, ...]) -> bool:
    # The request continues a tool cycle when it ends with tool results; the
    # assistant message that asked for them must then start with thinking.
    if not messages or not isinstance(messages[-1], ToolResultMessage):
        return False
    for message in reversed(messages):
        if isinstance(message, AssistantMessage):
            return not _signed(message)
        if isinstance(message, UserMessage):
            return False
    return False


def build_body(request: ModelRequest) -> dict[str, Any]:
    """The JSON body for `POST /v1/messages` with `stream: true`.

    Raises `ProviderError` for settings the API would reject (a forced tool
    choice with thinking, a thinking budget below the minimum or not below
    `max_tokens`).
    """
    budget = thinking_budget(request)
    if budget is not None and request.tool_choice.type in ("any", "tool"):
        raise ProviderError(
            "anthropic: a forced tool_choice cannot be combined with extended thinking"
        )
    if budget is not None and budget < MIN_THINKING_BUDGET:
        raise ProviderError(
            f"anthropic: reasoning budget {budget} is below the minimum of "
            f"{MIN_THINKING_BUDGET} tokens; raise assistant.reasoning.budget_tokens"
        )
    max_tokens = request.max_tokens
    if max_tokens is None:
        max_tokens = DEFAULT_MAX_TOKENS + (budget or 0)
    elif budget is not None and max_tokens <= budget:
        raise ProviderError(
            f"anthropic: max_tokens ({max_tokens}) must exceed the reasoning budget ({budget});"
            " raise assistant.model.parameters.max_tokens or lower"
            " assistant.reasoning.budget_tokens"
        )

    body: dict[str, Any] = {"model": request.model, "max_tokens": max_tokens}
    if request.system:
        body["system"] = [{"type": "text", "text": request.system, "cache_control": _ephemeral()}]
    body["messages"] = _messages(request.messages, thinking=budget is not None)
    if request.tools:
        body["tools"] = _tools(request.tools)
        body["tool_choice"] = _tool_choice(request.tool_choice)
    if request.response_schema is not None:  # no native structured output: a forced tool
        from jpd.llm.structured import RESPOND_TOOL, respond_tool

        body["tools"] = [respond_tool(request.response_schema)]
        body["tool_choice"] = {"type": "tool", "name": RESPOND_TOOL}
        budget = None  # the API refuses a forced tool with thinking on
    if budget is not None:
        body["thinking"] = {"type": "enabled", "budget_tokens": budget}
    elif request.temperature is not None:
        # The API accepts no temperature with thinking on, so it is only sent without.
        body["temperature"] = request.temperature
    body["stream"] = True
    return body


def uses_strict_tools(request: ModelRequest) -> bool:
    """Whether any tool asks for strict schema adherence (needs a beta header)."""
    return any(tool.strict for tool in request.tools)


def _tools(tools: tuple[ToolDefinition, ...]) -> list[Block]:
    out: list[Block] = []
    for tool in tools:
        entry: Block = {
            "name": tool.name,
            "description": tool.description,
            "input_schema": tool.parameters,
        }
        if tool.strict:
            entry["strict"] = True
        out.append(entry)
    out[-1]["cache_control"] = _ephemeral()
    return out


def _tool_choice(choice: ToolChoice) -> Block:
    if choice.type == "tool":
        return {"type": "tool", "name": choice.name}
    return {"type": choice.type}


def _messages(messages: tuple[Message, ...], *, thinking: bool) -> list[Block]:
    turns: list[tuple[str, list[Block]]] = []
    for message in messages:
        role, blocks = _convert(message, thinking=thinking)
        if not blocks:
            continue
        # The API wants alternating roles: tool results and a following user text
        # (or two assistant messages) travel in one turn.
        if turns and turns[-1][0] == role:
            turns[-1][1].extend(blocks)
        else:
            turns.append((role, blocks))

    if _starts_with_summary(messages) and len(turns) > 1:
        # After a compaction the summary is the stable part of the prefix: it gets its
        # own breakpoint (protocol.md 12.5), the last turn the fourth.
        turns[0][1][0] = {**turns[0][1][0], "cache_control": _ephemeral()}
        _mark_cache(turns[-1][1])
    else:
        for _role, blocks in turns[-2:]:
            _mark_cache(blocks)
    return [{"role": role, "content": blocks} for role, blocks in turns]


def _starts_with_summary(messages: tuple[Message, ...]) -> bool:
    first = messages[0] if messages else None
    return isinstance(first, UserMessage) and first.content.startswith(SUMMARY_PREFIXES)


def _mark_cache(blocks: list[Block]) -> None:
    # Thinking blocks cannot carry cache_control; mark the last block that can.
    for index in range(len(blocks) - 1, -1, -1):
        if blocks[index]["type"] not in ("thinking", "redacted_thinking"):
            blocks[index] = {**blocks[index], "cache_control": _ephemeral()}
            return


def _convert(message: Message, *, thinking: bool) -> tuple[str, list[Block]]:
    if isinstance(message, UserMessage):
        pictures: list[Block] = [
            {
                "type": "document" if i.mime_type == PDF else "image",
                "source": {"type": "base64", "media_type": i.mime_type, "data": i.data},
            }
            for i in message.images
        ]
        return "user", [*pictures, {"type": "text", "text": message.content}]
    if isinstance(message, ToolResultMessage):
        content: Any = message.content
        if message.images:
            content = [
                {"type": "text", "text": message.content},
                *(
                    {
                        "type": "image",
                        "source": {"type": "base64", "media_type": i.mime_type, "data": i.data},
                    }
                    for i in message.images
                ),
            ]
        result: Block = {
            "type": "tool_result",
            "tool_use_id": message.tool_call_id,
            "content": content,
        }
        if message.is_error:
            result["is_error"] = True
        return "user", [result]
    blocks: list[Block] = []
    # Unsigned reasoning (e.g. from another provider) cannot be sent back.
    if thinking and _signed(message):
        blocks.append(
            {
                "type": "thinking",
                "thinking": message.reasoning,
                "signature": message.reasoning_signature,
            }
        )
    if message.content:
        blocks.append({"type": "text", "text": message.content})
    for call in message.tool_calls:
        blocks.append(
            {"type": "tool_use", "id": call.id, "name": call.name, "input": call.arguments}
        )
    return "assistant", blocks


def _signed(message: AssistantMessage) -> bool:
    """Whether `message` carries reasoning Anthropic signed (not another provider's)."""
    signature = message.reasoning_signature
    return bool(message.reasoning and signature and not signature.startswith(FOREIGN_SIGNATURES))
