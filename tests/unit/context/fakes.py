"""A model with a hard context window, for compaction tests: it refuses any request over
its window (as providers do), checks that every tool call is answered by its result and
no result comes without its call, and answers summary requests."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from jpd.config import Config
from jpd.conversation import events as ev
from jpd.core.hub import EventHub
from jpd.core.transcript import Transcript
from jpd.core.turn import Turn
from jpd.core.turn_setup import turn_spec
from jpd.llm import base as llm
from jpd.llm.errors import ContextOverflow, ProviderError
from jpd.llm.history import MessageHistory
from jpd.protocol.turn_events import ReasoningDeltaEvent, TextDeltaEvent, TurnEvent
from jpd.protocol.turn_notes import DeltaKind
from jpd.protocol.usage import TokenUsage
from jpd.tools.base import ResultCallback, ToolResultData


def tokens(request: llm.ModelRequest) -> int:
    """The fake model's own tokenizer: 3 characters a token (the estimator assumes 4)."""
    text = (request.system or "") + json.dumps([m.model_dump() for m in request.messages])
    text += json.dumps([t.model_dump() for t in request.tools])
    return len(text) // 3


def check_pairing(messages: Sequence[llm.Message]) -> None:
    open_calls: set[str] = set()
    for message in messages:
        if isinstance(message, llm.ToolResultMessage):
            assert message.tool_call_id in open_calls, f"result without call {message}"
            open_calls.discard(message.tool_call_id)
            continue
        assert not open_calls, f"calls without results before {message.role}: {open_calls}"
        if isinstance(message, llm.AssistantMessage):
            open_calls = {c.id for c in message.tool_calls}
    assert not open_calls or isinstance(messages[-1], llm.ToolResultMessage)


@dataclass
class WindowModel:
    window: int
    summary: str | list[str] = "Goal: test. Constraints: 'always use tabs'."
    """The summaries it writes, in turn (the last repeats); "" writes an empty one,
    "CUT" one cut off at max_tokens, "OVERFLOW" refuses the request as too long."""
    calls_tool: bool = True
    parallel: int = 1
    """Tool calls per answer that calls tools (a parallel batch)."""
    answer: str = "ok"
    name: str = "test"
    refuses_forced_tool_with_reasoning: bool = False
    refusal: str = "prompt is too long: {size} tokens > {window} maximum"
    """What it says when it refuses (Anthropic's wording by default)."""
    requests: list[llm.ModelRequest] = field(default_factory=list)
    sizes: list[int] = field(default_factory=list)
    refused: int = 0
    summaries: int = 0

    def stream(self, request: llm.ModelRequest) -> llm.EventStream:
        return self._stream(request)

    @asynccontextmanager
    async def _stream(self, request: llm.ModelRequest) -> AsyncIterator[AsyncIterator[Any]]:
        self.requests.append(request)
        size = tokens(request)
        if size + (request.max_tokens or 0) > self.window:
            self.refused += 1
            raise ContextOverflow(self.refusal.format(size=size, window=self.window))
        check_pairing(request.messages)
        self.sizes.append(size)
        yield self._events(request, size)

    async def _events(self, request: llm.ModelRequest, size: int) -> AsyncIterator[Any]:
        last = request.messages[-1]
        usage = llm.UsageEvent(usage=TokenUsage(input_tokens=size, output_tokens=5))
        if isinstance(last, llm.UserMessage) and last.content.startswith("Stop here"):
            script = [self.summary] if isinstance(self.summary, str) else self.summary
            text = script[min(self.summaries, len(script) - 1)]
            self.summaries += 1
            if text == "OVERFLOW":
                raise ContextOverflow("prompt is too long (summary)")
            yield llm.TextDelta(text=text.replace("CUT", "Goal: half a sum"))
            yield usage
            yield llm.Finish(reason="max_tokens" if text == "CUT" else "end_turn")
            return
        if self.calls_tool and isinstance(last, llm.UserMessage):
            n = len(self.requests)
            for k in range(self.parallel):
                path = f"f{n}.{k}"
                yield llm.ToolCallEvent(id=f"c{n}.{k}", name="read", arguments={"path": path})
            yield usage
            yield llm.Finish(reason="tool_use")
            return
        yield llm.TextDelta(text=self.answer)
        yield usage
        yield llm.Finish(reason="end_turn")

    async def aclose(self) -> None:
        pass


class BigTools:
    """One tool whose every output is `size` characters."""

    def __init__(self, size: int) -> None:
        self.size = size

    def definitions(self) -> tuple[llm.ToolDefinition, ...]:
        schema = {"type": "object", "properties": {"path": {"type": "string"}}}
        return (llm.ToolDefinition(name="read", description="read a file", parameters=schema),)

    def hidden(self, name: str) -> bool:
        return False

    async def run(
        self, calls: Sequence[llm.ToolCallPart], on_result: ResultCallback | None = None
    ) -> list[ToolResultData]:
        out = []
        for call in calls:
            result = ToolResultData(id=call.id, content="x" * self.size, is_error=False)
            if on_result:
                on_result(result)
            out.append(result)
        return out


class MemoryLog:
    def __init__(self) -> None:
        self.events: list[ev.Event] = []

    def append(self, conversation_id: str, event: ev.Event) -> None:
        self.events.append(event)

    async def sync(self, conversation_id: str) -> None:
        pass


class Hub(EventHub):
    def __init__(self) -> None:
        self.published: list[TurnEvent] = []

    def publish(self, conversation_id: str, turn_id: str, event: TurnEvent) -> Any:
        self.published.append(event)

    def delta_sender(self, conversation_id: str, turn_id: str) -> Callable[[DeltaKind, str], None]:
        def publish_delta(kind: DeltaKind, text: str) -> None:
            delta = TextDeltaEvent if kind == "text_delta" else ReasoningDeltaEvent
            self.published.append(delta(text=text))

        return publish_delta


def config(**context: Any) -> Config:
    window = context.pop("window", 20_000)
    data: dict[str, Any] = {
        "assistant": {"model": {"id": "test/window", "context_window": window}},
        "conversation": {"context": context},
    }
    return Config.model_validate(data)


@dataclass
class Conversation:
    """Turns run one after another on one history and one in-memory log."""

    cfg: Config
    model: WindowModel
    tools: BigTools
    log: MemoryLog = field(default_factory=MemoryLog)
    hub: Hub = field(default_factory=Hub)
    history: MessageHistory = field(default_factory=MessageHistory)

    async def turn(self, message: str) -> Turn:
        spec = turn_spec(
            self.cfg,
            conversation_id="c",
            turn_id=f"t{len(self.log.events)}",
            message=message,
            provider=self.model,
            tools=self.tools,
            transcript=Transcript(self.history),
            workspace=None,
        )
        turn = Turn(spec, self.log, self.hub, datetime.now(UTC))
        await turn.run()
        return turn

    def compactions(self) -> list[ev.ContextCompacted]:
        return [e for e in self.log.events if isinstance(e, ev.ContextCompacted)]

    def errors(self) -> list[str | None]:
        return [e.error for e in self.log.events if isinstance(e, ev.TurnEnd) and e.error]


__all__ = ["ProviderError"]
