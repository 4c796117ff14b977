"""How a turn's events reach its log (`jpd.core.turn`): each model output in one write,
the last one with the turn's end, in the order the events happened."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

import anyio

from jpd.conversation import events as ev
from jpd.core.transcript import Transcript
from jpd.core.turn import Turn, TurnSpec
from jpd.llm.base import ToolChoiceAuto
from jpd.llm.history import MessageHistory
from jpd.protocol.turn_events import TurnCompleted
from tests.conformance.test_forced_retry import Hub, Tools
from tests.fixtures.choice_provider import ChoiceProvider, Reply, call, text
from tests.unit.fakes import FakeLog


class WriteLog(FakeLog):
    """A log that keeps each write (`append_many` as the store has it)."""

    def __init__(self, fail_at: int | None = None) -> None:
        super().__init__()
        self.writes: list[list[type[ev.Event]]] = []
        self.fail_at = fail_at

    def append(self, conversation_id: str, event: ev.Event) -> None:
        self.append_many(conversation_id, (event,))

    def append_many(self, conversation_id: str, events: Sequence[ev.Event]) -> None:
        if self.fail_at is not None and len(self.writes) == self.fail_at:
            raise OSError("disk full")
        self.writes.append([type(e) for e in events])
        self.events.extend(events)


async def run(log_: WriteLog, *replies: Reply) -> tuple[Turn, Hub]:
    hub = Hub()
    spec = TurnSpec(
        conversation_id="c",
        turn_id="t",
        message="go",
        model_id="anthropic/claude",
        provider=ChoiceProvider(*replies),
        tools=Tools(),  # type: ignore[arg-type]
        transcript=Transcript(MessageHistory()),
        reasoning_effort="low",
        first_tool_choice=ToolChoiceAuto(),
    )
    turn = Turn(spec, log_, hub, datetime.now(UTC))  # type: ignore[arg-type]
    with anyio.fail_after(5):
        await turn.run()
    return turn, hub


async def test_the_answer_and_the_end_are_one_write() -> None:
    log_ = WriteLog()
    turn, _hub = await run(log_, text("hi", reasoning="think"))
    assert log_.writes == [
        [ev.TurnStart, ev.ChatRequest],
        [ev.ChatResponse, ev.ChatResponse, ev.TurnEnd],  # reasoning, answer, end
    ]
    assert turn.stop_reason == "end_turn" and log_.syncs == 1
    # What the turn remembers of its conversation is what reached the log.
    assert [type(m).__name__ for m in turn.transcript.history.messages()] == [
        "UserMessage",
        "AssistantMessage",
    ]


async def test_tool_calls_are_written_before_the_tools_run() -> None:
    log_ = WriteLog()
    await run(log_, call("echo"), text("done"))
    assert log_.writes == [
        [ev.TurnStart, ev.ChatRequest],
        [ev.ToolCallRequest],  # before `echo` acts on it
        [ev.ToolCallResponse],
        [ev.ChatResponse, ev.TurnEnd],
    ]


async def test_an_end_that_cannot_be_written_still_completes_the_turn() -> None:
    log_ = WriteLog(fail_at=1)  # the answer and the end: disk full
    turn, hub = await run(log_, text("hi"))
    assert log_.writes == [[ev.TurnStart, ev.ChatRequest]]
    assert isinstance(hub.events[-1], TurnCompleted) and turn.done.is_set()
    # Nothing unwritten counts as the conversation's.
    assert [type(m).__name__ for m in turn.transcript.history.messages()] == ["UserMessage"]
