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

import re
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
    ResourceContentBlock,
    ToolCallProgress,
    ToolCallStart,
    Usage,
    UsageUpdate,
    UserMessageChunk,
)

from jpcli.acp.images import ImageReader
from jpcli.acp.live_output import LiveOutput
from jpcli.acp.plans import PLAN_TOOL, PlanCalls
from jpcli.acp.toolcalls import (
    CallIds,
    CallView,
    replayed_view,
    tool_ended,
    tool_note,
    tool_started,
    tool_stopped,
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
    ids: CallIds = field(default_factory=CallIds)
    """Shown ids, unique in the session (carried over turns)."""

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
            arguments = event.get("arguments")
            if name == PLAN_TOOL:
                # The plan is shown as the plan (Zed's plan panel), not as a call too.
                self.plans.started(call_id, name, arguments)
                self.hidden.add(call_id)
                return []
            shown = self.ids.start(call_id)
            self.running[shown] = name
            view = self.views[shown] = CallView.of(name, event)
            return [tool_started(shown, view, arguments)]
        if kind == "tool_progress":
            shown, message = self.ids.of(str(event.get("id"))), event.get("message")
            if shown not in self.running or not isinstance(message, str) or not message:
                return []
            return list(self.output.chunk(shown, message))
        if kind == "tool_result":
            call_id = str(event.get("id"))
            content, failed = str(event.get("content", "")), bool(event.get("isError"))
            if call_id in self.hidden:
                return list(self.plans.ended(call_id, failed))
            shown = self.ids.of(call_id)
            self.running.pop(shown, None)
            ran = self.views.pop(shown, None)
            exit_updates, terminal = self.output.ended(shown, content)
            return [*exit_updates, tool_ended(shown, content, failed, ran, terminal)]
        if kind == "turn_completed":
            return self.finish(str(event.get("stopReason")))
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

    def finish(self, stop_reason: str) -> list[Update]:
        """End every shown call that got no result (cancelled, or the turn failed): an
        editor must not keep them in progress."""
        why = "Cancelled." if stop_reason == "cancelled" else "Stopped: the turn ended."
        ended: list[Update] = [tool_stopped(shown, why) for shown in self.running]
        self.running.clear()
        self.views.clear()
        return ended

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
        # Rounded: sums of float prices carry noise (0.30000000000000004).
        money = (
            Cost(amount=round(self.cost, 6), currency=COST_CURRENCY)
            if self.cost is not None
            else None
        )
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


_LINK = re.compile(r"\[([^\]\n]*)\]\((\S+)\)")


def user_message(text: str) -> list[Update]:
    """A replayed user message: its text, with the resource links the editor sent (kept
    in the message as `[name](uri)` paragraphs, `inputs.prompt_text`) as links again."""
    updates: list[Update] = []
    parts: list[str] = []
    for paragraph in text.split("\n\n"):
        link = _LINK.fullmatch(paragraph)
        if link is None:
            parts.append(paragraph)
            continue
        if parts:
            updates.append(update_user_message_text("\n\n".join(parts)))
            parts = []
        block = ResourceContentBlock(type="resource_link", name=link.group(1), uri=link.group(2))
        updates.append(UserMessageChunk(session_update="user_message_chunk", content=block))
    if parts or not updates:
        updates.append(update_user_message_text("\n\n".join(parts)))
    return updates


def history(
    events: list[dict[str, Any]],
    hidden_tools: frozenset[str],
    ids: CallIds | None = None,
    images: ImageReader | None = None,
) -> list[Update]:
    """The updates that replay persisted events (`conversation/get`) in an editor.

    `hidden_tools` are the names of tools not to show (`style.hidden`); `ids` the
    session's shown call ids (a live turn after the replay goes on from them).
    """
    ids = ids or CallIds()
    updates: list[Update] = []
    hidden: set[str] = set()
    # Call ids repeat across turns: a changed file is found by (turn, call).
    changed = {
        (str(e.get("turn_id")), str(e.get("tool_call_id"))): str(e.get("path"))
        for e in events
        if e.get("type") == "file_changed"
    }
    views: dict[str, CallView] = {}
    turn, workspace = "", None
    plans = PlanCalls()
    for event in events:
        kind = event.get("type")
        if kind in ("turn_start", "turn_resume"):
            turn = str(event.get("turn_id"))
            if kind == "turn_start":
                workspace = event.get("workspace")
        elif kind == "chat_request":
            updates.extend(user_message(str(event.get("content", ""))))
            for image in event.get("images") or []:
                if images is not None and isinstance(image, dict):
                    updates.append(images(str(image.get("file")), str(image.get("mime_type"))))
        elif kind == "chat_response" and event.get("reasoning"):
            updates.append(update_agent_thought_text(str(event["reasoning"])))
        elif kind == "chat_response" and event.get("message"):
            updates.append(update_agent_message_text(str(event["message"])))
        elif kind == "tool_call_request":
            call_id, name = str(event.get("id")), str(event.get("name"))
            arguments = event.get("arguments")
            if name in hidden_tools or name == PLAN_TOOL:
                plans.started(call_id, name, arguments)
                hidden.add(call_id)
                continue
            shown = ids.start(call_id)
            views[shown] = replayed_view(name, event, changed.get((turn, call_id)), workspace)
            updates.append(tool_started(shown, views[shown], arguments))
        elif kind == "context_compacted":
            updates.append(update_agent_message_text(compaction_note(event)))
        elif kind == "tool_call_response":
            call_id = str(event.get("id"))
            content = str(event.get("content", ""))
            failed = bool(event.get("is_error"))
            if call_id in hidden:
                updates.extend(plans.ended(call_id, failed))
                continue
            shown = ids.of(call_id)
            updates.append(tool_ended(shown, content, failed, views.pop(shown, None)))
    for shown in views:
        updates.append(tool_stopped(shown, "Stopped: the turn ended."))
    return updates
