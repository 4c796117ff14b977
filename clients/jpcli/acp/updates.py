"""The daemon's turn events and persisted events as ACP `session/update`s.

Live (`turn/event`, protocol.md 7.1): `reasoning_delta` -> `agent_thought_chunk`,
`text_delta` -> `agent_message_chunk`, `tool_call` -> `tool_call` (in progress: the
daemon runs a model response's calls as soon as it ends), `tool_result` ->
`tool_call_update` (completed or failed, with the result as content). Replay
(`conversation/get`, protocol.md 12.1) maps the persisted counterparts the same way,
with `chat_request` -> `user_message_chunk`. Tools marked `hidden` (e.g. `ask_user`,
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
    AgentPlanUpdate,
    AgentThoughtChunk,
    ToolCallProgress,
    ToolCallStart,
    ToolKind,
    Usage,
    UserMessageChunk,
)

from jpcli.acp.plans import PlanCalls

Update = (
    AgentMessageChunk
    | AgentThoughtChunk
    | ToolCallStart
    | ToolCallProgress
    | UserMessageChunk
    | AgentPlanUpdate
)

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
            return [tool_started(call_id, name, event.get("arguments"))]
        if kind == "tool_result":
            call_id = str(event.get("id"))
            self.running.pop(call_id, None)
            if call_id in self.hidden:
                return []
            failed = bool(event.get("isError"))
            ended: list[Update] = [tool_ended(call_id, str(event.get("content", "")), failed)]
            return ended + list(self.plans.ended(call_id, failed))
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
        return []

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


def history(events: list[dict[str, Any]], hidden_tools: frozenset[str]) -> list[Update]:
    """The updates that replay persisted events (`conversation/get`) in an editor.

    `hidden_tools` are the names of tools not to show (`style.hidden`).
    """
    updates: list[Update] = []
    hidden: set[str] = set()
    plans = PlanCalls()
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
            plans.started(call_id, name, event.get("arguments"))
            updates.append(tool_started(call_id, name, event.get("arguments")))
        elif kind == "tool_call_response" and str(event.get("id")) not in hidden:
            call_id = str(event.get("id"))
            content = str(event.get("content", ""))
            updates.append(tool_ended(call_id, content, bool(event.get("is_error"))))
            updates.extend(plans.ended(call_id, bool(event.get("is_error"))))
    return updates
