"""OpenAI Chat Completions provider (streaming), also serving OpenAI-compatible servers.

One implementation for `openai/<model>` (api.openai.com, key required) and
`openai-compatible/<model>` (Ollama, llama.cpp server, vLLM, OpenRouter, ...:
a `base_url` and an optional key). Wire chunks handled: `choices[0].delta`
with `content`, `refusal`, `tool_calls` fragments (assembled by `index`) and
the `reasoning_content` / `reasoning` text some compatible servers stream, a
`finish_reason`, the usage-only chunk requested by `stream_options`, an
`{"error": ...}` chunk mid-stream, and `data: [DONE]`.

A stream that ends before `[DONE]` is retried, unless a `finish_reason` had
already arrived: then only the trailing usage chunk is missing and the answer
is complete, so it is kept rather than paid for twice.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx

from jpd.llm.base import (
    Finish,
    FinishReason,
    ModelRequest,
    ToolCallEvent,
    UsageEvent,
)
from jpd.llm.errors import ProviderError, ProviderUnavailable
from jpd.llm.http_provider import Call, HttpProvider
from jpd.llm.openai_request import build_body
from jpd.llm.request_build import encode_body, encoded_once
from jpd.llm.retry import RetryableError, RetryPolicy
from jpd.llm.stream_reader import Batch
from jpd.llm.transport import event_json, one_line
from jpd.protocol.usage import TokenUsage

DEFAULT_BASE_URL = "https://api.openai.com/v1"
_FINISH_REASONS: dict[str, FinishReason] = {
    "stop": "end_turn",
    "content_filter": "end_turn",
    "length": "max_tokens",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
}
_RETRYABLE_STREAM_ERRORS = frozenset(
    {"server_error", "api_error", "overloaded_error", "rate_limit_exceeded", "service_unavailable"}
)


class OpenAIProvider(HttpProvider):
    """Chat Completions over SSE. Use `OpenAIProvider.compatible(...)` for other servers.

    For `openai` the key is required (`$OPENAI_API_KEY` by default) and the base
    URL is `base_url`, else `$OPENAI_BASE_URL`, else the public endpoint. For
    `openai-compatible` the base URL is required and the key optional; `headers` are
    sent with every request (OpenRouter's attribution, `HTTP-Referer` and `X-Title`).
    """

    def __init__(
        self,
        *,
        base_url: str | None = None,
        api_key_env: str | None = "OPENAI_API_KEY",
        max_retries: int = 3,
        timeout: float = 600.0,
        env: Mapping[str, str] | None = None,
        client: httpx.AsyncClient | None = None,
        retry_policy: RetryPolicy | None = None,
        name: str = "openai",
        headers: Mapping[str, str] | None = None,
    ) -> None:
        self.name = name
        self._compatible = name != "openai"
        if self._compatible:
            self.default_base_url = None
            self.base_url_env = None
        else:
            self.default_base_url = DEFAULT_BASE_URL
            self.base_url_env = "OPENAI_BASE_URL"
        self._headers = dict(headers or {})
        super().__init__(
            base_url=base_url,
            api_key_env=api_key_env,
            max_retries=max_retries,
            timeout=timeout,
            env=env,
            client=client,
            retry_policy=retry_policy,
        )

    @classmethod
    def compatible(
        cls,
        *,
        base_url: str | None,
        api_key_env: str | None = None,
        max_retries: int = 3,
        timeout: float = 600.0,
        env: Mapping[str, str] | None = None,
        client: httpx.AsyncClient | None = None,
        retry_policy: RetryPolicy | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> OpenAIProvider:
        """An `openai-compatible` provider: `base_url` required, key optional."""
        return cls(
            base_url=base_url,
            api_key_env=api_key_env,
            max_retries=max_retries,
            timeout=timeout,
            env=env,
            client=client,
            retry_policy=retry_policy,
            name="openai-compatible",
            headers=headers,
        )

    def require_base_url(self) -> str:
        if self.base_url is None:
            raise ProviderUnavailable(
                f"{self.name}: no base URL; set providers.openai_compatible.base_url"
                " (e.g. http://localhost:11434/v1 for Ollama)"
            )
        return self.base_url

    def call(self, request: ModelRequest, base_url: str, secrets: tuple[str, ...]) -> Call:
        name = self.name
        body = build_body(request, compatible=self._compatible)
        if "tools" in body:  # built from `request.tools` alone
            tools = body["tools"]
            body["tools"] = encoded_once("openai tools", request.tools, lambda: tools)
        return Call(
            url=f"{base_url}/chat/completions",
            body=encode_body(body),
            headers=dict(self._headers),
            parser=lambda: _StreamState(name, secrets),
        )


@dataclass
class _Call:
    id: str = ""
    name: str = ""
    parts: list[str] = field(default_factory=list)


@dataclass
class _StreamState:
    """Assembles one response from its chunks."""

    provider: str
    secrets: tuple[str, ...]
    calls: dict[int, _Call] = field(default_factory=dict)
    finish_reason: str | None = None
    usage: TokenUsage | None = None
    done: bool = False

    def feed(self, data: str, out: Batch) -> bool:
        """One SSE event's data into `out` (a `stream_reader.Handler`); returns whether
        the response is complete (`[DONE]`)."""
        if data.strip() == "[DONE]":
            self.close(out)
            self.done = True
            return True
        chunk = event_json(self.provider, data, self.secrets)
        if isinstance(chunk, dict):
            self.chunk(chunk, out)
        return False

    def chunk(self, data: dict[str, Any], out: Batch) -> None:
        """One wire chunk into `out` (an `error` chunk is raised)."""
        error = data.get("error")
        if error:
            raise self._error(error)
        if isinstance(data.get("usage"), dict):
            self.usage = _usage(data["usage"])
        for choice in data.get("choices") or []:
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta") or {}
            for key in ("reasoning_content", "reasoning"):
                text = delta.get(key)
                if isinstance(text, str) and text:
                    out.reasoning(text)
                    break
            for key in ("content", "refusal"):
                text = delta.get(key)
                if isinstance(text, str) and text:
                    out.text(text)
            for fragment in delta.get("tool_calls") or []:
                self._tool_fragment(fragment)
            if choice.get("finish_reason"):
                self.finish_reason = str(choice["finish_reason"])

    def _tool_fragment(self, fragment: dict[str, Any]) -> None:
        call = self.calls.setdefault(int(fragment.get("index", len(self.calls))), _Call())
        if fragment.get("id") and not call.id:
            call.id = str(fragment["id"])
        function = fragment.get("function") or {}
        if function.get("name") and not call.name:
            call.name = str(function["name"])
        arguments = function.get("arguments")
        if isinstance(arguments, str):
            call.parts.append(arguments)
        elif isinstance(arguments, dict):
            # Some compatible servers send the arguments already parsed.
            call.parts.append(json.dumps(arguments))

    def end(self, out: Batch) -> None:
        """The body ended before `[DONE]`: retried, unless a `finish_reason` came (then
        only the trailing usage chunk is missing and the answer is whole)."""
        if self.done:
            return
        if self.finish_reason is None:
            raise RetryableError(
                f"{self.provider}: the response stream ended before [DONE]",
                reason="stream ended early",
            )
        self.close(out)

    def close(self, out: Batch) -> None:
        """The closing events: tool calls, usage, finish."""
        for index in sorted(self.calls):
            call = self.calls[index]
            raw = "".join(call.parts).strip()
            try:
                arguments = json.loads(raw) if raw else {}
            except ValueError as exc:
                raise ProviderError(
                    f"{self.provider}: the model sent invalid JSON arguments for tool `{call.name}`"
                ) from exc
            if not isinstance(arguments, dict):
                raise ProviderError(
                    f"{self.provider}: the model sent non-object arguments for tool `{call.name}`"
                )
            # Some compatible servers omit call ids; the turn loop needs one.
            call_id = call.id or f"call_{uuid.uuid4().hex[:24]}"
            out.add(ToolCallEvent(id=call_id, name=call.name, arguments=arguments))
        if self.usage is not None:
            out.add(UsageEvent(usage=self.usage))
        reason = _FINISH_REASONS.get(self.finish_reason or "stop", "end_turn")
        # Some servers report "stop" even when the answer is tool calls.
        out.add(Finish(reason="tool_use" if self.calls else reason))

    def _error(self, error: Any) -> ProviderError:
        if isinstance(error, dict):
            etype = str(error.get("type") or error.get("code") or "error")
            code = str(error.get("code") or "")
            message = str(error.get("message") or "no details")
        else:
            etype, code, message = "error", "", str(error)
        detail = one_line(message, self.secrets)
        text = f"{self.provider}: error mid-stream ({etype}): {detail}"
        if etype in _RETRYABLE_STREAM_ERRORS or code in _RETRYABLE_STREAM_ERRORS:
            return RetryableError(text, reason=etype)
        return ProviderError(text)


def _usage(raw: dict[str, Any]) -> TokenUsage:
    prompt = raw.get("prompt_tokens")
    details = raw.get("prompt_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, dict) else None
    # Like Anthropic's figures, input_tokens counts only the uncached part.
    if isinstance(prompt, int) and isinstance(cached, int):
        prompt -= cached
    return TokenUsage(
        input_tokens=prompt if isinstance(prompt, int) else None,
        output_tokens=raw.get("completion_tokens")
        if isinstance(raw.get("completion_tokens"), int)
        else None,
        cache_read_tokens=cached if isinstance(cached, int) else None,
    )
