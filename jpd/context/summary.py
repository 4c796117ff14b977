"""Writing a summary: the head of the prompt plus one appended instruction (so the
request reads the prompt cache warmed by the turn), checked before it is used."""

from __future__ import annotations

import logging

from jpd.context import summary_check
from jpd.context.plan import Entry, safe_starts
from jpd.context.summarizer import Summarizer
from jpd.llm import base as llm
from jpd.llm.errors import ContextOverflow, ProviderError
from jpd.llm.history import STUB_PREFIX

INSTRUCTION = """\
Stop here: do not answer or call tools. The conversation so far must be compacted, so \
write a summary that replaces everything above it. Fold any earlier summary into it: \
whatever you leave out is lost. Use these sections, briefly:
Goal: what the user wants overall.
Constraints: every rule, preference and constraint the user stated, quoted verbatim.
Decisions: what was decided and why.
Files and names: the files, functions, commands and identifiers that matter.
Done / in progress / next: the state of the work and the exact next step.
Write only the summary."""

SMALL_INSTRUCTION = """\
Stop here: do not answer. Summarise everything above (an earlier summary included) in \
at most 120 words: the user's goal, their constraints quoted verbatim, what was done, \
what comes next. Write only the summary."""

log = logging.getLogger(__name__)

MAX_DROPS = 3
"""Times a summary request that overflows is retried with its oldest part dropped."""


class SummaryFailed(Exception):
    """No usable summary: the caller falls back to deterministic trimming."""


async def write_summary(
    summarizer: Summarizer,
    base: llm.ModelRequest,
    head: list[Entry],
    instructions: str | None,
) -> str:
    """A summary of `head` (the messages before the cut). An overflowing request drops
    its oldest part and is tried again (up to `MAX_DROPS` times); a cut-off or empty
    summary is asked for once more; then `SummaryFailed`."""
    instruction = SMALL_INSTRUCTION if summarizer.small else INSTRUCTION
    if instructions:
        instruction += f"\nThe user asks the summary to: {instructions}"
    drops = rejects = 0
    while True:
        request = base.model_copy(
            update={
                "model": summarizer.model,
                "messages": (*(m for _, m in head), llm.UserMessage(content=instruction)),
                "tool_choice": llm.ToolChoiceNone(),
                "max_tokens": summarizer.max_tokens,
                "reasoning_effort": "off",
                "reasoning_budget": None,
            }
        )
        try:
            text, reason = await _run(summarizer.provider, request)
        except ContextOverflow as exc:
            drops += 1
            head = _drop_oldest(head)
            if drops > MAX_DROPS or not head:
                raise SummaryFailed(f"the summary request does not fit: {exc.message}") from exc
            continue
        except ProviderError as exc:
            raise SummaryFailed(exc.message) from exc
        if text.strip() and reason != "max_tokens":
            if summarizer.small:
                # Small models restate the request instead of summarising: measured, and
                # refused (the caller trims, keeping the latest turns verbatim).
                why = summary_check.problem(text, instruction, _said(head), _exchanges(head))
                if why is not None:
                    # Logged whole: what small models write is how the measure is tuned.
                    log.info("summary by %s refused, %s: %r", summarizer.model_id, why, text)
                    raise SummaryFailed(f"the summary was not used: {why}")
            return text.strip()
        rejects += 1
        if rejects > 1:
            why = "was cut off" if reason == "max_tokens" else "was empty"
            raise SummaryFailed(f"the summary {why} twice")


def _said(head: list[Entry]) -> str:
    """The text of the conversation being summarised."""
    parts: list[str] = []
    for _, message in head:
        parts.append(message.content)
        if isinstance(message, llm.AssistantMessage):
            parts += [f"{call.name} {call.arguments}" for call in message.tool_calls]
    return "\n".join(parts)


def _exchanges(head: list[Entry]) -> list[str]:
    """`head` cut at each user message: the message and the replies to it. An earlier
    compaction's text counts as the user's (jpd's note about it left out)."""
    exchanges: list[list[str]] = []
    for _, message in head:
        text = message.content
        if isinstance(message, llm.UserMessage):
            if text.startswith(STUB_PREFIX):
                text = text.partition("\n\n")[2]
            exchanges.append([text])
        elif isinstance(message, llm.AssistantMessage) and exchanges:
            exchanges[-1].append(text)
    return ["\n".join(parts) for parts in exchanges]


def _drop_oldest(head: list[Entry]) -> list[Entry]:
    """The head without its older half, cut at a safe start."""
    starts = [s for s in safe_starts(head) if s >= len(head) // 2 and s > 0]
    return head[starts[0] :] if starts else []


async def _run(provider: llm.Provider, request: llm.ModelRequest) -> tuple[str, str]:
    texts: list[str] = []
    reason = "end_turn"
    async with provider.stream(request) as events:
        async for event in events:
            if isinstance(event, llm.TextDelta):
                texts.append(event.text)
            elif isinstance(event, llm.Retry):
                texts.clear()
            elif isinstance(event, llm.Finish):
                reason = event.reason
    return "".join(texts), reason
