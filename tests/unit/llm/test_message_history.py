"""The message history is built once and extended per event (protocol.md section 8)."""

from __future__ import annotations

from jpd.conversation import events as ev
from jpd.llm.base import AssistantMessage, ToolCallPart, ToolResultMessage, UserMessage
from jpd.llm.history import MessageHistory, to_messages
from jpd.protocol.usage import TokenUsage

EVENTS: list[ev.Event] = [
    ev.TurnStart(turn_id="t1"),
    ev.ChatRequest(content="list files"),
    ev.ChatResponse(reasoning="I should call ls", signature="sig"),
    ev.ChatResponse(message="Let me look."),
    ev.ToolCallRequest(id="c1", name="ls", arguments={"path": "."}),
    ev.ToolCallResponse(id="c1", content="a.py"),
    ev.ChatResponse(message="One file: a.py", usage=TokenUsage(input_tokens=3)),
    ev.TurnEnd(turn_id="t1", stop_reason="end_turn"),
    ev.TurnStart(turn_id="t2"),
    ev.ChatRequest(content="thanks"),
]


def test_extending_event_by_event_matches_building_from_scratch_at_every_step() -> None:
    history = MessageHistory()
    for n, event in enumerate(EVENTS, start=1):
        history.add(event)
        assert history.messages() == to_messages(EVENTS[:n])


def test_messages_are_the_validated_shapes() -> None:
    messages = MessageHistory(EVENTS).messages()
    assert messages == [
        UserMessage(content="list files"),
        AssistantMessage(
            content="Let me look.",
            reasoning="I should call ls",
            reasoning_signature="sig",
            tool_calls=(ToolCallPart(id="c1", name="ls", arguments={"path": "."}),),
        ),
        ToolResultMessage(tool_call_id="c1", content="a.py"),
        AssistantMessage(content="One file: a.py"),
        UserMessage(content="thanks"),
    ]
    # Constructed without a second validation, they still validate as they are.
    for message in messages:
        assert type(message).model_validate(message.model_dump()) == message


def test_messages_returns_a_new_list_each_time() -> None:
    history = MessageHistory(EVENTS[:2])
    first = history.messages()
    history.add(ev.ChatResponse(message="hi"))
    assert len(first) == 1 and len(history.messages()) == 2
