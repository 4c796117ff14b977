"""The inquiry router: who answers a tool's question, decided in one place.

Order (protocol.md section 10.1): the static `answer` from config; the turn cache; then by
target: `assistant` goes to the LLM inquiry backend (never for exclusive or secret
questions); `user` goes to attached prompt-capable clients; with none, the detached
policy (`jpd.inquiry.detached`, section 10.2). Every question is recorded before any
routing decision and closed with exactly one response.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import anyio

from jpd.config.models import PartialAssistantConfig
from jpd.config.tools import DetachedPolicy, QuestionConfig
from jpd.conversation import events as ev
from jpd.inquiry import messages
from jpd.inquiry.detached import Automatic, ClientAnswered, UseDefault, apply_detached
from jpd.inquiry.pending import Answer, PendingQuestions, Reply, Request, now
from jpd.inquiry.recorder import InquiryRecorder
from jpd.protocol.client_port import ClientLink
from jpd.protocol.method_table import INQUIRY_PROMPT
from jpd.protocol.question import Question, validate_answer
from jpd.protocol.server_requests import (
    InquiryPromptParams,
    InquiryPromptResult,
    PendingInfo,
    SourceWire,
)

log = logging.getLogger(__name__)


class BackendError(Exception):
    """The LLM inquiry backend could not produce a valid answer."""


@dataclass
class QuestionContext:
    """One in-flight question and everything that decides its routing."""

    conversation_id: str
    turn_id: str
    tool_name: str
    tool_call_id: str
    source: ev.ToolSource | ev.AssistantSource
    question: Question
    config: QuestionConfig | None
    detached: DetachedPolicy
    """For kind `tool`, with the request's override applied."""
    inquiry_id: str = ""

    @property
    def exclusive(self) -> bool:
        """Human-only: the tool's flag, overridable in config."""
        override = self.config.exclusive if self.config else None
        return self.question.exclusive if override is None else override

    @property
    def secret(self) -> bool:
        """Never answered by a model, persisted, or remembered."""
        return self.question.secret

    @property
    def cache_key(self) -> str:
        return f"{self.tool_name}.{self.question.id}"

    @property
    def cacheable(self) -> bool:
        return not self.secret and self.question.persistence != "none"


class InquiryBackend(Protocol):
    """Answers a question with the LLM (issue: the inquiry backend)."""

    async def answer(self, ctx: QuestionContext, target: PartialAssistantConfig | None) -> Any:
        """Return a valid typed answer or raise BackendError."""
        ...


@dataclass(frozen=True)
class Resolved:
    answer: Any


@dataclass(frozen=True)
class Failed:
    """The tool fails with `message` (what the model reads)."""

    message: str
    reason: str = ""
    """The recorded cancel reason (`user`, `no_prompt_backend`, ...)."""


class Router:
    """Routes the questions of one turn."""

    def __init__(
        self,
        pending: PendingQuestions,
        recorder: InquiryRecorder,
        backend: InquiryBackend | None,
        turn_cache: dict[str, Any] | None = None,
        stopping: Callable[[], bool] = lambda: False,
    ) -> None:
        """`stopping()` tells, when a question is cut short, whether the daemon is
        stopping (reason `daemon_stopped`) or only the turn ended (reason `user`)."""
        self._pending = pending
        self._recorder = recorder
        self._backend = backend
        self._cache: dict[str, Any] = {} if turn_cache is None else turn_cache
        self._stopping = stopping

    async def resolve(self, ctx: QuestionContext) -> Resolved | Failed:
        """Answer `ctx.question` or fail; records the request and its response."""
        ctx.inquiry_id = self._recorder.next_id(ctx.tool_call_id, ctx.question.id)
        try:
            # The request is appended before its fsync awaits: a cancel during the fsync
            # still owes it its one response.
            await self._recorder.request(ctx.inquiry_id, ctx.source, ctx.question)
            return await self._route(ctx)
        except anyio.get_cancelled_exc_class():
            # protocol.md 10.3: a turn that ends (turn/cancel) cancels it for the user; a
            # clean stop of the daemon says so, as recovery does after a crash (12.2).
            self._recorder.cancelled(
                ctx.inquiry_id, "daemon_stopped" if self._stopping() else "user"
            )
            raise

    async def _route(self, ctx: QuestionContext) -> Resolved | Failed:
        config = ctx.config
        if config is not None and config.answer is not None:
            try:
                value = validate_answer(ctx.question, config.answer)
            except ValueError as exc:
                return self._fail(
                    ctx,
                    "invalid_static_answer",
                    messages.invalid_static_answer(ctx.tool_name, ctx.question.id, str(exc)),
                )
            return self._answered(ctx, value, remember=False)
        if ctx.cacheable and ctx.cache_key in self._cache:
            return self._answered(ctx, self._cache[ctx.cache_key], remember=False)

        target = config.target if config is not None else "user"
        if target != "user":
            if ctx.exclusive or ctx.secret:
                return self._fail(
                    ctx,
                    "assistant_routing_denied",
                    messages.assistant_routing_denied(ctx.tool_name),
                )
            overrides = target if isinstance(target, PartialAssistantConfig) else None
            return await self._ask_backend(ctx, overrides)

        reply = await self._pending.ask(self._request(ctx), wait=False, wait_limit=None)
        if reply is not None:
            return self._from_human(ctx, reply)
        return await self._detached(ctx)

    async def _detached(self, ctx: QuestionContext) -> Resolved | Failed:
        request = self._request(ctx)

        async def wait(limit: float) -> Reply | None:
            return await self._pending.ask(request, wait=True, wait_limit=limit)

        verdict = await apply_detached(
            ctx.detached,
            wait,
            exclusive=ctx.exclusive,
            secret=ctx.secret,
            has_default=ctx.question.default is not None,
        )
        if isinstance(verdict, ClientAnswered):
            return self._from_human(ctx, verdict.reply)
        if isinstance(verdict, Automatic):
            return await self._ask_backend(ctx, None)
        if isinstance(verdict, UseDefault):
            try:
                value = validate_answer(ctx.question, ctx.question.default)
            except ValueError:
                return self._fail(
                    ctx, "no_prompt_backend", messages.no_default(ctx.tool_name, ctx.question.id)
                )
            return self._answered(ctx, value, remember=False)
        if verdict.why == "human_only":
            message = messages.no_prompt_backend(ctx.tool_name)
        elif verdict.why == "no_default":
            message = messages.no_default(ctx.tool_name, ctx.question.id)
        else:
            message = messages.denied_by_policy(ctx.tool_name)
        return self._fail(ctx, "no_prompt_backend", message)

    async def _ask_backend(
        self, ctx: QuestionContext, overrides: PartialAssistantConfig | None
    ) -> Resolved | Failed:
        if self._backend is None:
            return self._fail(
                ctx,
                "backend_error",
                messages.backend_failed(ctx.tool_name, "no inquiry backend is available"),
            )
        try:
            value = await self._backend.answer(ctx, overrides)
        except BackendError as exc:
            return self._fail(
                ctx, "backend_error", messages.backend_failed(ctx.tool_name, str(exc))
            )
        return self._answered(ctx, value, remember=False)

    def _from_human(self, ctx: QuestionContext, reply: Reply) -> Resolved | Failed:
        if isinstance(reply, Answer):
            return self._answered(ctx, reply.value, remember=reply.remember)
        return self._fail(ctx, "user", messages.cancelled_by_user(ctx.tool_name))

    def _answered(self, ctx: QuestionContext, value: Any, *, remember: bool) -> Resolved:
        self._recorder.answered(ctx.inquiry_id, ctx.question, value)
        if remember and ctx.cacheable:
            self._cache[ctx.cache_key] = value
        return Resolved(value)

    def _fail(self, ctx: QuestionContext, reason: ev.CancellationReason, message: str) -> Failed:
        self._recorder.cancelled(ctx.inquiry_id, reason)
        return Failed(message, reason)

    def _request(self, ctx: QuestionContext) -> Request:
        label = ctx.config.prompt_label if ctx.config else None
        q = ctx.question
        base = InquiryPromptParams(
            inquiry_id=ctx.inquiry_id,
            conversation_id=ctx.conversation_id,
            turn_id=ctx.turn_id,
            tool_name=ctx.tool_name,
            source=SourceWire(type=ctx.source.type, name=getattr(ctx.source, "name", None)),
            prompt_label=label,
            question=q.model_copy(
                update={"default": None if ctx.secret else q.default, "exclusive": ctx.exclusive}
            ),
        )

        def params(error: str | None) -> InquiryPromptParams:
            return base.model_copy(update={"previous_error": error})

        def can_answer(link: ClientLink) -> bool:
            return q.answer_type.type in link.capabilities.prompt_answer_types

        def parse(result: InquiryPromptResult) -> tuple[Any, bool]:
            return validate_answer(q, result.answer), result.remember

        def parse_direct(value: Any, remember: bool) -> tuple[Any, bool]:
            return validate_answer(q, value), remember

        info = PendingInfo(
            inquiry_id=ctx.inquiry_id,
            kind="inquiry",
            conversation_id=ctx.conversation_id,
            turn_id=ctx.turn_id,
            tool_name=ctx.tool_name,
            deferred=False,
            asked_at=now(),
            prompt=base,
        )
        return Request(
            info=info,
            method=INQUIRY_PROMPT,
            params=params,
            can_answer=can_answer,
            parse=parse,
            parse_direct=parse_direct,
        )
