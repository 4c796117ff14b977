"""Soft-forced tool choice and its one retry without reasoning (protocol.md 9.2).

Anthropic rejects a forced `tool_choice` (`any` or `tool`) while extended
thinking is on. `soft_forced` then sends `tool_choice: auto` with a system
directive to call the tool. If the model completes (`end_turn`) without making
the required call, the request is sent once more with reasoning off and the
real `tool_choice`. There is never a second retry: if that attempt also skips
the tool (it should not, the API enforces it), its answer stands.

Streaming versus buffering: the first attempt is streamed live, so the common
case (the model obeys) keeps its time to first token. Only its `UsageEvent`
and `Finish` are held back until the outcome is known. A miss is signalled by
a `Retry` event (`delay` 0, reason "forced tool `x` not called; ...") and, as
for every `Retry` (see `retry.py`), the consumer drops what the failed attempt
yielded. The retry sends the original conversation, not the first answer: the
API no longer accepts a trailing assistant message (prefill), and the stored
conversation then matches what the model saw. The final `UsageEvent` sums
both attempts, since both were billed.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable
from contextlib import aclosing

from jpd.llm.base import (
    Finish,
    ModelRequest,
    Retry,
    StreamEvent,
    ToolCallEvent,
    ToolChoiceAuto,
    ToolChoiceTool,
    UsageEvent,
)
from jpd.protocol.usage import TokenUsage

StreamFn = Callable[[ModelRequest], AsyncGenerator[StreamEvent, None]]


def applies(request: ModelRequest, reasoning_active: Callable[[ModelRequest], bool]) -> bool:
    """Whether `request` forces a tool while reasoning is on (the soft-force case)."""
    return request.tool_choice.type in ("any", "tool") and reasoning_active(request)


def directive(request: ModelRequest) -> str:
    """The system-prompt instruction that stands in for the forced tool choice."""
    choice = request.tool_choice
    if isinstance(choice, ToolChoiceTool):
        return f"IMPORTANT: You MUST call the `{choice.name}` tool in your response."
    return "IMPORTANT: You MUST call one of the available tools in your response."


def soften(request: ModelRequest) -> ModelRequest:
    """`request` with `tool_choice: auto` and the directive appended to the system prompt."""
    text = directive(request)
    system = f"{request.system}\n\n{text}" if request.system else text
    return request.model_copy(update={"tool_choice": ToolChoiceAuto(), "system": system})


def without_reasoning(request: ModelRequest) -> ModelRequest:
    """`request` with reasoning disabled (the original tool choice is kept)."""
    return request.model_copy(update={"reasoning_effort": "off", "reasoning_budget": None})


def missed(request: ModelRequest, finish: Finish, called: list[str]) -> bool:
    """Whether a soft-forced attempt completed without the call the request demanded."""
    if finish.reason != "end_turn":
        return False
    choice = request.tool_choice
    if isinstance(choice, ToolChoiceTool):
        return choice.name not in called
    return not called


def add_usage(first: TokenUsage | None, second: TokenUsage | None) -> TokenUsage | None:
    """Field-wise sum; a field known in neither stays unknown."""
    if first is None or second is None:
        return first or second

    def plus(a: int | None, b: int | None) -> int | None:
        return None if a is None and b is None else (a or 0) + (b or 0)

    return TokenUsage(
        input_tokens=plus(first.input_tokens, second.input_tokens),
        output_tokens=plus(first.output_tokens, second.output_tokens),
        cache_read_tokens=plus(first.cache_read_tokens, second.cache_read_tokens),
        cache_creation_tokens=plus(first.cache_creation_tokens, second.cache_creation_tokens),
    )


async def soft_forced(
    request: ModelRequest,
    run: StreamFn,
    reasoning_active: Callable[[ModelRequest], bool],
) -> AsyncGenerator[StreamEvent, None]:
    """Stream `request` through `run`; a forced tool with reasoning on follows protocol.md 9.2.

    `run` streams one request (retries of transient failures included) and
    must itself never combine a forced tool choice with reasoning.
    """
    if not applies(request, reasoning_active):
        async with aclosing(run(request)) as events:
            async for event in events:
                yield event
        return

    called: list[str] = []
    usage: TokenUsage | None = None
    finish: Finish | None = None
    async with aclosing(run(soften(request))) as events:
        async for event in events:
            if isinstance(event, Finish):
                finish = event
            elif isinstance(event, UsageEvent):
                usage = event.usage
            else:
                if isinstance(event, ToolCallEvent):
                    called.append(event.name)
                elif isinstance(event, Retry):
                    # A transient failure voided the attempt so far, calls included.
                    called.clear()
                    usage = None
                yield event
    if finish is None:
        return
    if not missed(request, finish, called):
        if usage is not None:
            yield UsageEvent(usage=usage)
        yield finish
        return

    target = request.tool_choice.name if isinstance(request.tool_choice, ToolChoiceTool) else None
    what = f"forced tool `{target}`" if target else "forced tool call"
    yield Retry(attempt=1, delay=0.0, reason=f"{what} not called; retrying without reasoning")
    async with aclosing(run(without_reasoning(request))) as events:
        async for event in events:
            if isinstance(event, UsageEvent):
                merged = add_usage(usage, event.usage)
                yield UsageEvent(usage=merged) if merged is not None else event
            else:
                yield event
