"""Rendering: streamed turn events to the terminal (a conversation's recorded events as
text: `jpcli.conversations.event_lines`).

The answer goes to stdout; everything else (reasoning, tool calls, notes) to stderr,
so `jp query ... > answer.txt` captures only the answer.
"""

from __future__ import annotations

import json
import time
from datetime import datetime
from typing import Any, TextIO

DIM = "\x1b[2m"
RESET = "\x1b[0m"
TOOL_MARK = "⚙"
_FAILED_TAIL = 10
"""Last lines of a failed command's output shown under its line."""
_MAX_ARGS = 80


def one_line(text: str, limit: int | None = None) -> str:
    """Collapse whitespace runs (newlines included) and cut to `limit` characters with `…`."""
    flat = " ".join(str(text).split())
    if limit is not None and len(flat) > limit:
        return flat[: max(limit - 1, 0)] + "…"
    return flat


def format_tool_call(name: str, arguments: Any, limit: int | None = _MAX_ARGS) -> str:
    """`⚙ name(key=value, …)`: a compact one-line view of a tool call."""
    if isinstance(arguments, dict):
        parts = [
            f"{key}={json.dumps(value, ensure_ascii=False)}" for key, value in arguments.items()
        ]
        args = ", ".join(parts)
    elif arguments is None:
        args = ""
    else:
        args = json.dumps(arguments, ensure_ascii=False)
    return f"{TOOL_MARK} {name}({one_line(args, limit)})"


_PLAN_MARKS = {"completed": "[x]", "in_progress": "[>]", "pending": "[ ]"}


def format_plan(arguments: Any) -> str | None:
    """The model's plan (`update_plan` arguments) as a checklist; None if malformed."""
    plan = arguments.get("plan") if isinstance(arguments, dict) else None
    if not isinstance(plan, list) or not plan:
        return None
    lines = ["Plan:"]
    for item in plan:
        if not isinstance(item, dict) or item.get("status") not in _PLAN_MARKS:
            return None
        lines.append(f"  {_PLAN_MARKS[item['status']]} {one_line(str(item.get('step', '')))}")
    return "\n".join(lines)


def format_time(stamp: Any, seconds: bool = False) -> str:
    """An ISO timestamp shown in local time (`YYYY-MM-DD HH:MM`); unparsable input verbatim."""
    if not isinstance(stamp, str):
        return "-" if stamp is None else str(stamp)
    try:
        moment = datetime.fromisoformat(stamp)
    except ValueError:
        return stamp
    if moment.tzinfo is not None:
        moment = moment.astimezone()
    return moment.strftime("%Y-%m-%d %H:%M:%S" if seconds else "%Y-%m-%d %H:%M")


class TurnRenderer:
    """Writes one turn's `turn/event`s: answer text to `out`, the rest to `err`.

    When both streams are the same terminal, a line on stderr never starts in the
    middle of streamed answer text (and vice versa). Reasoning is shown dimmed, and
    only when stderr is a terminal.
    """

    def __init__(
        self, out: TextIO, err: TextIO, *, out_tty: bool, err_tty: bool, color: bool = True
    ) -> None:
        self.out = out
        self.err = err
        self.err_tty = err_tty
        self.color = color  # False with NO_COLOR: reasoning is shown undimmed
        self._shared = out_tty and err_tty
        self._out_open = False  # the terminal cursor sits after answer text
        self._err_open = False  # ... after reasoning text
        self._out_last = ""  # last character written to stdout, for the final newline
        self._tool_names: dict[str, str] = {}
        self._tool_titles: dict[str, str] = {}
        self._paused_at: float | None = None
        self._tool_started: dict[str, float] = {}
        self._tool_partial: dict[str, str] = {}  # live output after its last newline
        self.usage: dict[str, int] = {}
        self.cost: float | None = None
        """Token counts of this turn so far (`inputTokens`, `outputTokens`, ...)."""
        self.context: dict[str, int] | None = None
        """How full the model's context is after the latest call (`{used, window}`)."""

    def handle(self, event: dict[str, Any]) -> None:
        """Render one event (`turn_completed` only ends the calls that got no result)."""
        kind = event.get("kind")
        if self._paused_at is not None:
            # Time at a prompt is the person's, not the calls'.
            waited = time.monotonic() - self._paused_at
            self._paused_at = None
            for call_id in self._tool_started:
                self._tool_started[call_id] += waited
        if kind == "turn_completed":
            self._unfinished(str(event.get("stopReason")))
            return
        if event.get("hidden"):
            return  # the tool's `style.hidden`: not shown (e.g. `ask_user`, whose prompt is)
        if kind == "text_delta":
            self.text(str(event.get("text", "")))
        elif kind == "reasoning_delta":
            self.reasoning(str(event.get("text", "")))
        elif kind == "tool_call":
            from jpcli.call_summary import call_line, title_of

            name = str(event.get("name", "?"))
            self._tool_names[str(event.get("id"))] = name
            self._tool_titles[str(event.get("id"))] = title_of(event)
            self._tool_started[str(event.get("id"))] = time.monotonic()
            plan = format_plan(event.get("arguments")) if name == "update_plan" else None
            self.note(plan or call_line(event))
        elif kind == "tool_progress":
            self._tool_output(str(event.get("id")), event.get("message"))
        elif kind == "tool_result":
            self._tool_output(str(event.get("id")), None, end=True)
            self.note(self._tool_end(event))
            if not event.get("isError"):
                from jpcli.diffs import edit_diff

                color = self.color and self.err_tty
                for line in edit_diff(str(event.get("content", "")), color=color):
                    self.note(line)
        elif kind == "usage" and isinstance(event.get("usage"), dict):
            for key, value in event["usage"].items():
                if isinstance(value, int):
                    self.usage[key] = self.usage.get(key, 0) + value
            self.cost = add_cost(self.cost, event.get("cost"))
            if isinstance(event.get("context"), dict):
                self.context = event["context"]
        elif kind == "context_compacted":
            self.note(format_compacted(event))
        elif kind == "retry":
            reason = one_line(str(event.get("reason", "")), 120)
            self.note(f"jp: retrying in {event.get('delay', '?')}s ({reason})")
        elif kind == "forced_tool_retry":
            forced = f"`{event['tool']}`" if event.get("tool") else "a tool"
            self.note(f"jp: {forced} was forced but not called; asking again without reasoning")

    def text(self, text: str) -> None:
        """Answer text, flushed at once."""
        if not text:
            return
        if self._shared and self._err_open:
            self.err.write("\n")
            self.err.flush()
            self._err_open = False
        self.out.write(text)
        self.out.flush()
        self._out_last = text[-1]
        self._out_open = self._shared and text[-1] != "\n"

    def reasoning(self, text: str) -> None:
        """Reasoning text, dimmed on a terminal stderr; dropped otherwise."""
        if not text or not self.err_tty:
            return
        prefix = "\n" if self._shared and self._out_open else ""
        self._out_open = False
        self.err.write(f"{prefix}{DIM}{text}{RESET}" if self.color else f"{prefix}{text}")
        self.err.flush()
        self._err_open = text[-1] != "\n"

    def note(self, line: str) -> None:
        """One whole line on stderr."""
        prefix = "\n" if self._err_open or (self._shared and self._out_open) else ""
        self._err_open = self._out_open = False
        self.err.write(f"{prefix}{line}\n")
        self.err.flush()

    def _tool_output(self, call_id: str, message: Any, end: bool = False) -> None:
        """Live output of a running call (`run_command`), line by line under its line."""
        text = self._tool_partial.pop(call_id, "") + (message if isinstance(message, str) else "")
        lines = text.split("\n")
        if not end:
            self._tool_partial[call_id] = lines.pop()
        for line in lines if any(lines) else ():
            shown = f"  │ {line}"
            self.note(f"{DIM}{shown}{RESET}" if self.color else shown)

    def _tool_end(self, event: dict[str, Any]) -> str:
        """One deliberate line (`✓ Read kv.py (1-40) 0.1s`, `✗ Ran make: exit 2 1.2s`);
        under a failure, its output (the last lines of a failed command's)."""
        from jpcli.call_summary import end_line

        call_id = str(event.get("id"))
        name = self._tool_names.pop(call_id, "tool")
        title = self._tool_titles.pop(call_id, name)
        started = self._tool_started.pop(call_id, None)
        took = f" {time.monotonic() - started:.1f}s" if started is not None else ""
        content = str(event.get("content", ""))
        line, failed = end_line(name, title, content, bool(event.get("isError")), took)
        if not failed:
            return line
        lines = content.strip().splitlines()
        if not event.get("isError"):
            lines = lines[-_FAILED_TAIL:]
        if len(lines) == 1 and event.get("isError"):
            return f"{line}: {lines[0]}"
        return "\n".join([line, *("  " + text for text in lines)])

    def paused(self) -> None:
        """A prompt is about to be shown: its time is not counted in the calls'."""
        self._paused_at = time.monotonic()

    def _unfinished(self, stop_reason: str) -> None:
        """A line for each call the turn ended without a result (cancelled)."""
        why = "cancelled" if stop_reason == "cancelled" else "stopped"
        for call_id in list(self._tool_titles):
            self.note(f"✗ {self._tool_titles.pop(call_id)}: {why}")
            self._tool_names.pop(call_id, None)
            self._tool_started.pop(call_id, None)

    def summary(self) -> None:
        """After the turn, on a terminal: its token usage."""
        line = format_usage(self.usage, self.cost)
        if line and self.context:
            line += ", " + format_context(self.context)
        if line and self.err_tty:
            self.note(f"{DIM}{line}{RESET}" if self.color else line)

    def suspend(self) -> None:
        """Before a prompt in the middle of the turn: end the open lines."""
        self.finish()

    def finish(self) -> None:
        """End the answer with a newline (if any text came) and close an open reasoning line."""
        if self._out_last and self._out_last != "\n":
            self.out.write("\n")
            self.out.flush()
            self._out_last = "\n"
        self._out_open = False
        if self._err_open:
            self.err.write("\n")
            self.err.flush()
            self._err_open = False


def add_cost(total: float | None, cost: Any) -> float | None:
    """`total` plus one response's `cost` (None: no price known so far)."""
    if isinstance(cost, (int, float)) and not isinstance(cost, bool):
        return (total or 0.0) + cost
    return total


def format_context(context: dict[str, Any]) -> str:
    """`context 41% of 200,000` from a usage event's `context`."""
    used, window = context.get("used"), context.get("window")
    if not isinstance(used, int) or not isinstance(window, int) or window <= 0:
        return ""
    return f"context {round(100 * used / window)}% of {window:,}"


def format_compacted(event: dict[str, Any]) -> str:
    """One line on a compaction: a `context_compacted` turn event or the result of
    `conversation/compact`."""
    if not event.get("compacted", True):
        return "jp: nothing to compact (the conversation is all recent context)"
    how = {"summary": "summarised", "stub": "old tool outputs cleared", "trim": "trimmed"}
    what = how.get(str(event.get("method")), "compacted")
    before, after = event.get("tokensBefore"), event.get("tokensAfter")
    sizes = ""
    if isinstance(before, int) and isinstance(after, int):
        sizes = f": {before:,} -> {after:,} tokens"
    return f"jp: context {what}{sizes}"


def format_usage(usage: dict[str, int], cost: float | None = None) -> str:
    """`tokens: 1,200 in (1,000 cached), 80 out, cost 0.0042` from camelCase usage
    figures (the cost in the unit of `[prices]`, when the model has a price)."""
    if not usage:
        return ""
    parts = [f"{usage.get('inputTokens', 0):,} in"]
    cached = usage.get("cacheReadTokens")
    if cached:
        parts[0] += f" ({cached:,} cached)"
    parts.append(f"{usage.get('outputTokens', 0):,} out")
    if cost is not None:
        parts.append(f"cost {cost:.4f}")
    return "tokens: " + ", ".join(parts)
