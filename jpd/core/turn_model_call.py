"""A turn's model calls: the request each one sends, the stream it reads, its output so far.

The output is kept as it streams (`Partial`) so the turn can persist it even when the call
is cut short; publishing deltas, tool calls, usage and retries happens here as they arrive.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from jpd.config.prices import Price, cost
from jpd.context.keeper import ContextKeeper
from jpd.core.checkpoints import Checkpointer
from jpd.core.deltas import DeltaBatcher
from jpd.core.structured import with_schema
from jpd.llm import base as llm
from jpd.protocol.turn_events import (
    ContextUsage,
    RetryScheduled,
    ToolCallStarted,
    TurnEvent,
    UsageReported,
)
from jpd.protocol.turn_notes import DeltaKind
from jpd.protocol.usage import TokenUsage

if TYPE_CHECKING:
    from jpd.core.turn import TurnSpec

CallStarted = Callable[[str, str, dict[str, Any]], ToolCallStarted]


@dataclass
class Partial:
    """Output of the model call in progress, persisted even if the call is cut short."""

    texts: list[str] = field(default_factory=list)  # joined once, not per token
    reasoning: str = ""
    signature: str | None = None
    calls: list[llm.ToolCallPart] = field(default_factory=list)
    usage: TokenUsage | None = None

    @property
    def text(self) -> str:
        return "".join(self.texts)


class ModelCall:
    """Makes a turn's model calls one at a time; `partial` is the latest one's output."""

    def __init__(
        self,
        spec: TurnSpec,
        context: ContextKeeper | None,
        checkpoints: Checkpointer,
        publish: Callable[[TurnEvent], None],
        publish_delta: Callable[[DeltaKind, str], None],
        call_started: CallStarted,
    ) -> None:
        self._spec = spec
        self._transcript = spec.transcript
        self._history = spec.transcript.history
        self._context = context
        self._checkpoints = checkpoints
        self._publish = publish
        self._publish_delta = publish_delta
        self._call_started = call_started
        self.partial = Partial()

    def take(self) -> Partial:
        """The output so far, leaving an empty one in its place."""
        partial, self.partial = self.partial, Partial()
        return partial

    async def run(self, tool_choice: llm.ToolChoice, *, reasoning: bool) -> llm.FinishReason:
        """Send the conversation to the model and read its answer into `partial`."""
        spec = self._spec
        schema = spec.response_schema
        reasoning = reasoning and schema is None  # a structured answer is one forced call
        # Every field comes from the turn's validated config, its tools' definitions and
        # events validated where they entered: built as is, not validated again on every
        # model call (of a long conversation, or of a thousand turns starting at once).
        request = llm.ModelRequest.model_construct(
            model=spec.model_id.split("/", 1)[1],
            system=with_schema(spec.system, schema),
            messages=tuple(self._history.messages()),
            tools=tuple(spec.tools.definitions()) if schema is None else (),
            tool_choice=tool_choice if schema is None else llm.TOOL_CHOICE_AUTO,
            response_schema=schema,
            max_tokens=spec.max_tokens,
            temperature=spec.temperature,
            reasoning_effort=spec.reasoning_effort if reasoning else "off",
            reasoning_budget=spec.reasoning_budget if reasoning else None,
        )
        if self._context is not None:
            request = await self._context.fit(request)
        self._transcript.last_request = request
        self.partial = Partial()
        self._checkpoints.start_call()
        deltas = DeltaBatcher(self._publish_delta)

        def emit(event: TurnEvent) -> None:
            deltas.flush()  # merged deltas go out before whatever follows them
            self._publish(event)

        # Timers of the loop, not tasks, tick the deltas and checkpoints: a model call
        # starts no task (an anyio task and its group cost more than the call's request).
        self._checkpoints.join()
        try:
            return await self._consume(request, deltas, emit)
        finally:
            deltas.flush()
            self._checkpoints.leave()

    async def _consume(
        self, request: llm.ModelRequest, deltas: DeltaBatcher, emit: Callable[[TurnEvent], None]
    ) -> llm.FinishReason:
        """Read the model's stream into the partial output, publishing as it goes."""

        async def send(request: llm.ModelRequest) -> llm.FinishReason:
            self._transcript.last_request = request
            reason: llm.FinishReason = "end_turn"
            async with self._spec.provider.stream(request) as events:
                async for item in events:
                    reason = self._take(item, deltas, emit) or reason
                    # Not kept while the next one is awaited: a thousand waiting turns'
                    # would fill the collector's young generation (each pass walks it).
                    del item
            return reason

        if self._context is None:
            return await send(request)
        return await self._context.send(request, send)

    def _take(
        self, item: llm.StreamEvent, deltas: DeltaBatcher, emit: Callable[[TurnEvent], None]
    ) -> llm.FinishReason | None:
        """One stream event into the partial output; the finish reason once it ends."""
        partial = self.partial
        if isinstance(item, llm.TextDelta):
            partial.texts.append(item.text)
            deltas.add("text_delta", item.text)
            self._checkpoints.text(item.text)
        elif isinstance(item, llm.ReasoningDelta):
            partial.reasoning += item.text
            if item.signature:
                partial.signature = item.signature
            if item.text:
                deltas.add("reasoning_delta", item.text)
                self._checkpoints.reasoning(item.text)
        elif isinstance(item, llm.ToolCallEvent):
            partial.calls.append(
                llm.ToolCallPart(id=item.id, name=item.name, arguments=item.arguments)
            )
            emit(self._call_started(item.id, item.name, item.arguments))
        elif isinstance(item, llm.UsageEvent):
            partial.usage = item.usage
            emit(
                UsageReported(
                    usage=item.usage,
                    cost=usage_cost(self._spec.price, item.usage),
                    context=self._context_usage(item.usage),
                )
            )
        elif isinstance(item, llm.Retry):
            # A retried call starts over: drop what the failed attempt produced.
            self.partial = Partial()
            self._checkpoints.retry()
            emit(RetryScheduled(attempt=item.attempt, delay=item.delay, reason=item.reason))
        elif isinstance(item, llm.Finish):
            return item.reason
        return None

    def _context_usage(self, usage: TokenUsage) -> ContextUsage | None:
        request = self._transcript.last_request
        if self._context is None or request is None:
            return None
        return self._context.observe(request, usage)


def usage_cost(price: Price | None, usage: TokenUsage) -> float | None:
    """The cost of `usage` at `price`; None when the model has no price."""
    if price is None:
        return None
    return cost(price, usage.input_tokens, usage.output_tokens)
