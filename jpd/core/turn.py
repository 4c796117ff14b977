"""The turn loop: LLM call -> tool calls -> results -> LLM call, until the model stops.

A turn is one anyio task. Everything it receives is persisted as it completes, and
whatever way it ends (normally, cancelled, provider error, daemon shutdown) it writes
a `turn_end` event, sends a final `turn_completed` and fsyncs the log.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

import anyio

from jpd.config.prices import Price
from jpd.context.keeper import ContextKeeper, compaction_event
from jpd.conversation import events as ev
from jpd.core.checkpoints import Checkpointer
from jpd.core.hub import EventHub
from jpd.core.model_slots import model_slot
from jpd.core.structured import check_answer
from jpd.core.transcript import Transcript
from jpd.core.turn_model_call import ModelCall, usage_cost
from jpd.llm import base as llm
from jpd.llm import forced_tool
from jpd.llm.errors import ProviderError
from jpd.llm.history import MessageHistory
from jpd.protocol.modes import PermissionMode
from jpd.protocol.turn_events import (
    ForcedToolRetried,
    ReasoningDeltaEvent,
    RetryScheduled,
    StopReason,
    TextDeltaEvent,
    ToolCallStarted,
    ToolResult,
    TurnCompleted,
    TurnEvent,
    TurnStarted,
)
from jpd.tools.base import ToolResultData, ToolRunner

# Loaded with the first `turn/resume`: a turn that continues no other never needs it.
if TYPE_CHECKING:
    from jpd.conversation.resume import ResumePlan

log = logging.getLogger(__name__)

MAX_CYCLES = 32
TAKEN_OVER = "taken over: the daemon running this turn stopped"


class EventLog(Protocol):
    """The part of the store a turn writes to."""

    def append(self, conversation_id: str, event: ev.Event) -> None: ...
    async def sync(self, conversation_id: str) -> None: ...


@dataclass
class TurnSpec:
    """Everything a turn needs, resolved before it starts."""

    conversation_id: str
    turn_id: str
    message: str
    model_id: str
    provider: llm.Provider
    tools: ToolRunner
    transcript: Transcript
    """The conversation so far; the turn extends it with each event it records."""
    system: str | None = None
    max_tokens: int | None = None
    temperature: float | None = None
    reasoning_effort: Literal["off", "low", "medium", "high"] = "off"
    reasoning_budget: int | None = None
    first_tool_choice: llm.ToolChoice = field(default_factory=llm.ToolChoiceAuto)
    """`tool_choice` of the turn's first model call; later calls use `auto`."""
    workspace: str | None = None
    """The client's workspace root, recorded in `turn_start`."""
    extra_roots: tuple[Path, ...] = ()
    """The client's additional directories (`environment.additionalRoots`)."""
    price: Price | None = None
    """`[prices]` of the model, for the cost in `usage` events."""
    mode: PermissionMode = "ask"
    """The turn's permission mode, recorded in `turn_start`."""
    images: list[ev.ImageFile] = field(default_factory=list)
    """Image files sent with the message (written before the turn starts)."""
    resume: ResumePlan | None = None
    """Set when the turn continues an interrupted one (`turn/resume`, protocol.md 12.4)."""
    kept_config: dict[str, Any] | None = None
    """The config the conversation keeps from now on, recorded in `turn_start`."""
    attachments: list[str] = field(default_factory=list)
    """The attachments sent, recorded in `turn_start`."""
    response_schema: dict[str, Any] | None = None
    """The answer must be JSON valid against this schema (`turn/start` `responseSchema`)."""
    instruction_files: list[str] = field(default_factory=list)
    """The project instruction files (`AGENTS.md`) in `system`, recorded in `turn_start`."""
    context: ContextFactory | None = None
    """Builds the keeper that counts and compacts each request (protocol.md 12.5)."""


ContextFactory = Callable[[MessageHistory, Callable[[ev.ContextCompacted], None]], ContextKeeper]


class Turn:
    """One running turn. `run` drives it; `cancel` stops it promptly."""

    def __init__(self, spec: TurnSpec, log_: EventLog, hub: EventHub, started_at: datetime) -> None:
        self.spec = spec
        self.started_at = started_at
        self._log = log_
        self._hub = hub
        self.transcript = spec.transcript
        self._history = spec.transcript.history
        self._open_calls: list[llm.ToolCallPart] = []
        self._ending: list[ev.Event] = []
        """The last model output, recorded with the turn's end (`_finish`)."""
        self._scope = anyio.CancelScope()
        self.done = anyio.Event()
        self.stop_reason: StopReason = "cancelled"
        self._context = spec.context(self._history, self._compacted) if spec.context else None
        checkpoints = Checkpointer(
            spec.turn_id, lambda event: log_.append(spec.conversation_id, event)
        )
        self._model = ModelCall(
            spec,
            self._context,
            checkpoints,
            self._publish,
            hub.delta_sender(spec.conversation_id, spec.turn_id),
            self._call_started,
        )

    @property
    def conversation_id(self) -> str:
        return self.spec.conversation_id

    @property
    def turn_id(self) -> str:
        return self.spec.turn_id

    def cancel(self) -> None:
        """Ask the turn to stop; it ends with stop reason `cancelled`."""
        self._scope.cancel()

    async def run(self) -> None:
        """Run the turn to completion; never raises except for outer cancellation."""
        stop: StopReason = "cancelled"
        error: str | None = None
        try:
            with self._scope:
                try:
                    stop = await self._cycles()
                except ProviderError as exc:
                    stop, error = "error", exc.message
                except Exception as exc:  # a turn must always end cleanly
                    log.exception("turn %s failed", self.turn_id)
                    stop, error = "error", f"internal error: {type(exc).__name__}: {exc}"
        finally:
            with anyio.CancelScope(shield=True):
                await self._finish(stop, error)

    def _record(self, event: ev.Event) -> None:
        self._log.append(self.conversation_id, event)
        self._history.add(event)  # only what reached the log

    def _record_all(self, *events: ev.Event) -> None:
        """`_record` of events recorded together: in one write where the store can."""
        append_many = getattr(self._log, "append_many", None)
        if append_many is None:
            for event in events:
                self._record(event)
            return
        append_many(self.conversation_id, events)
        for event in events:
            self._history.add(event)

    async def _written(self) -> None:
        """A fleet's store writes appends in a task of its own: tools act only once
        their calls are in the log (a member taking the turn over must see them)."""
        pending = getattr(self._log, "appends_pending", None)
        if pending is not None and pending(self.conversation_id):
            await self._log.written(self.conversation_id)  # type: ignore[attr-defined]

    def _compacted(self, event: ev.ContextCompacted) -> None:
        self._record(event)
        self._publish(compaction_event(event))

    def _publish(self, event: TurnEvent) -> None:
        self._hub.publish(self.conversation_id, self.turn_id, event)

    async def _cycles(self) -> StopReason:
        spec = self.spec
        if spec.resume is not None:
            await self._resume(spec.resume)
        else:
            self._record_all(
                ev.TurnStart(
                    turn_id=spec.turn_id,
                    model=spec.model_id,
                    workspace=spec.workspace,
                    mode=spec.mode,
                    reasoning_effort=spec.reasoning_effort,
                    config=spec.kept_config,
                    instructions=spec.instruction_files or None,
                    attachments=spec.attachments or None,
                ),
                ev.ChatRequest(content=spec.message, images=spec.images or None),
            )
            self._publish(TurnStarted(model=spec.model_id))
        for cycle in range(MAX_CYCLES):
            choice = spec.first_tool_choice if cycle == 0 else llm.TOOL_CHOICE_AUTO
            reason = await self._call_model(choice)
            if self._forced_call_missed(reason):
                reason = await self._retry_forced(choice)
            answer = self._model.partial.text
            outputs, calls = self._partial()
            if not calls:
                # Recorded with the turn's end, in one write (`_finish`), in this order.
                self._ending = outputs
                if spec.response_schema is not None and reason != "max_tokens":
                    check_answer(answer, spec.response_schema)  # else the turn fails
                return "max_tokens" if reason == "max_tokens" else "end_turn"
            self._record_all(*outputs)  # before the tools act on them
            self._open_calls = calls
            names = {call.id: call.name for call in calls}
            await self._written()
            await spec.tools.run(calls, on_result=functools.partial(self._call_ended, names))
            self._open_calls = []
        raise ProviderError(f"the model kept calling tools for {MAX_CYCLES} rounds; turn stopped")

    async def _resume(self, plan: ResumePlan) -> None:
        """Continue an interrupted turn: re-run its interrupted calls, or ask the model to
        go on with an output cut while it streamed; the model is called next as usual."""
        self._record(ev.TurnResume(turn_id=self.turn_id))
        if plan.takeover and plan.cut_in_call:
            # Clients following the turn saw the cut call's deltas as its member sent
            # them: discard them (a retry), then show what the log kept of that output.
            self._publish(RetryScheduled(attempt=1, delay=0.0, reason=TAKEN_OVER))
        self._publish(TurnStarted(model=self.spec.model_id))
        if plan.takeover:
            for kind, text in plan.cut_output:
                delta = TextDeltaEvent if kind == "text" else ReasoningDeltaEvent
                self._publish(delta(text=text))
        if plan.continue_output:
            from jpd.conversation.resume import CONTINUE_INSTRUCTION

            self._record(ev.ChatRequest(content=CONTINUE_INSTRUCTION))
        if plan.rerun:
            calls = [
                llm.ToolCallPart(id=r.id, name=r.name, arguments=r.arguments) for r in plan.rerun
            ]
            for call in calls:
                self._publish(self._call_started(call.id, call.name, call.arguments))
            self._open_calls = calls
            names = {call.id: call.name for call in calls}
            await self._written()
            await self.spec.tools.run(calls, on_result=functools.partial(self._call_ended, names))
            self._open_calls = []

    def _title(self, call: llm.ToolCallPart) -> str:
        from jpd.tools.titles import call_title

        root = Path(self.spec.workspace) if self.spec.workspace else Path.cwd()
        return call_title(call.name, call.arguments, root)

    def _call_started(self, call_id: str, name: str, arguments: dict[str, Any]) -> ToolCallStarted:
        """The `tool_call` event: what editors show of a call (kind, places, edit)."""
        from jpd.tools.call_view import call_view

        root = Path(self.spec.workspace) if self.spec.workspace else Path.cwd()
        view = call_view(name, arguments, root, self.spec.extra_roots)
        return ToolCallStarted(
            id=call_id,
            name=name,
            arguments=arguments,
            hidden=self.spec.tools.hidden(name),
            title=view.title,
            tool_kind=view.kind,
            locations=view.locations,
            diff=view.diff,
        )

    def _call_ended(self, names: dict[str, str], result: ToolResultData) -> None:
        """Record and send a call's result as soon as it ends, not when the slowest of its
        batch does (protocol.md 9.3)."""
        self._open_calls = [c for c in self._open_calls if c.id != result.id]
        self._record(
            ev.ToolCallResponse(
                id=result.id,
                content=result.content,
                is_error=result.is_error,
                images=list(result.images) or None,
            )
        )
        self._publish(
            ToolResult(
                id=result.id,
                content=result.content,
                is_error=result.is_error,
                hidden=self.spec.tools.hidden(names.get(result.id, "")),
            )
        )

    def _forced_call_missed(self, reason: llm.FinishReason) -> bool:
        """Whether the last call, forced and sent softened, ended without any tool call."""
        request = self.transcript.last_request
        return (
            request is not None
            and not self._model.partial.calls
            and forced_tool.soft_forced(self.spec.provider, request)
            and forced_tool.missed(request, reason, ())
        )

    async def _retry_forced(self, tool_choice: llm.ToolChoice) -> llm.FinishReason:
        """The one retry of protocol.md 9.2: the first answer (reasoning and text) stays
        in the conversation, a note follows it, and reasoning is off for this one call."""
        self._flush_partial()
        tool = tool_choice.name if isinstance(tool_choice, llm.ToolChoiceTool) else None
        note = forced_tool.retry_note(tool)
        self._record(ev.ForcedToolRetry(tool=tool, message=note))
        self._publish(ForcedToolRetried(tool=tool, message=note))
        return await self._call_model(tool_choice, reasoning=False)

    async def _call_model(
        self, tool_choice: llm.ToolChoice, *, reasoning: bool = True
    ) -> llm.FinishReason:
        async with model_slot(self._log, self.spec.model_id):
            return await self._model.run(tool_choice, reasoning=reasoning)

    def _flush_partial(self) -> None:
        """Persist the current model output (before a forced-tool retry)."""
        outputs, _calls = self._partial()
        self._record_all(*outputs)

    def _partial(self) -> tuple[list[ev.Event], list[llm.ToolCallPart]]:
        """The events that record the current model output (taken), and its tool calls."""
        partial = self._model.take()
        usage = partial.usage
        outputs: list[ev.Event] = []
        if partial.reasoning or partial.signature:
            # A signature alone (Gemini's thought signature) is reasoning state to send back.
            outputs.append(
                ev.ChatResponse(reasoning=partial.reasoning, signature=partial.signature)
            )
        if partial.text or usage is not None:
            price_of = usage_cost(self.spec.price, usage) if usage is not None else None
            outputs.append(ev.ChatResponse(message=partial.text, usage=usage, cost=price_of))
            usage = None
        for call in partial.calls:
            outputs.append(
                ev.ToolCallRequest(
                    id=call.id, name=call.name, arguments=call.arguments, title=self._title(call)
                )
            )
        return outputs, partial.calls

    async def _finish(self, stop: StopReason, error: str | None) -> None:
        try:
            # The last output, the responses the log still lacks and the end: one write
            # (a write per event was a quarter of the turn's log writes).
            ending, self._ending = self._ending, []
            outputs, calls = self._partial()
            ending += outputs
            for call in calls + self._open_calls:
                # Keep the log well formed: every request gets a response.
                ending.append(
                    ev.ToolCallResponse(
                        id=call.id,
                        content="Tool call was interrupted by cancellation.",
                        is_error=True,
                    )
                )
            ending.append(ev.TurnEnd(turn_id=self.turn_id, stop_reason=stop, error=error))
            self._record_all(*ending)
            await self._log.sync(self.conversation_id)
        except Exception:  # the client must still learn the turn ended
            log.exception("could not record the end of turn %s", self.turn_id)
        finally:
            self.stop_reason = stop
            self._publish(TurnCompleted(stop_reason=stop, error=error))
            self.done.set()
