"""Google Gemini provider: `streamGenerateContent` over server-sent events.

Each SSE event is a whole `GenerateContentResponse`: `candidates[0].content.parts`
carry text, thought summaries (`thought: true`), `functionCall`s (arguments whole,
never in fragments) and `thoughtSignature`s; `finishReason` ends the candidate;
`usageMetadata` is cumulative (the last one counts); `promptFeedback.blockReason`
says the prompt was refused. The stream has no end marker: a body that ends after a
`finishReason` is complete, one that ends before it is retried.

The key goes in the `x-goog-api-key` header, never in the URL (URLs end up in logs).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from jpd.llm.base import (
    Finish,
    FinishReason,
    ModelRequest,
    ReasoningDelta,
    ToolCallEvent,
    UsageEvent,
)
from jpd.llm.errors import ProviderError
from jpd.llm.google_request import SIGNATURE_PREFIX, build_body
from jpd.llm.http_provider import Call, HttpProvider
from jpd.llm.request_build import encode_body
from jpd.llm.retry import RetryableError
from jpd.llm.stream_reader import Batch
from jpd.llm.transport import event_json, one_line
from jpd.protocol.usage import TokenUsage

DEFAULT_BASE_URL = "https://generativelanguage.googleapis.com/v1beta"
_RETRYABLE_STATUSES = frozenset(
    {"UNAVAILABLE", "INTERNAL", "RESOURCE_EXHAUSTED", "DEADLINE_EXCEEDED"}
)


class GoogleProvider(HttpProvider):
    """`google/<model>`: Gemini with streaming, function calling, thinking and images.

    The key is read from `env[api_key_env]` (`GEMINI_API_KEY` by default) when a stream
    starts; the base URL is `base_url` (the API version included), else the public one.
    """

    name = "google"
    default_base_url = DEFAULT_BASE_URL
    default_api_key_env = "GEMINI_API_KEY"

    def auth_headers(self, secret: str) -> dict[str, str]:
        return {"x-goog-api-key": secret}

    def call(self, request: ModelRequest, base_url: str, secrets: tuple[str, ...]) -> Call:
        model = quote(request.model.removeprefix("models/"), safe="-._@")
        return Call(
            url=f"{base_url}/models/{model}:streamGenerateContent?alt=sse",
            body=encode_body(build_body(request)),
            parser=lambda: _StreamState(secrets),
        )


@dataclass
class _StreamState:
    """Assembles one response from its `GenerateContentResponse` events."""

    secrets: tuple[str, ...]
    calls: list[ToolCallEvent] = field(default_factory=list)
    signature: str | None = None
    call_signature: str | None = None
    usage: dict[str, int] = field(default_factory=dict)
    finish_reason: str | None = None

    def feed(self, data: str, out: Batch) -> bool:
        """One SSE event's data into `out`; the stream has no end marker (`end`)."""
        chunk = event_json("google", data, self.secrets)
        if type(chunk) is not dict:
            return False
        if chunk.get("error"):
            raise _stream_error(chunk["error"], self.secrets)
        feedback = chunk.get("promptFeedback")
        if isinstance(feedback, dict) and feedback.get("blockReason"):
            reason = one_line(str(feedback["blockReason"]), self.secrets, 80)
            raise ProviderError(f"google: the prompt was blocked ({reason})")
        usage = chunk.get("usageMetadata")
        if isinstance(usage, dict):
            self.usage = {k: v for k, v in usage.items() if type(v) is int}
        candidates = chunk.get("candidates")
        if isinstance(candidates, list) and candidates and isinstance(candidates[0], dict):
            self._candidate(candidates[0], out)
        return False

    def _candidate(self, candidate: dict[str, Any], out: Batch) -> None:
        content = candidate.get("content")
        parts = content.get("parts") if isinstance(content, dict) else None
        for part in parts if isinstance(parts, list) else ():
            if isinstance(part, dict):
                self._part(part, out)
        if isinstance(candidate.get("finishReason"), str):
            self.finish_reason = candidate["finishReason"]

    def _part(self, part: dict[str, Any], out: Batch) -> None:
        signature = part.get("thoughtSignature")
        if isinstance(signature, str) and signature:
            self.signature = signature
        call = part.get("functionCall")
        if isinstance(call, dict):
            self._call(call, signature if isinstance(signature, str) else None)
            return
        text = part.get("text")
        if isinstance(text, str) and text:
            if part.get("thought") is True:
                out.reasoning(text)
            else:
                out.text(text)

    def _call(self, call: dict[str, Any], signature: str | None) -> None:
        name = str(call.get("name") or "")
        arguments = call.get("args")
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict):
            raise ProviderError(f"google: the model sent non-object arguments for tool `{name}`")
        if not self.calls and signature:
            self.call_signature = signature
        # The Gemini API sends no call ids (Vertex does): the turn loop needs one.
        call_id = str(call.get("id") or f"call_{uuid.uuid4().hex[:24]}")
        self.calls.append(ToolCallEvent(id=call_id, name=name, arguments=arguments))

    def end(self, out: Batch) -> None:
        """The body ended: whole once a `finishReason` came, else retried."""
        if self.finish_reason is None:
            raise RetryableError(
                "google: the response stream ended before a finishReason",
                reason="stream ended early",
            )
        if self.finish_reason == "MALFORMED_FUNCTION_CALL" and not self.calls:
            raise RetryableError(
                "google: the model produced a malformed function call",
                reason="malformed function call",
            )
        signature = self.call_signature or self.signature
        if signature:
            # Sent back with the turn's first function call (google_request.py).
            out.add(ReasoningDelta(text="", signature=SIGNATURE_PREFIX + signature))
        for call in self.calls:
            out.add(call)
        out.add(UsageEvent(usage=self._usage()))
        reason: FinishReason = "max_tokens" if self.finish_reason == "MAX_TOKENS" else "end_turn"
        out.add(Finish(reason="tool_use" if self.calls else reason))

    def _usage(self) -> TokenUsage:
        prompt = self.usage.get("promptTokenCount")
        cached = self.usage.get("cachedContentTokenCount")
        output = self.usage.get("candidatesTokenCount")
        thoughts = self.usage.get("thoughtsTokenCount")
        if output is not None or thoughts is not None:
            output = (output or 0) + (thoughts or 0)
        if prompt is not None and cached is not None:
            prompt -= cached  # as Anthropic's figures: the uncached part
        return TokenUsage(input_tokens=prompt, output_tokens=output, cache_read_tokens=cached)


def _stream_error(error: Any, secrets: tuple[str, ...]) -> ProviderError:
    if isinstance(error, dict):
        status = str(error.get("status") or error.get("code") or "error")
        message = str(error.get("message") or "no details")
    else:
        status, message = "error", str(error)
    text = f"google: error mid-stream ({status}): {one_line(message, secrets)}"
    if status in _RETRYABLE_STATUSES:
        return RetryableError(text, reason=status)
    return ProviderError(text)
