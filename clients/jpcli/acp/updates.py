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

import json
from dataclasses import dataclass, field
from typing import Any

from acp import (
    start_tool_call,
    text_block,
    tool_content,
    update_agent_message_text,
    update_agent_thought_text,
    update_tool_call,
    update_user_message_text,
)
from acp.schema import (
    AgentMessageChunk,
    AgentThoughtChunk,
    Cost,
    ToolCallProgress,
    ToolCallStart,
    ToolKind,
    Usage,
    UsageUpdate,
    UserMessageChunk,
)

Update = (
    AgentMessageChunk
    | AgentThoughtChunk
    | ToolCallStart
    | ToolCallProgress
    | UserMessageChunk
    | UsageUpdate
)

COST_CURRENCY = "USD"
"""What `[prices]` are taken to be in (per million tokens)."""

_KINDS: tuple[tuple[ToolKind, tuple[str, ...]], ...] = (
    ("read", ("read", "cat", "view", "open")),
    ("edit", ("write", "edit", "patch", "replace")),
    ("delete", ("delete", "remove", "rm")),
    ("search", ("search", "grep", "find", "glob")),
    ("fetch", ("fetch", "http", "web", "url")),
    ("execute", ("run", "exec", "shell", "bash", "command")),
)
_TITLE_ARGS = 60


def tool_kind(name: str) -> ToolKind:
    """A best guess of the ACP tool kind from a tool's name (editors pick icons by it)."""
    lowered = name.lower()
    for kind, words in _KINDS:
        if any(word in lowered for word in words):
            return kind
    return "other"


def tool_title(name: str, arguments: Any) -> str:
    """`name(arg=value, ...)`, shortened: the line an editor shows for a call."""
    if not isinstance(arguments, dict) or not arguments:
        return name
    shown = ", ".join(f"{key}={json.dumps(value)}" for key, value in arguments.items())
    if len(shown) > _TITLE_ARGS:
        shown = shown[: _TITLE_ARGS - 1] + "\u2026"
    return f"{name}({shown})"


def tool_started(call_id: str, name: str, arguments: Any) -> ToolCallStart:
    """The `tool_call` update for a call the model made."""
    return start_tool_call(
        call_id,
        tool_title(name, arguments),
        kind=tool_kind(name),
        status="in_progress",
        raw_input=arguments,
    )


def tool_ended(call_id: str, content: str, is_error: bool) -> ToolCallProgress:
    """The final `tool_call_update` of a call: its status and result."""
    return update_tool_call(
        call_id,
        status="failed" if is_error else "completed",
        content=[tool_content(text_block(content))],
        raw_output=content,
    )


def tool_note(call_id: str, text: str) -> ToolCallProgress:
    """A `tool_call_update` that sets the call's content to a note for the person."""
    return update_tool_call(call_id, content=[tool_content(text_block(text))])


@dataclass
class LiveTranslator:
    """Translates one session's `turn/event`s; remembers hidden calls and usage."""

    hidden: set[str] = field(default_factory=set)
    running: dict[str, str] = field(default_factory=dict)
    """Calls shown and not ended yet: id -> tool name."""
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read: int = 0
    cache_write: int = 0
    cost: float | None = None
    """The session's cost so far, while every priced call reported one."""

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
            return [tool_started(call_id, name, event.get("arguments"))]
        if kind == "tool_result":
            call_id = str(event.get("id"))
            self.running.pop(call_id, None)
            if call_id in self.hidden:
                return []
            return [tool_ended(call_id, str(event.get("content", "")), bool(event.get("isError")))]
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
    for event in events:
        kind = event.get("type")
        if kind == "chat_request":
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
            updates.append(tool_started(call_id, name, event.get("arguments")))
        elif kind == "context_compacted":
            updates.append(update_agent_message_text(compaction_note(event)))
        elif kind == "tool_call_response" and str(event.get("id")) not in hidden:
            call_id = str(event.get("id"))
            content = str(event.get("content", ""))
            updates.append(tool_ended(call_id, content, bool(event.get("is_error"))))
    return updates
