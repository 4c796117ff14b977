"""Anthropic Messages API provider, streaming over server-sent events.

Wire events handled: `message_start` (input and cache usage), `content_block_start`
/ `_delta` / `_stop` for `text`, `thinking` (with `signature_delta`) and
`tool_use` (with `input_json_delta` fragments assembled into arguments),
`message_delta` (stop reason, output usage), `message_stop`, `ping`, and `error`
events mid-stream. Unknown events and delta types are ignored, as the API's
versioning policy asks. A stream that ends before `message_stop` is a transient
failure and is retried like a 5xx.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from jpd.llm import forced_tool
from jpd.llm.anthropic_request import build_body, thinking_budget, uses_strict_tools
from jpd.llm.base import (
    EventStream,
    Finish,
    FinishReason,
    ModelRequest,
    ReasoningDelta,
    ToolCallEvent,
    UsageEvent,
)
from jpd.llm.errors import ProviderError
from jpd.llm.http_provider import Call, HttpProvider
from jpd.llm.request_build import encode_body, encoded_once
from jpd.llm.retry import RetryableError
from jpd.llm.stream_reader import Batch
from jpd.llm.transport import event_json, one_line
from jpd.protocol.usage import TokenUsage

DEFAULT_BASE_URL = "https://api.anthropic.com"
API_VERSION = "2023-06-01"
STRICT_TOOLS_BETA = "structured-outputs-2025-11-13"
_RETRYABLE_STREAM_ERRORS = frozenset({"overloaded_error", "api_error", "rate_limit_error"})
_STOP_REASONS: dict[str, FinishReason] = {
    "end_turn": "end_turn",
    "stop_sequence": "end_turn",
    "refusal": "end_turn",
    "pause_turn": "end_turn",
    "max_tokens": "max_tokens",
    "model_context_window_exceeded": "max_tokens",
    "tool_use": "tool_use",
}


class AnthropicProvider(HttpProvider):
    """`anthropic/<model>`: the Messages API with streaming, tools, thinking and caching.

    The key is read from `env[api_key_env]` when a stream starts (`HttpProvider`). The
    base URL is `base_url`, else `$ANTHROPIC_BASE_URL`, else the public endpoint.
    """

    name = "anthropic"
    default_base_url = DEFAULT_BASE_URL
    default_api_key_env = "ANTHROPIC_API_KEY"
    base_url_env = "ANTHROPIC_BASE_URL"
    refuses_forced_tool_with_reasoning = True

    def __repr__(self) -> str:
        return f"AnthropicProvider(base_url={self.base_url!r}, api_key_env={self.api_key_env!r})"

    def prepare(self, request: ModelRequest) -> ModelRequest:
        """A forced tool with reasoning on is sent softened (protocol.md 9.2): the
        sender retries a miss without reasoning."""
        if forced_tool.forces_tool(request) and _reasoning_active(request):
            return forced_tool.soften(request)
        return request

    def stream(self, request: ModelRequest) -> EventStream:
        """Structured output comes back as the forced `respond` tool's call: read as text."""
        stream = super().stream(request)
        if request.response_schema is not None:
            from jpd.llm.structured import tool_call_as_text

            return tool_call_as_text(stream)
        return stream

    def auth_headers(self, secret: str) -> dict[str, str]:
        return {"x-api-key": secret}

    def call(self, request: ModelRequest, base_url: str, secrets: tuple[str, ...]) -> Call:
        headers = {"anthropic-version": API_VERSION}
        if uses_strict_tools(request):
            headers["anthropic-beta"] = STRICT_TOOLS_BETA
        body = build_body(request)
        if request.tools and request.response_schema is None:
            tools = body["tools"]  # built from `request.tools` alone
            body["tools"] = encoded_once("anthropic tools", request.tools, lambda: tools)
        return Call(
            url=f"{base_url}/v1/messages",
            body=encode_body(body),
            headers=headers,
            parser=lambda: _StreamState(secrets),
            text_event=TEXT_EVENT,
        )


_TEXT_DELTA = re.compile(
    r'\{"type": ?"content_block_delta", ?"index": ?(?:0|[1-9][0-9]*), ?'
    r'"delta": ?\{"type": ?"text_delta", ?"text": ?"([^"\\\x00-\x1f\ud800-\udfff]*)"\}\}'
)
"""A text delta as the API sends it (compact, or as `json.dumps` spaces it; its keys in
this order), its text free of escapes: the text is the match's group, read without a JSON
parse (once per token, in half its time). Anything else (an escape in the text, other
keys, order or spacing) goes through the JSON parser."""


TEXT_EVENT = re.compile(rf"(?:event:[^\r\n]*\n)?data: ?{_TEXT_DELTA.pattern}\n\n")
"""A whole SSE event (any `event` line, LF ends) whose data is such a text delta: a slow
stream's chunk per token, read by `stream_events` in this one match (its group 1 is the
text, as `feed` would take it)."""


def text_delta(data: str) -> str | None:
    """The text of a `content_block_delta` event's `text_delta` when `data` is one in
    the common shape (what `json` would read from it); None otherwise (parse it)."""
    match = _TEXT_DELTA.fullmatch(data)
    return match.group(1) if match is not None else None


def _reasoning_active(request: ModelRequest) -> bool:
    return thinking_budget(request) is not None


@dataclass
class _Block:
    type: str
    id: str = ""
    name: str = ""
    parts: list[str] = field(default_factory=list)
    signature: str = ""


@dataclass
class _StreamState:
    """Assembles one response from its wire events."""

    secrets: tuple[str, ...]
    blocks: dict[int, _Block] = field(default_factory=dict)
    usage: dict[str, int] = field(default_factory=dict)
    stop_reason: str | None = None
    done: bool = False

    def feed(self, data: str, out: Batch) -> bool:
        """One SSE event's data into `out` (a `stream_reader.Handler`); returns whether
        the response is complete."""
        match = _TEXT_DELTA.fullmatch(data)  # `text_delta`, inlined: once per token
        if match is not None:
            if text := match.group(1):
                out.text(text)
            return self.done
        event = event_json("anthropic", data, self.secrets)
        if type(event) is not dict:
            return self.done
        if event.get("type") == "content_block_delta":
            # Once per token: a text delta is taken here, without the calls below.
            delta = event.get("delta")
            if type(delta) is dict and delta.get("type") == "text_delta":
                text = delta.get("text")
                if type(text) is str and text:
                    out.text(text)
                return self.done
        self._handle(event, out)
        return self.done

    def _handle(self, data: dict[str, Any], out: Batch) -> None:
        """One wire event into `out` (an `error` event is raised)."""
        kind = data.get("type")
        if kind == "content_block_delta":
            self._delta(data, out)
        elif kind == "content_block_start":
            self._start(data, out)
        elif kind == "content_block_stop":
            self._stop(data, out)
        elif kind == "message_start":
            message = data.get("message")
            if isinstance(message, dict):
                self._merge_usage(message.get("usage"))
        elif kind == "message_delta":
            delta = data.get("delta")
            if isinstance(delta, dict) and isinstance(delta.get("stop_reason"), str):
                self.stop_reason = delta["stop_reason"]
            self._merge_usage(data.get("usage"))
        elif kind == "message_stop":
            self.done = True
            out.add(UsageEvent(usage=self._usage()))
            out.add(Finish(reason=self._finish_reason()))
        elif kind == "error":
            raise _stream_error(data.get("error") or {}, self.secrets)

    def end(self, out: Batch) -> None:
        """The body ended: before `message_stop`, a transient failure."""
        if self.done:
            return
        raise RetryableError(
            "anthropic: the response stream ended before message_stop",
            reason="stream ended early",
        )

    def _start(self, data: dict[str, Any], out: Batch) -> None:
        raw = data.get("content_block") or {}
        block = _Block(type=str(raw.get("type", "")))
        if block.type == "tool_use":
            block.id = str(raw.get("id", ""))
            block.name = str(raw.get("name", ""))
            # `input` is `{}` at start; non-empty only if a server sends it whole.
            initial = raw.get("input")
            if initial:
                block.parts.append(json.dumps(initial))
        self.blocks[int(data.get("index", 0))] = block
        if block.type == "text" and isinstance(text := raw.get("text"), str) and text:
            out.text(text)
        elif block.type == "thinking" and isinstance(text := raw.get("thinking"), str) and text:
            out.reasoning(text)

    def _delta(self, data: dict[str, Any], out: Batch) -> None:
        delta = data.get("delta")
        if not isinstance(delta, dict):
            return
        kind = delta.get("type")  # `text_delta` is taken by `feed`
        if kind == "thinking_delta":
            if isinstance(text := delta.get("thinking"), str) and text:
                out.reasoning(text)
            return
        block = self.blocks.get(int(data.get("index", 0)))
        if block is None:
            return
        if kind == "input_json_delta":
            block.parts.append(delta.get("partial_json", ""))
        elif kind == "signature_delta":
            block.signature += delta.get("signature", "")

    def _stop(self, data: dict[str, Any], out: Batch) -> None:
        block = self.blocks.pop(int(data.get("index", 0)), None)
        if block is None:
            return
        if block.type == "thinking" and block.signature:
            out.add(ReasoningDelta(text="", signature=block.signature))
            return
        if block.type != "tool_use":
            return
        raw = "".join(block.parts).strip()
        try:
            arguments = json.loads(raw) if raw else {}
        except ValueError as exc:
            raise ProviderError(
                f"anthropic: the model sent invalid JSON arguments for tool `{block.name}`"
            ) from exc
        if not isinstance(arguments, dict):
            raise ProviderError(
                f"anthropic: the model sent non-object arguments for tool `{block.name}`"
            )
        out.add(ToolCallEvent(id=block.id, name=block.name, arguments=arguments))

    def _merge_usage(self, raw: Any) -> None:
        if not isinstance(raw, dict):
            return
        # message_delta usage is cumulative: later values replace earlier ones.
        for key, value in raw.items():
            if isinstance(value, int):
                self.usage[key] = value

    def _usage(self) -> TokenUsage:
        return TokenUsage(
            input_tokens=self.usage.get("input_tokens"),
            output_tokens=self.usage.get("output_tokens"),
            cache_read_tokens=self.usage.get("cache_read_input_tokens"),
            cache_creation_tokens=self.usage.get("cache_creation_input_tokens"),
        )

    def _finish_reason(self) -> FinishReason:
        return _STOP_REASONS.get(self.stop_reason or "end_turn", "end_turn")


def _stream_error(error: dict[str, Any], secrets: tuple[str, ...]) -> ProviderError:
    etype = str(error.get("type") or "error")
    detail = one_line(str(error.get("message") or "no details"), secrets)
    if etype in _RETRYABLE_STREAM_ERRORS:
        label = "server overloaded" if etype == "overloaded_error" else "server error"
        return RetryableError(f"anthropic: {label} mid-stream ({etype}): {detail}", reason=etype)
    return ProviderError(f"anthropic: error mid-stream ({etype}): {detail}")
