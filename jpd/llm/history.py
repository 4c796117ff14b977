"""Turn persisted conversation events into the provider-neutral message list."""

from __future__ import annotations

from collections.abc import Iterable

from jpd.conversation import events as ev
from jpd.llm.base import AssistantMessage, Message, ToolCallPart, ToolResultMessage, UserMessage


def to_messages(events: Iterable[ev.Event]) -> list[Message]:
    """Group events into alternating user / assistant / tool-result messages.

    Consecutive assistant outputs (reasoning, text, tool call requests) form one
    assistant message; inquiry and turn bookkeeping events are not sent to models.
    """
    messages: list[Message] = []
    pending: dict[str, object] | None = None

    def flush() -> None:
        nonlocal pending
        if pending is not None:
            messages.append(AssistantMessage.model_validate(pending))
            pending = None

    def assistant() -> dict[str, object]:
        nonlocal pending
        if pending is None:
            pending = {"content": "", "reasoning": None, "tool_calls": []}
        return pending

    for event in events:
        if isinstance(event, ev.ChatRequest):
            flush()
            messages.append(UserMessage(content=event.content))
        elif isinstance(event, ev.ChatResponse):
            part = assistant()
            if event.message is not None:
                part["content"] = str(part["content"]) + event.message
            if event.reasoning is not None:
                part["reasoning"] = (str(part["reasoning"] or "")) + event.reasoning
                if event.signature:
                    part["reasoning_signature"] = event.signature
        elif isinstance(event, ev.ToolCallRequest):
            calls = assistant()["tool_calls"]
            assert isinstance(calls, list)
            calls.append(ToolCallPart(id=event.id, name=event.name, arguments=event.arguments))
        elif isinstance(event, ev.ToolCallResponse):
            flush()
            messages.append(
                ToolResultMessage(
                    tool_call_id=event.id, content=event.content, is_error=event.is_error
                )
            )
    flush()
    return messages
