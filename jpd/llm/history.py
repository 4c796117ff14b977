"""Turn persisted conversation events into the provider-neutral message list."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from jpd.conversation import events as ev
from jpd.llm.base import AssistantMessage, Message, ToolCallPart, ToolResultMessage, UserMessage


def undo_note(event: ev.TurnUndone) -> str:
    """What the model is told when the user undid a turn's file changes."""
    files = ", ".join([*event.restored, *event.removed]) or "none"
    return (
        f"[The user undid the file changes of an earlier turn ({event.turn_id}): these files "
        f"are back as they were before it: {files}.]"
    )


class MessageHistory:
    """A conversation's model messages, built once and extended event by event.

    Consecutive assistant outputs (reasoning, text, tool call requests) form one
    assistant message; inquiry and turn bookkeeping events are not sent to models.
    Adding an event costs the same however long the conversation is. Messages are
    constructed, not validated again: their events were validated where they entered.
    A call's result that follows its `interrupted` result (the call re-ran in a resumed
    turn, protocol.md 12.4) takes the interrupted one's place: one result per call.
    """

    def __init__(self, events: Iterable[ev.Event] = ()) -> None:
        self._done: list[Message] = []
        self._pending: dict[str, Any] | None = None
        self._interrupted: dict[str, int] = {}  # call id -> index of its interrupted result
        for event in events:
            self.add(event)

    def add(self, event: ev.Event) -> None:
        """Extend the messages with one persisted event."""
        if isinstance(event, ev.ChatRequest | ev.ForcedToolRetry):
            content = event.content if isinstance(event, ev.ChatRequest) else event.message
            self._flush()
            self._done.append(UserMessage.model_construct(content=content))
        elif isinstance(event, ev.TurnUndone):
            # The model must not go on believing its edits are still there.
            self._flush()
            self._done.append(UserMessage.model_construct(content=undo_note(event)))
        elif isinstance(event, ev.ChatResponse):
            part = self._assistant()
            if event.message is not None:
                part["content"] += event.message
            if event.reasoning is not None:
                part["reasoning"] = (part["reasoning"] or "") + event.reasoning
                if event.signature:
                    part["reasoning_signature"] = event.signature
        elif isinstance(event, ev.ToolCallRequest):
            self._assistant()["tool_calls"].append(
                ToolCallPart.model_construct(
                    id=event.id, name=event.name, arguments=event.arguments
                )
            )
        elif isinstance(event, ev.ToolCallResponse):
            self._flush()
            result = ToolResultMessage.model_construct(
                tool_call_id=event.id,
                content=event.content,
                is_error=event.is_error,
                images=tuple(event.images or ()),
            )
            superseded = self._interrupted.pop(event.id, None)
            if superseded is not None:
                self._done[superseded] = result
                return
            if event.interrupted:
                self._interrupted[event.id] = len(self._done)
            self._done.append(result)

    def messages(self) -> list[Message]:
        """The messages so far (a new list; the assistant output in progress included)."""
        if self._pending is None:
            return list(self._done)
        return [*self._done, _assistant_message(self._pending)]

    def _assistant(self) -> dict[str, Any]:
        if self._pending is None:
            self._pending = {"content": "", "reasoning": None, "tool_calls": []}
        return self._pending

    def _flush(self) -> None:
        if self._pending is not None:
            self._done.append(_assistant_message(self._pending))
            self._pending = None


def _assistant_message(part: dict[str, Any]) -> AssistantMessage:
    return AssistantMessage.model_construct(
        content=part["content"],
        reasoning=part["reasoning"],
        reasoning_signature=part.get("reasoning_signature"),
        tool_calls=tuple(part["tool_calls"]),
    )


def to_messages(events: Iterable[ev.Event]) -> list[Message]:
    """Group events into alternating user / assistant / tool-result messages."""
    return MessageHistory(events).messages()
