"""Where to compact: pure decisions over the model's view (`MessageHistory.entries`).

A cut never splits an assistant message from the results of its tool calls (a
parallel batch included) nor reasoning from its call: the tail starts at a user
message or at an assistant message, never at a tool result.
"""

from __future__ import annotations

from dataclasses import dataclass

from jpd.context.count import raw_estimate
from jpd.llm import base as llm
from jpd.llm.history import STUB_PREFIX

Entry = tuple[int, llm.Message]


@dataclass(frozen=True)
class StubPlan:
    end_event: int
    """Tool outputs of events before this position become stubs."""
    saved: int
    """Estimated tokens saved (uncalibrated)."""


@dataclass(frozen=True)
class Cut:
    index: int
    """The first message of the tail, an index into the entries."""
    end_event: int
    """Its event's position: the compaction covers the events before it."""


def plan_stubs(entries: list[Entry], keep: int) -> StubPlan | None:
    """Stub every tool output but the latest `keep`, in one batch (so the prompt's cached
    prefix breaks once, not on every call); None when nothing would be stubbed."""
    results = [
        (i, m)
        for i, (_, m) in enumerate(entries)
        if isinstance(m, llm.ToolResultMessage) and not m.content.startswith(STUB_PREFIX)
    ]
    if len(results) <= keep:
        return None
    kept = results[len(results) - keep :] if keep else []
    end_event = entries[kept[0][0]][0] if kept else entries[-1][0] + 1
    old = [m for _, m in results[: len(results) - keep]]
    saved = raw_estimate(old) - 40 * len(old)
    if saved <= 0:
        return None
    return StubPlan(end_event=end_event, saved=saved)


def safe_starts(entries: list[Entry]) -> list[int]:
    """Indices where a tail may start."""
    return [i for i, (_, m) in enumerate(entries) if not isinstance(m, llm.ToolResultMessage)]


def plan_cut(entries: list[Entry], tail_budget: int) -> Cut | None:
    """The tail to keep verbatim: the latest messages within `tail_budget` estimated
    tokens, starting at a safe point, always the last safe start at least; None when no
    head would be left to fold (the context cannot shrink this way)."""
    starts = safe_starts(entries)
    if not starts:
        return None
    chosen = starts[-1]
    for start in reversed(starts):
        if raw_estimate([m for _, m in entries[start:]]) > tail_budget:
            break
        chosen = start
    # The first message may be an earlier summary; folding only it gains nothing.
    if chosen == 0 or (chosen == 1 and _is_summary(entries[0][1])):
        later = [s for s in starts if s > chosen]
        if not later:
            return None
        chosen = later[0]
    return Cut(index=chosen, end_event=entries[chosen][0])


def latest_user(entries: list[Entry]) -> tuple[int, str] | None:
    """Index and text of the latest user message that is not a summary."""
    for i in range(len(entries) - 1, -1, -1):
        message = entries[i][1]
        if isinstance(message, llm.UserMessage) and not _is_summary(message):
            return i, message.content
    return None


def _is_summary(message: llm.Message) -> bool:
    return isinstance(message, llm.UserMessage) and message.content.startswith(STUB_PREFIX)
