"""The daemon's turn events and persisted events as ACP `session/update`s.

Live (`turn/event`, protocol.md 7.1): `reasoning_delta` -> `agent_thought_chunk`,
`text_delta` -> `agent_message_chunk`, `tool_call` -> `tool_call` (in progress: the
daemon runs a model response's calls as soon as it ends), `tool_result` ->
`tool_call_update` (completed or failed, with the result as content). Replay
(`conversation/get`, protocol.md 12.1) maps the persisted counterparts the same way,
with `chat_request` -> `user_message_chunk`. After each model call whose window is known,
`usage` -> `usage_update` (context used and size, the session's cost where the model has
a price); a compaction (`context_compacted`) is shown as an `agent_message_chunk` note,
live and in replay. Tools marked `hidden` (e.g. `ask_user`,
whose question is shown as a prompt) are not shown, as `jp` does not show them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from acp import (
    update_agent_message_text,
    update_agent_thought_text,
    update_user_message_text,
)
from acp.schema import (
    AgentMessageChunk,
    AgentPlanUpdate,
    AgentThoughtChunk,
    Cost,
    ToolCallProgress,
    ToolCallStart,
    Usage,
    UsageUpdate,
    UserMessageChunk,
)

from jpcli.acp.live_output import LiveOutput
from jpcli.acp.plans import PlanCalls
from jpcli.acp.toolcalls import (
    CallView,
    replayed_view,
    tool_ended,
    tool_note,
    tool_started,
    tool_title,
)

__all__ = ["LiveTranslator", "Update", "history", "tool_note", "tool_title"]

Update = (
    AgentMessageChunk
    | AgentThoughtChunk
    | ToolCallStart
    | ToolCallProgress
    | UserMessageChunk
    | UsageUpdate
    | AgentPlanUpdate
)

COST_CURRENCY = "USD"
"""What `[prices]` are taken to be in (per million tokens)."""


@dataclass
class LiveTranslator:
    """Translates one session's `turn/event`s; remembers hidden calls and usage."""

    hidden: set[str] = field(default_factory=set)
    running: dict[str, str] = field(default_factory=dict)
    """Calls shown and not ended yet: id -> tool name."""
    views: dict[str, CallView] = field(default_factory=dict)
    """Calls shown and not ended yet: id -> kind, locations and diff shown."""
    output: LiveOutput = field(default_factory=LiveOutput)
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read: int = 0
    cache_write: int = 0
    cost: float | None = None
    """The session's cost so far, while every priced call reported one."""
    plans: PlanCalls = field(default_factory=PlanCalls)

    def translate(self, event: dict[str, Any]) -> list[Update]:
        """The updates for one `turn/event` `event` (none for kinds ACP has no place for)."""
        kind = event.get("kind")
        if kind == "text_delta":
            return [update_agent_message_text(str(event.get("text", "")))]
        if kind == "reasoning_delta":
            return [update_agent_thought_text(str(event.get("text", "")))]
        if kind == "tool_call":
            call_id, name = str(event.get("id")), str(event.get("name"))
            if event.get("hidden"):
                self.hidden.add(call_id)
                return []
            self.running[call_id] = name
            self.plans.started(call_id, name, event.get("arguments"))
            view = self.views[call_id] = CallView.of(name, event)
            return [tool_started(call_id, name, event.get("arguments"), view)]
        if kind == "tool_progress":
            call_id, message = str(event.get("id")), event.get("message")
            if call_id not in self.running or not isinstance(message, str) or not message:
                return []
            return list(self.output.chunk(call_id, message))
        if kind == "tool_result":
            call_id = str(event.get("id"))
            self.running.pop(call_id, None)
            ran = self.views.pop(call_id, None)
            if call_id in self.hidden:
                return []
            content, failed = str(event.get("content", "")), bool(event.get("isError"))
            exit_updates: list[Update] = list(self.output.ended(call_id, content))
            return [
                *exit_updates,
                tool_ended(call_id, content, failed, ran),
                *self.plans.ended(call_id, failed),
            ]
        if kind == "retry":
            # ACP cannot take back streamed text: say that a retry restarts the answer.
            reason = event.get("reason", "a transient error")
            return [update_agent_thought_text(f"\n[model call retried after {reason}]\n")]
        if kind == "usage":
            usage = event.get("usage") or {}
            self.input_tokens += int(usage.get("inputTokens") or 0)
            self.output_tokens += int(usage.get("outputTokens") or 0)
            self.cache_read += int(usage.get("cacheReadTokens") or 0)
            self.cache_write += int(usage.get("cacheCreationTokens") or 0)
            return self._usage_update(event)
        if kind == "context_compacted":
            return [update_agent_message_text(compaction_note(event))]
        return []

    def _usage_update(self, event: dict[str, Any]) -> list[Update]:
        """Zed's context meter: how full the window is, and the cost where it is known."""
        cost = event.get("cost")
        if isinstance(cost, (int, float)) and not isinstance(cost, bool):
            self.cost = (self.cost or 0.0) + cost
        context = event.get("context")
        if not isinstance(context, dict):
            return []
        used, size = context.get("used"), context.get("window")
        if not isinstance(used, int) or not isinstance(size, int):
            return []
        money = Cost(amount=self.cost, currency=COST_CURRENCY) if self.cost is not None else None
        return [UsageUpdate(session_update="usage_update", used=used, size=size, cost=money)]

    def usage(self) -> Usage | None:
        """The turn's token usage so far, for the `session/prompt` answer (None if unknown)."""
        if not (self.input_tokens or self.output_tokens):
            return None
        return Usage(
            total_tokens=self.input_tokens + self.output_tokens,
            input_tokens=self.input_tokens,
            output_tokens=self.output_tokens,
            cached_read_tokens=self.cache_read or None,
            cached_write_tokens=self.cache_write or None,
        )


def compaction_note(event: dict[str, Any]) -> str:
    """The line an editor shows for a compaction (turn event: camelCase; persisted:
    snake_case)."""
    before = event.get("tokensBefore", event.get("tokens_before"))
    after = event.get("tokensAfter", event.get("tokens_after"))
    what = {"stub": "old tool outputs cleared", "trim": "older part dropped"}.get(
        str(event.get("method")), "older part summarised"
    )
    sizes = (
        f", {before:,} -> {after:,} tokens"
        if isinstance(before, int) and isinstance(after, int)
        else ""
    )
    return f"\n\n*[context compacted: {what}{sizes}]*\n\n"


def history(events: list[dict[str, Any]], hidden_tools: frozenset[str]) -> list[Update]:
    """The updates that replay persisted events (`conversation/get`) in an editor.

    `hidden_tools` are the names of tools not to show (`style.hidden`).
    """
    updates: list[Update] = []
    hidden: set[str] = set()
    # Call ids repeat across turns: a changed file is found by (turn, call).
    changed = {
        (str(e.get("turn_id")), str(e.get("tool_call_id"))): str(e.get("path"))
        for e in events
        if e.get("type") == "file_changed"
    }
    views: dict[str, CallView] = {}
    turn = ""
    plans = PlanCalls()
    for event in events:
        kind = event.get("type")
        if kind in ("turn_start", "turn_resume"):
            turn = str(event.get("turn_id"))
        elif kind == "chat_request":
            updates.append(update_user_message_text(str(event.get("content", ""))))
        elif kind == "chat_response" and event.get("reasoning"):
            updates.append(update_agent_thought_text(str(event["reasoning"])))
        elif kind == "chat_response" and event.get("message"):
            updates.append(update_agent_message_text(str(event["message"])))
        elif kind == "tool_call_request":
            call_id, name = str(event.get("id")), str(event.get("name"))
            if name in hidden_tools:
                hidden.add(call_id)
                continue
            arguments = event.get("arguments")
            plans.started(call_id, name, arguments)
            views[call_id] = replayed_view(name, arguments, changed.get((turn, call_id)))
            updates.append(tool_started(call_id, name, arguments, views[call_id]))
        elif kind == "context_compacted":
            updates.append(update_agent_message_text(compaction_note(event)))
        elif kind == "tool_call_response" and str(event.get("id")) not in hidden:
            call_id = str(event.get("id"))
            content = str(event.get("content", ""))
            failed = bool(event.get("is_error"))
            updates.append(tool_ended(call_id, content, failed, views.get(call_id)))
            updates.extend(plans.ended(call_id, failed))
    return updates
