"""OpenAI Responses API provider (`openai/<model>` by default), streaming over SSE.

Wire events handled: `response.output_text.delta` and `response.refusal.delta` (the
answer), `response.reasoning_summary_text.delta` / `response.reasoning_text.delta`
(reasoning shown, summary parts separated by a blank line), `response.output_item.done`
for whole `function_call` items and `reasoning` items (kept with their encrypted
content, sent back next time: `openai_responses_request.py`), and the ends:
`response.completed`, `response.incomplete` (a `max_output_tokens` cut), and
`response.failed` / `error` (raised). Unknown events are ignored. A body that ends
before one of the three ends is retried.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from jpd.llm.base import Finish, FinishReason, ModelRequest, ReasoningDelta, ToolCallEvent
from jpd.llm.base import UsageEvent as Usage
from jpd.llm.errors import ContextOverflow, ProviderError
from jpd.llm.http_provider import Call, HttpProvider
from jpd.llm.openai_responses_request import SIGNATURE_PREFIX, build_body
from jpd.llm.request_build import encode_body
from jpd.llm.retry import RetryableError
from jpd.llm.stream_reader import Batch
from jpd.llm.transport import event_json, one_line
from jpd.protocol.usage import TokenUsage

DEFAULT_BASE_URL = "https://api.openai.com/v1"
_RETRYABLE = frozenset({"server_error", "rate_limit_exceeded", "internal_error", "overloaded"})
_ENDS = frozenset({"response.completed", "response.incomplete", "response.failed"})


class OpenAIResponsesProvider(HttpProvider):
    """`openai/<model>` on `/v1/responses`. The key is `$OPENAI_API_KEY` by default; the
    base URL `base_url`, else `$OPENAI_BASE_URL`, else the public endpoint."""

    name = "openai"
    default_base_url = DEFAULT_BASE_URL
    default_api_key_env = "OPENAI_API_KEY"
    base_url_env = "OPENAI_BASE_URL"

    def call(self, request: ModelRequest, base_url: str, secrets: tuple[str, ...]) -> Call:
        return Call(
            url=f"{base_url}/responses",
            body=encode_body(build_body(request)),
            parser=lambda: _StreamState(secrets),
        )


@dataclass
class _StreamState:
    """Assembles one response from its events."""

    secrets: tuple[str, ...]
    calls: list[ToolCallEvent] = field(default_factory=list)
    reasoning: list[dict[str, Any]] = field(default_factory=list)
    done: bool = False

    def feed(self, data: str, out: Batch) -> bool:
        """One SSE event's data into `out`; returns whether the response ended."""
        event = event_json("openai", data, self.secrets)
        if type(event) is not dict:
            return False
        kind = event.get("type")
        if kind in ("response.output_text.delta", "response.refusal.delta"):
            delta = event.get("delta")
            if type(delta) is str and delta:
                out.text(delta)
        elif kind in ("response.reasoning_summary_text.delta", "response.reasoning_text.delta"):
            delta = event.get("delta")
            if type(delta) is str and delta:
                out.reasoning(delta)
        elif kind == "response.reasoning_summary_part.added":
            if isinstance(event.get("summary_index"), int) and event["summary_index"] > 0:
                out.reasoning("\n\n")
        elif kind == "response.output_item.done":
            item = event.get("item")
            if isinstance(item, dict):
                self._item(item)
        elif kind in _ENDS:
            response = event.get("response")
            self._end(str(kind), response if isinstance(response, dict) else {}, out)
            self.done = True
            return True
        elif kind == "error":
            raise self._error(event)
        return False

    def _item(self, item: dict[str, Any]) -> None:
        if item.get("type") == "function_call":
            name = str(item.get("name") or "")
            raw = item.get("arguments")
            try:
                arguments = json.loads(raw) if isinstance(raw, str) and raw.strip() else {}
            except ValueError as exc:
                raise ProviderError(
                    f"openai: the model sent invalid JSON arguments for tool `{name}`"
                ) from exc
            if not isinstance(arguments, dict):
                raise ProviderError(
                    f"openai: the model sent non-object arguments for tool `{name}`"
                )
            call_id = str(item.get("call_id") or item.get("id") or "")
            self.calls.append(ToolCallEvent(id=call_id, name=name, arguments=arguments))
        elif item.get("type") == "reasoning" and item.get("encrypted_content"):
            # Without its encrypted content an item cannot be sent back (nothing is stored).
            kept = {"type": "reasoning", "id": item.get("id"), "summary": item.get("summary") or []}
            kept["encrypted_content"] = item["encrypted_content"]
            self.reasoning.append(kept)

    def _end(self, kind: str, response: dict[str, Any], out: Batch) -> None:
        if kind == "response.failed":
            raise self._error(response.get("error") or {})
        if self.reasoning:
            items = json.dumps(self.reasoning, ensure_ascii=False, separators=(",", ":"))
            out.add(ReasoningDelta(text="", signature=SIGNATURE_PREFIX + items))
        for call in self.calls:
            out.add(call)
        usage = response.get("usage")
        if isinstance(usage, dict):
            out.add(Usage(usage=_usage(usage)))
        details = response.get("incomplete_details")
        cut = isinstance(details, dict) and details.get("reason") == "max_output_tokens"
        reason: FinishReason = "tool_use" if self.calls else "max_tokens" if cut else "end_turn"
        out.add(Finish(reason=reason))

    def end(self, out: Batch) -> None:
        """The body ended: before the response did, a transient failure."""
        if self.done:
            return
        raise RetryableError(
            "openai: the response stream ended before response.completed",
            reason="stream ended early",
        )

    def _error(self, error: Any) -> ProviderError:
        if isinstance(error, dict):
            code = str(error.get("code") or error.get("type") or "error")
            message = str(error.get("message") or "no details")
        else:
            code, message = "error", str(error)
        text = f"openai: error mid-stream ({code}): {one_line(message, self.secrets)}"
        if code == "context_length_exceeded":
            return ContextOverflow(text)
        if code in _RETRYABLE:
            return RetryableError(text, reason=code)
        return ProviderError(text)


def _usage(raw: dict[str, Any]) -> TokenUsage:
    prompt = raw.get("input_tokens")
    details = raw.get("input_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, dict) else None
    if isinstance(prompt, int) and isinstance(cached, int):
        prompt -= cached  # as Anthropic's figures: the uncached part
    output = raw.get("output_tokens")
    return TokenUsage(
        input_tokens=prompt if isinstance(prompt, int) else None,
        output_tokens=output if isinstance(output, int) else None,
        cache_read_tokens=cached if isinstance(cached, int) else None,
    )
