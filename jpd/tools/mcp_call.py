"""One MCP tool call as the coordinator runs it: the hooks through which the server's
questions, sampling requests and progress reach this turn (protocol.md 9.6, 9.7)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from jpd.conversation import events as ev
from jpd.inquiry.router import BackendError, QuestionContext, Resolved, Router
from jpd.llm.base import ToolCallPart
from jpd.mcp.model import Asked, SamplingError, SamplingRequest
from jpd.protocol.detached import DetachedMode
from jpd.protocol.question import Question
from jpd.tools.catalog import EffectiveTool
from jpd.tools.permissions import PermissionGate

ProgressSink = Callable[[str, float, float | None, str | None], None]
"""(tool call id, progress, total, message) -> publish a `tool_progress` event."""


class Sampler(Protocol):
    """Completes a sampling request with the inquiry model."""

    async def complete(
        self,
        system: str | None,
        messages: Sequence[tuple[str, str]],
        max_tokens: int,
        temperature: float | None,
    ) -> str:
        """The model's text (raises `BackendError` on failure)."""
        ...


@dataclass
class McpCallHooks:
    """`CallHooks` for one call of an MCP tool."""

    tool: EffectiveTool
    call: ToolCallPart
    router: Router
    gate: PermissionGate
    conversation_id: str
    turn_id: str
    detached_override: DetachedMode | None
    on_progress: ProgressSink | None
    sampler: Sampler | None
    record: Callable[[ev.Event], None] | None = None
    _samplings: int = 0

    @property
    def call_id(self) -> str:
        """The tool call this is a part of."""
        return self.call.id

    async def ask(self, question: Question) -> Asked:
        """Route `question` as a question of this call."""
        config = self.tool.config
        resolution = await self.router.resolve(
            QuestionContext(
                conversation_id=self.conversation_id,
                turn_id=self.turn_id,
                tool_name=self.tool.name,
                tool_call_id=self.call.id,
                source=self._source(),
                question=question,
                config=config.questions.get(question.id),
                detached=config.detached_policy("tool", self.detached_override),
            )
        )
        if isinstance(resolution, Resolved):
            return Asked(answered=True, value=resolution.answer)
        return Asked(answered=False, reason=resolution.reason, message=resolution.message)

    def _source(self) -> ev.ToolSource:
        return ev.ToolSource(name=self.tool.name)

    async def sample(self, request: SamplingRequest) -> str | None:
        """Permission (unless the server's `sampling` is `unattended`), then the model;
        the exchange is recorded as a `sampling` event."""
        self._samplings += 1
        sampling_id = f"{self.call.id}.sampling.{self._samplings}"
        allowed = self.sampler is not None
        if allowed and request.ask_permission:
            arguments: dict[str, Any] = {
                "system": request.system,
                "messages": [{"role": r, "text": t} for r, t in request.messages],
                "maxTokens": request.max_tokens,
            }
            allowed = await self.gate.allowed(
                "sampling", self.tool.name, self.tool.config, self.call.id, arguments
            )
        if not allowed or self.sampler is None:
            self._record(sampling_id, request, "refused", None)
            return None
        try:
            text = await self.sampler.complete(
                request.system, request.messages, request.max_tokens, request.temperature
            )
        except BackendError as exc:
            self._record(sampling_id, request, "failed", str(exc))
            raise SamplingError(str(exc)) from exc
        self._record(sampling_id, request, "completed", text)
        return text

    def _record(
        self, sampling_id: str, request: SamplingRequest, outcome: Any, text: str | None
    ) -> None:
        if self.record is None:
            return
        messages = [
            ev.SamplingMessage(role="assistant" if role == "assistant" else "user", text=body)
            for role, body in request.messages
        ]
        self.record(
            ev.Sampling(
                id=sampling_id,
                server=request.server,
                system=request.system,
                messages=messages,
                outcome=outcome,
                text=text,
            )
        )

    def progress(self, progress: float, total: float | None, message: str | None) -> None:
        """Publish the server's progress as a `tool_progress` event of this call."""
        if self.on_progress is not None:
            self.on_progress(self.call.id, progress, total, message)
