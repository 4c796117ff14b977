"""A conversation as text: its recorded events (`jp conversation show`), its row in
`jp conversation ls`, and its token usage."""

from __future__ import annotations

import json
from typing import Any

from jpcli.render import add_cost, format_time, format_tool_call, format_usage, one_line


def total_usage(events: list[dict[str, Any]]) -> str:
    """The token usage of persisted events (every model call's `chat_response` usage)."""
    names = {
        "input_tokens": "inputTokens",
        "output_tokens": "outputTokens",
        "cache_read_tokens": "cacheReadTokens",
    }
    total: dict[str, int] = {}
    cost: float | None = None
    for event in events:
        usage = event.get("usage") if event.get("type") == "chat_response" else None
        if isinstance(usage, dict):
            cost = add_cost(cost, event.get("cost"))
            for key, name in names.items():
                if isinstance(usage.get(key), int):
                    total[name] = total.get(name, 0) + usage[key]
    return format_usage(total, cost)


def format_conversation_row(conversation: dict[str, Any] | None) -> str:
    """` id  updated  events  title` for `jp conversation ls` (None: the header); the
    first column is left for a marker."""
    if conversation is None:
        return "  ".join([" " + "ID".ljust(26), "UPDATED".ljust(16), "EVENTS", "TITLE"])
    count = conversation.get("eventCount")
    return "  ".join(
        [
            " " + str(conversation.get("conversationId", "?")),
            format_time(conversation.get("updatedAt")),
            f"{'?' if count is None else count!s:>6}",
            one_line(str(conversation.get("title") or "")),
        ]
    )


def _indent(text: str) -> str:
    return "\n".join("  " + line for line in str(text).splitlines() or [""])


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _format_inquiry_request(event: dict[str, Any]) -> str:
    source = event.get("source") or {}
    origin = f"tool {source.get('name')}" if source.get("type") == "tool" else "assistant"
    question = event.get("question") or {}
    answer_type = (question.get("answer_type") or {}).get("type", "?")
    options = (question.get("answer_type") or {}).get("options")
    kind = f"{answer_type}: {' | '.join(map(str, options))}" if options else answer_type
    lines = [
        f"? inquiry {event.get('id')} from {origin} [{kind}]",
        _indent(question.get("text", "")),
    ]
    if question.get("context"):
        lines.append(_indent(question["context"]))
    return "\n".join(lines)


def _format_inquiry_response(event: dict[str, Any]) -> str:
    outcome = event.get("outcome", "answered")
    if outcome == "answered":
        detail = f"answered {_json(event.get('answer'))}"
    elif outcome == "cancelled":
        detail = f"cancelled ({event.get('reason', '?')})"
    elif outcome == "redacted":
        detail = "redacted"
    else:  # written by a newer daemon (protocol.md 12.2): shown, never guessed at
        detail = f"unknown outcome {_json(outcome)}"
    return f"  inquiry {event.get('id')}: {detail}"


def format_persisted_event(event: dict[str, Any]) -> str:
    """A readable, possibly multi-line view of one persisted conversation event."""
    kind = event.get("type")
    if kind == "turn_start":
        model = f" · {event['model']}" if event.get("model") else ""
        stamp = format_time(event.get("timestamp"), seconds=True)
        return f"── turn {event.get('turn_id', '?')}{model} · {stamp}"
    if kind == "chat_request":
        return "user:\n" + _indent(event.get("content", ""))
    if kind == "chat_response":
        cut = " (interrupted)" if event.get("interrupted") else ""
        if event.get("reasoning") is not None and event.get("message") is None:
            return f"assistant (reasoning){cut}:\n" + _indent(event["reasoning"])
        return f"assistant{cut}:\n" + _indent(event.get("message") or "")
    if kind == "tool_call_request":
        call = format_tool_call(str(event.get("name", "?")), event.get("arguments"), 400)
        return f"{call}  [{event.get('id')}]"
    if kind == "tool_call_response":
        label = "tool error" if event.get("is_error") else "tool result"
        return f"{label} [{event.get('id')}]:\n" + _indent(event.get("content", ""))
    if kind == "context_compacted":
        head = f"context compacted ({event.get('trigger', '?')}, {event.get('method', '?')}): "
        head += f"{event.get('tokens_before', '?')} -> {event.get('tokens_after', '?')} tokens"
        return head + (":\n" + _indent(event["summary"]) if event.get("summary") else "")
    if kind == "forced_tool_retry":
        forced = f"`{event['tool']}`" if event.get("tool") else "a tool"
        note = f"retry without reasoning ({forced} was forced but not called):\n"
        return note + _indent(event.get("message", ""))
    if kind == "inquiry_request":
        return _format_inquiry_request(event)
    if kind == "inquiry_response":
        return _format_inquiry_response(event)
    if kind == "permission_decision":
        what = {"run": "run", "deliver": "result", "sampling": "sampling"}.get(
            str(event.get("kind")), str(event.get("kind"))
        )
        verdict = "allowed" if event.get("allowed") else f"refused by {event.get('refused_by')}"
        call_id = event.get("tool_call_id")
        return f"permission ({what}) for {event.get('tool_name')}: {verdict}  [{call_id}]"
    if kind == "file_changed":
        what = "created" if event.get("before") is None else "changed"
        return f"{what} {event.get('path')}  [{event.get('tool_call_id')}]"
    if kind == "turn_undo":
        files = [f"  restored {p}" for p in event.get("restored") or []]
        files += [f"  removed  {p}" for p in event.get("removed") or []]
        return "\n".join([f"undid turn {event.get('turn_id')}", *files])
    if kind == "turn_end":
        reason = str(event.get("stop_reason", "?"))
        if event.get("error"):
            reason += f": {one_line(event['error'])}"
        return f"── end of turn ({reason})"
    rest = {key: value for key, value in event.items() if key not in ("type", "timestamp")}
    return f"[{kind}] {_json(rest)}"
