"""Turn persisted conversation events into the provider-neutral message list."""

from __future__ import annotations

import base64
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from jpd.conversation import events as ev
from jpd.conversation.events import ToolImage
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

    A `context_compacted` event changes what the model sees of the events before it
    (protocol.md 12.5): tool outputs become stubs, or the events it covers become its
    summary. The messages remember the position of the event that began them
    (`origins`) so a compaction can be planned at a message boundary.
    """

    def __init__(self, events: Iterable[ev.Event] = (), folder: Path | None = None) -> None:
        self._folder = folder
        """The conversation's folder, where the files of its images are (read only
        when built from the log, in a worker thread; a live turn remembers its own)."""
        self._images: dict[str, ToolImage] = {}
        self._done: list[Message] = []
        self._origins: list[int] = []  # position of the event each message began with
        self._pending: dict[str, Any] | None = None
        self._pending_origin = 0
        self._interrupted: dict[str, int] = {}  # call id -> index of its interrupted result
        self._calls: dict[str, ToolCallPart] = {}  # for the stubs of their outputs
        self._stubbed_before = 0
        self.count = 0
        """How many events were added: the position the next one will have."""
        self.compactions: list[ev.ContextCompacted] = []
        self.last_start: ev.TurnStart | None = None
        """The latest `turn_start`: the model and config the conversation keeps."""
        for event in events:
            self.add(event)

    def add(self, event: ev.Event) -> None:
        """Extend the messages with one persisted event."""
        position, self.count = self.count, self.count + 1
        if isinstance(event, ev.TurnStart):
            self.last_start = event
        elif isinstance(event, ev.ContextCompacted):
            self._compact(event, position)
        elif isinstance(event, ev.ChatRequest | ev.ForcedToolRetry):
            content = event.content if isinstance(event, ev.ChatRequest) else event.message
            self._flush()
            images = self._user_images(event) if isinstance(event, ev.ChatRequest) else ()
            self._append(UserMessage.model_construct(content=content, images=images), position)
        elif isinstance(event, ev.TurnUndone):
            # The model must not go on believing its edits are still there.
            self._flush()
            self._append(UserMessage.model_construct(content=undo_note(event)), position)
        elif isinstance(event, ev.ChatResponse):
            part = self._assistant(position)
            if event.message is not None:
                part["content"] += event.message
            if event.reasoning is not None:
                part["reasoning"] = (part["reasoning"] or "") + event.reasoning
                if event.signature:
                    part["reasoning_signature"] = event.signature
        elif isinstance(event, ev.ToolCallRequest):
            call = ToolCallPart.model_construct(
                id=event.id, name=event.name, arguments=event.arguments
            )
            self._calls[event.id] = call
            self._assistant(position)["tool_calls"].append(call)
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
            self._append(result, position)

    def preview(self, event: ev.Event) -> list[Message]:
        """The messages as they would be after adding `event`; this history is unchanged."""
        other = MessageHistory.__new__(MessageHistory)
        other.__dict__.update(self.__dict__)
        other._done, other._origins = list(self._done), list(self._origins)
        if self._pending is not None:
            other._pending = {**self._pending, "tool_calls": list(self._pending["tool_calls"])}
        other._interrupted, other._calls = dict(self._interrupted), dict(self._calls)
        other.compactions = list(self.compactions)
        other.add(event)
        return other.messages()

    def entries(self) -> list[tuple[int, Message]]:
        """The messages so far with the position of the event each began with."""
        return list(zip(self._origins_all(), self.messages(), strict=True))

    def _origins_all(self) -> list[int]:
        if self._pending is None:
            return list(self._origins)
        return [*self._origins, self._pending_origin]

    def _append(self, message: Message, position: int) -> None:
        self._done.append(message)
        self._origins.append(position)

    def _compact(self, event: ev.ContextCompacted, position: int) -> None:
        self.compactions.append(event)
        self._flush()
        if event.method == "stub":
            self._stubbed_before = max(self._stubbed_before, event.end_event)
            for index, (origin, message) in enumerate(zip(self._origins, self._done, strict=True)):
                if origin < self._stubbed_before and isinstance(message, ToolResultMessage):
                    self._done[index] = self._stub(message)
            return
        if event.method not in ("summary", "trim"):
            return  # a newer daemon's method: its view is unknown here, keep everything
        keep = [i for i, origin in enumerate(self._origins) if origin >= event.end_event]
        moved = {old: new + 1 for new, old in enumerate(keep)}
        summary = UserMessage.model_construct(content=summary_message(event))
        self._done = [summary, *(self._done[i] for i in keep)]
        self._origins = [position, *(self._origins[i] for i in keep)]
        self._interrupted = {
            call: moved[index] for call, index in self._interrupted.items() if index in moved
        }

    def _stub(self, message: ToolResultMessage) -> ToolResultMessage:
        if message.content.startswith(STUB_PREFIX):
            return message
        call = self._calls.get(message.tool_call_id)
        what = f"{call.name} {_short(call.arguments)}" if call else "a tool call"
        return ToolResultMessage.model_construct(
            tool_call_id=message.tool_call_id,
            content=(
                f"{STUB_PREFIX} the output of {what} ({len(message.content)} characters"
                f"{', an error' if message.is_error else ''}) was cleared to save context; "
                "call the tool again if it is needed]"
            ),
            is_error=message.is_error,
            images=(),
        )

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

    def _assistant(self, position: int) -> dict[str, Any]:
        if self._pending is None:
            self._pending = {"content": "", "reasoning": None, "tool_calls": []}
            self._pending_origin = position
        return self._pending

    def _flush(self) -> None:
        if self._pending is not None:
            self._append(_assistant_message(self._pending), self._pending_origin)
            self._pending = None


STUB_PREFIX = "[context:"
SUMMARY_HEADER = (
    "[context: the earlier part of this conversation was compacted; its summary follows]"
)
TRIM_NOTE = (
    "[context: the earlier part of this conversation was dropped to fit the model's context "
    "window; ask the user if something from it is needed]"
)


def summary_message(event: ev.ContextCompacted) -> str:
    """The user message a `summary` or `trim` compaction is sent as."""
    if event.method == "trim" or not event.summary:
        return TRIM_NOTE if not event.summary else f"{TRIM_NOTE}\n\n{event.summary}"
    return f"{SUMMARY_HEADER}\n\n{event.summary}"


def _short(arguments: dict[str, Any]) -> str:
    import json

    text = json.dumps(arguments, ensure_ascii=False, sort_keys=True)
    return text if len(text) <= 120 else text[:117] + "..."


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
