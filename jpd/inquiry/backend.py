"""The LLM inquiry backend (protocol.md 10.4): the model answers a tool's question in
a side request built on the parent request.

The side request is the parent turn's last request (same system prompt and earlier
messages), plus the assistant message with this response's tool calls, a "paused"
result for each of them, and the question. The model answers through the
`answer_inquiry` tool. Two ways, by what the provider can do (RFD 033):

- A hosted provider (`anthropic`, `openai`, `openai-compatible`) caches the request's
  prefix (tools, system, messages; Anthropic also keys messages on `tool_choice`), so
  the first attempt keeps the parent's tools and `tool_choice` byte for byte: only the
  question is uncached. Unless the parent forced another tool (or none): the parent's
  choice would make the model call that one, so the request of the attempts after a
  miss goes first (`answer_inquiry` forced, or pinned where `PINS_ON_RETRY`). An answer
  without the call is followed by one request forcing `answer_inquiry`; an invalid
  answer (wrong id, wrong value) goes back as an error result and is asked again.
- A provider that constrains decoding (`Provider.constrains_decoding`: the embedded
  model) gets `answer_inquiry` forced from the first try, with the id and a boolean's
  or select's values pinned through `ModelRequest.pinned_arguments` (its grammar): a
  small model cannot be relied on to copy a long id. The prompt and tools stay the
  parent's.
- `openai-compatible` (maybe a small model behind a llama.cpp-style server): hosted on
  the first attempt; the attempts after a miss or an invalid answer pin the answer in a
  response format (`PINS_ON_RETRY`).

Nothing of this is persisted except the inquiry request/response pair the router
writes.

The inquiry assistant (protocol.md 10.4: a question's table `target`, then
`conversation.inquiry.assistant`, then `assistant`) is laid over the parent request:
only settings that differ from the turn's change. On another model the request is
trimmed to that model's context when config knows it (see `trim.py`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from jpd.config import Config, ConfigError
from jpd.config.models import AssistantConfig, PartialAssistantConfig
from jpd.inquiry.answer_tool import ANSWER_INQUIRY
from jpd.inquiry.router import BackendError, QuestionContext
from jpd.inquiry.trim import context_limit, fit_history
from jpd.llm import base as llm
from jpd.llm import forced_tool
from jpd.llm.errors import ProviderError
from jpd.llm.registry import ProviderSource
from jpd.protocol.question import validate_answer

log = logging.getLogger(__name__)

MAX_INVALID_RETRIES = 2

PAUSED = "Tool paused: it is waiting for the answer to a question (inquiry {inquiry_id})."
WAITING = "Tool still running: its result will follow."


class TurnView(Protocol):
    """What the backend needs to see of the running turn."""

    @property
    def last_request(self) -> llm.ModelRequest | None: ...

    def messages(self) -> list[llm.Message]: ...


class LlmInquiryBackend:
    """Answers questions with the turn's model (or the configured inquiry model)."""

    def __init__(
        self,
        view: TurnView,
        provider: llm.Provider,
        config: Config,
        providers: ProviderSource,
    ) -> None:
        self._view = view
        self._provider = provider
        self._config = config
        self._providers = providers

    async def answer(self, ctx: QuestionContext, overrides: PartialAssistantConfig | None) -> Any:
        """A typed, validated answer, or `BackendError`."""
        parent = self._view.last_request
        if parent is None:
            raise BackendError("there is no model request to ask the assistant in")
        provider, settings, limit = self._choose(overrides)
        parent = parent.model_copy(update=settings)
        history = self._view.messages()
        tail = [*self._paused_results(history, ctx), llm.UserMessage(content=question_prompt(ctx))]
        if limit is not None:
            history = fit_history(history, tail, parent, limit)
        messages = [*history, *tail]
        forced = llm.ToolChoiceTool(name=ANSWER_INQUIRY)
        if provider.constrains_decoding:
            parent = parent.model_copy(
                update={"tool_choice": forced, "pinned_arguments": pinned_arguments(ctx)}
            )
        elif not _allows_answer(parent.tool_choice):
            # The parent forced another tool (or none): kept, it would make the model call
            # that one. The request of the attempts after a miss goes first instead (the
            # cached messages are lost either way, RFD 033).
            parent = _retry_request(provider, parent, ctx)
        invalid = 0
        retried = False  # the one retry without reasoning (protocol.md 9.2)
        reasoning = True
        while True:
            request = parent.model_copy(update={"messages": tuple(messages)})
            if not reasoning:
                request, reasoning = forced_tool.without_reasoning(request), True
            reply = await self._collect(provider, request)
            text, call = reply.text, reply.call
            if call is None and request.pinned_arguments is not None:
                call = _call_in_text(reply.text)
            if call is None:
                if request.tool_choice != forced and request.pinned_arguments is None:
                    # The parent's choice let it answer otherwise: ask once more, forced.
                    parent = _retry_request(provider, parent, ctx)
                    if reply.text or reply.reasoning:
                        messages.append(reply.message())
                        messages.append(llm.UserMessage(content=missed_note(ctx)))
                    log.info("inquiry %s: answer_inquiry not called; forced", ctx.inquiry_id)
                    continue
                if not retried and forced_tool.soft_forced(provider, request):
                    # Softened and missed: keep the answer, say so, retry without reasoning.
                    retried, reasoning = True, False
                    messages.append(reply.message())
                    messages.append(llm.UserMessage(content=missed_note(ctx)))
                    log.info(
                        "inquiry %s: forced answer_inquiry retried without reasoning",
                        ctx.inquiry_id,
                    )
                    continue
                raise BackendError("the assistant did not call answer_inquiry")
            try:
                return parse_answer(ctx, call.arguments)
            except ValueError as exc:
                invalid += 1
                if invalid > MAX_INVALID_RETRIES:
                    raise BackendError(f"no valid answer after {invalid} attempts: {exc}") from exc
                if PINS_ON_RETRY.get(provider.name) and request.pinned_arguments is None:
                    parent = _retry_request(provider, parent, ctx)
                messages.append(
                    llm.AssistantMessage(
                        content=text,
                        tool_calls=(
                            llm.ToolCallPart(id=call.id, name=call.name, arguments=call.arguments),
                        ),
                    )
                )
                messages.append(
                    llm.ToolResultMessage(
                        tool_call_id=call.id,
                        content=f"Invalid answer: {exc}. Call answer_inquiry again.",
                        is_error=True,
                    )
                )

    async def complete(
        self,
        system: str | None,
        messages: Sequence[tuple[str, str]],
        max_tokens: int,
        temperature: float | None,
    ) -> str:
        """A plain completion by the inquiry model (an MCP server's sampling request).

        A request of its own, without the turn's history or tools; raises
        `BackendError` when the model cannot be reached.
        """
        provider, _, _ = self._choose(None)
        inquiry = self._config.inquiry_assistant(None)
        chat: list[llm.Message] = [
            llm.AssistantMessage(content=text)
            if role == "assistant"
            else llm.UserMessage(content=text)
            for role, text in messages
        ]
        request = llm.ModelRequest(
            model=inquiry.model.name,
            system=system,
            messages=tuple(chat),
            max_tokens=max_tokens,
            temperature=temperature,
        )
        return (await self._collect(provider, request)).text

    def _choose(
        self, overrides: PartialAssistantConfig | None
    ) -> tuple[llm.Provider, dict[str, Any], int | None]:
        """Provider, request fields to change, and a context limit for another model."""
        turn = self._config.assistant
        inquiry = self._config.inquiry_assistant(overrides)
        settings = changed_settings(turn, inquiry)
        if inquiry.model.id == turn.model.id:
            return self._provider, settings, None
        try:
            other = self._config.with_model(inquiry.model.id, source="inquiry model")
            provider = self._providers.get(other)
        except (ConfigError, ProviderError) as exc:
            raise BackendError(f"inquiry model {inquiry.model.id}: {exc}") from exc
        return provider, {**settings, "model": inquiry.model.name}, context_limit(other)

    @staticmethod
    def _paused_results(history: list[llm.Message], ctx: QuestionContext) -> list[llm.Message]:
        last = history[-1] if history else None
        if not isinstance(last, llm.AssistantMessage):
            return []
        return [
            llm.ToolResultMessage(
                tool_call_id=call.id,
                content=PAUSED.format(inquiry_id=ctx.inquiry_id)
                if call.id == ctx.tool_call_id
                else WAITING,
            )
            for call in last.tool_calls
        ]

    @staticmethod
    async def _collect(provider: llm.Provider, request: llm.ModelRequest) -> _Reply:
        reply = _Reply()
        try:
            async with provider.stream(request) as events:
                async for event in events:
                    if isinstance(event, llm.Retry):
                        reply = _Reply()
                    elif isinstance(event, llm.TextDelta):
                        reply.text += event.text
                    elif isinstance(event, llm.ReasoningDelta):
                        reply.reasoning += event.text
                        reply.signature = event.signature or reply.signature
                    elif isinstance(event, llm.ToolCallEvent) and event.name == ANSWER_INQUIRY:
                        reply.call = reply.call or event
        except ProviderError as exc:
            raise BackendError(exc.message) from exc
        return reply


@dataclass
class _Reply:
    """One side request's answer: text, reasoning and the `answer_inquiry` call."""

    text: str = ""
    reasoning: str = ""
    signature: str | None = None
    call: llm.ToolCallEvent | None = None

    def message(self) -> llm.AssistantMessage:
        """The answer as an assistant message of the history (without its call)."""
        return llm.AssistantMessage(
            content=self.text,
            reasoning=self.reasoning or None,
            reasoning_signature=self.signature,
        )


def changed_settings(turn: AssistantConfig, inquiry: AssistantConfig) -> dict[str, Any]:
    """`ModelRequest` fields where the inquiry assistant differs from the turn's.

    Only differences are applied: a setting the inquiry does not change keeps the
    parent request's value.
    """
    pairs = {
        "system": (turn.system_prompt, inquiry.system_prompt),
        "max_tokens": (turn.model.parameters.max_tokens, inquiry.model.parameters.max_tokens),
        "temperature": (turn.model.parameters.temperature, inquiry.model.parameters.temperature),
        "reasoning_effort": (turn.reasoning.effort, inquiry.reasoning.effort),
        "reasoning_budget": (turn.reasoning.budget_tokens, inquiry.reasoning.budget_tokens),
    }
    return {field: new for field, (old, new) in pairs.items() if new != old}


def pinned_arguments(ctx: QuestionContext) -> dict[str, Any]:
    """The `answer_inquiry` arguments schema narrowed to this inquiry's id and, for a
    boolean or a select, its answer values: decoded under, never shown to the model."""
    answer: dict[str, Any] = {"type": "string"}
    choices = ctx.question.answer_type.choices()
    if choices is not None:
        answer["enum"] = choices
    return {
        "type": "object",
        "properties": {
            "inquiry_id": {"type": "string", "enum": [ctx.inquiry_id]},
            "answer": answer,
        },
        "required": ["inquiry_id", "answer"],
        "additionalProperties": False,
    }


# Providers whose retries pin the answer in a response format (a grammar on llama.cpp-
# style servers) after the first, cache-preserving attempt missed: `openai-compatible`
# may be a small local model that cannot copy a long id.
PINS_ON_RETRY = {"openai-compatible": True}


def _allows_answer(choice: llm.ToolChoice) -> bool:
    """Whether a parent's `tool_choice` lets the model call `answer_inquiry`."""
    return choice.type in ("auto", "any") or (
        isinstance(choice, llm.ToolChoiceTool) and choice.name == ANSWER_INQUIRY
    )


def _retry_request(
    provider: llm.Provider, parent: llm.ModelRequest, ctx: QuestionContext
) -> llm.ModelRequest:
    """The request for the attempts after a miss: `answer_inquiry` forced, or where the
    provider pins on retry, the answer decoded under `pinned_arguments` as JSON text
    (`tool_choice` `none`: a forced tool's own schema would override the pin)."""
    if PINS_ON_RETRY.get(provider.name):
        return parent.model_copy(
            update={"tool_choice": llm.ToolChoiceNone(), "pinned_arguments": pinned_arguments(ctx)}
        )
    return parent.model_copy(update={"tool_choice": llm.ToolChoiceTool(name=ANSWER_INQUIRY)})


def _call_in_text(text: str) -> llm.ToolCallEvent | None:
    """The `answer_inquiry` arguments a pinned response format produced as JSON text."""
    try:
        arguments = json.loads(text)
    except ValueError:
        return None
    if not isinstance(arguments, dict):
        return None
    return llm.ToolCallEvent(id="answer_inquiry_text", name=ANSWER_INQUIRY, arguments=arguments)


def missed_note(ctx: QuestionContext) -> str:
    """The user message after an answer that did not call `answer_inquiry`."""
    return f'{forced_tool.retry_note(ANSWER_INQUIRY)} Use inquiry_id "{ctx.inquiry_id}".'


def question_prompt(ctx: QuestionContext) -> str:
    """The appended user message: the question and how to answer it."""
    q = ctx.question
    parts = [
        f"The tool `{ctx.tool_name}` (call {ctx.tool_call_id}) needs input before it can "
        "continue. Answer its question by calling the `answer_inquiry` tool with "
        f'inquiry_id "{ctx.inquiry_id}". Do not call any other tool.',
    ]
    if q.context:
        parts.append(f"Context:\n{q.context}")
    parts.append(f"Question: {q.text}")
    parts.append(q.answer_type.instructions())
    return "\n\n".join(parts)


def parse_answer(ctx: QuestionContext, arguments: dict[str, Any]) -> Any:
    """Read `answer_inquiry` arguments as the question's type; ValueError if invalid."""
    inquiry_id = arguments.get("inquiry_id")
    if inquiry_id != ctx.inquiry_id:
        raise ValueError(f"inquiry_id must be {ctx.inquiry_id!r}, got {inquiry_id!r}")
    raw = arguments.get("answer")
    if not isinstance(raw, str):
        raise ValueError("answer must be a string")
    return validate_answer(ctx.question, ctx.question.answer_type.from_text(raw))
