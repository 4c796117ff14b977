"""Turn persisted conversation events into the provider-neutral message list."""

from __future__ import annotations

import base64
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from jpd.conversation import events as ev
from jpd.conversation.events import ToolImage
from jpd.llm.base import AssistantMessage, Message, ToolCallPart, ToolResultMessage, UserMessage


class MessageHistory:
    """A conversation's model messages, built once and extended event by event.

    Consecutive assistant outputs (reasoning, text, tool call requests) form one
    assistant message; inquiry and turn bookkeeping events are not sent to models.
    Adding an event costs the same however long the conversation is. Messages are
    constructed, not validated again: their events were validated where they entered.
    A call's result that follows its `interrupted` result (the call re-ran in a resumed
    turn, protocol.md 12.4) takes the interrupted one's place: one result per call.
    """

    def __init__(self, events: Iterable[ev.Event] = (), folder: Path | None = None) -> None:
        self._folder = folder
        """The conversation's folder, where the files of its images are (read only
        when built from the log, in a worker thread; a live turn remembers its own)."""
        self._images: dict[str, ToolImage] = {}
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
            images = self._user_images(event) if isinstance(event, ev.ChatRequest) else ()
            self._done.append(UserMessage.model_construct(content=content, images=images))
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

    def remember_image(self, file: str, image: ToolImage) -> None:
        """The data of an image file a turn is about to record (no read from disk)."""
        self._images[file] = image

    def _user_images(self, event: ev.ChatRequest) -> tuple[ToolImage, ...]:
        images = []
        for ref in event.images or ():
            image = self._images.get(ref.file)
            if image is None and self._folder is not None:
                path = self._folder / ref.file
                if path.is_file():
                    data = base64.b64encode(path.read_bytes()).decode("ascii")
                    image = ToolImage(mime_type=ref.mime_type, data=data)
            if image is not None:  # a file removed by hand: the text still goes
                images.append(image)
        return tuple(images)

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
