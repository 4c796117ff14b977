"""Ollama provider: the native `/api/chat` endpoint, streamed as NDJSON.

Each line is a chat chunk: `message.content`, `message.thinking`, `message.tool_calls`
(whole calls, arguments already parsed), then a last line with `done: true`, its
`done_reason` and the counts `prompt_eval_count` / `eval_count`; `{"error": ...}` is
a failure mid-stream. A body that ends without `done` is retried.

The native API rather than Ollama's OpenAI-compatible one because only it takes
`options.num_ctx`: without it a model runs with the server's default context (a few
thousand tokens) whatever it supports, and Ollama cuts the prompt silently to fit.
`num_ctx` is the configured context window (`assistant.model.context_window`).
Ollama has no tool choice: a forced tool is asked for in the system prompt
(`forced_tool.soften`, as protocol.md 9.2 does for reasoning models); `none` sends no
tools.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx

from jpd.llm import forced_tool
from jpd.llm.base import (
    AssistantMessage,
    Finish,
    ModelRequest,
    ToolCallEvent,
    ToolResultMessage,
    UsageEvent,
    UserMessage,
    pictures,
)
from jpd.llm.errors import ProviderError
from jpd.llm.http_provider import Call, HttpProvider
from jpd.llm.request_build import encode_body
from jpd.llm.retry import RetryableError, RetryPolicy
from jpd.llm.stream_reader import Batch
from jpd.llm.transport import event_json, one_line
from jpd.protocol.usage import TokenUsage

DEFAULT_BASE_URL = "http://127.0.0.1:11434"
Obj = dict[str, Any]


class OllamaProvider(HttpProvider):
    """`ollama/<model>`: a local (or remote) Ollama server; no API key."""

    name = "ollama"
    default_base_url = DEFAULT_BASE_URL

    def __init__(
        self,
        *,
        base_url: str | None = None,
        max_retries: int = 3,
        timeout: float = 600.0,
        env: Mapping[str, str] | None = None,
        client: httpx.AsyncClient | None = None,
        retry_policy: RetryPolicy | None = None,
        context_window: int | None = None,
    ) -> None:
        super().__init__(
            base_url=base_url,
            api_key_env=None,
            max_retries=max_retries,
            timeout=timeout,
            env=env,
            client=client,
            retry_policy=retry_policy,
        )
        self.context_window = context_window

    def prepare(self, request: ModelRequest) -> ModelRequest:
        """Ollama has no tool choice: a forced tool is asked for in the system prompt."""
        return forced_tool.soften(request) if forced_tool.forces_tool(request) else request

    def call(self, request: ModelRequest, base_url: str, secrets: tuple[str, ...]) -> Call:
        return Call(
            url=f"{base_url}/api/chat",
            body=encode_body(build_body(request, self.context_window)),
            parser=_StreamState,
            framing="ndjson",
        )

    async def model_names(self) -> list[str]:
        """The models the server has (`GET /api/tags`), for `jp models`."""
        base = self.require_base_url()
        async with httpx.AsyncClient(timeout=5.0) as client:
            try:
                response = await client.get(f"{base}/api/tags")
                response.raise_for_status()
                data = response.json()
            except (httpx.HTTPError, ValueError) as exc:
                raise ProviderError(
                    f"ollama: cannot list the models at {base}: {one_line(str(exc), (), 120)}"
                ) from exc
        models = data.get("models") if isinstance(data, dict) else None
        names = [m.get("name") for m in models or [] if isinstance(m, dict)]
        return sorted(name for name in names if isinstance(name, str))


def build_body(request: ModelRequest, context_window: int | None = None) -> Obj:
    """The JSON body for `POST <base>/api/chat` (fixed key order, as the other builders)."""
    body: Obj = {"model": request.model, "messages": _messages(request), "stream": True}
    if request.tools and request.tool_choice.type != "none":
        body["tools"] = [
            {
                "type": "function",
                "function": {
                    "name": tool.name,
                    "description": tool.description,
                    "parameters": tool.parameters,
                },
            }
            for tool in request.tools
        ]
    if request.response_schema is not None:
        body["format"] = request.response_schema  # decoded under it (a grammar)
    if request.reasoning_effort != "off":
        body["think"] = True
    options: Obj = {}
    if context_window is not None:
        options["num_ctx"] = context_window
    if request.max_tokens is not None:
        options["num_predict"] = request.max_tokens
    if request.temperature is not None:
        options["temperature"] = request.temperature
    if options:
        body["options"] = options
    return body


def _messages(request: ModelRequest) -> list[Obj]:
    out: list[Obj] = []
    if request.system:
        out.append({"role": "system", "content": request.system})
    names: dict[str, str] = {}
    for message in request.messages:
        if isinstance(message, UserMessage):
            item: Obj = {"role": "user", "content": message.content}
            shown = pictures(message.images)  # Ollama takes no documents
            if shown:
                item["images"] = [image.data for image in shown]
            out.append(item)
        elif isinstance(message, AssistantMessage):
            out.append(_assistant(message, names))
        else:
            out.append(_result(message, names.get(message.tool_call_id, "")))
    return out


def _assistant(message: AssistantMessage, names: dict[str, str]) -> Obj:
    item: Obj = {"role": "assistant", "content": message.content}
    if message.reasoning:
        item["thinking"] = message.reasoning
    if message.tool_calls:
        calls = []
        for call in message.tool_calls:
            names[call.id] = call.name
            calls.append({"function": {"name": call.name, "arguments": call.arguments}})
        item["tool_calls"] = calls
    return item


def _result(message: ToolResultMessage, name: str) -> Obj:
    item: Obj = {"role": "tool", "content": message.content, "tool_name": name}
    if message.images:
        item["images"] = [image.data for image in message.images]
    return item


@dataclass
class _StreamState:
    """Assembles one response from its NDJSON chunks."""

    calls: list[ToolCallEvent] = field(default_factory=list)
    done: bool = False

    def feed(self, data: str, out: Batch) -> bool:
        """One line into `out`; returns whether it was the last (`done`)."""
        chunk = event_json("ollama", data, ())
        if type(chunk) is not dict:
            return False
        if chunk.get("error"):
            raise ProviderError(f"ollama: error mid-stream: {one_line(str(chunk['error']))}")
        message = chunk.get("message")
        if isinstance(message, dict):
            thinking = message.get("thinking")
            if isinstance(thinking, str) and thinking:
                out.reasoning(thinking)
            content = message.get("content")
            if isinstance(content, str) and content:
                out.text(content)
            for call in message.get("tool_calls") or ():
                self._call(call)
        if chunk.get("done") is not True:
            return False
        self.done = True
        for event in self.calls:
            out.add(event)
        out.add(UsageEvent(usage=_usage(chunk)))
        reason = chunk.get("done_reason")
        if self.calls:
            out.add(Finish(reason="tool_use"))
        else:
            out.add(Finish(reason="max_tokens" if reason == "length" else "end_turn"))
        return True

    def _call(self, call: Any) -> None:
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict):
            return
        name = str(function.get("name") or "")
        arguments = function.get("arguments")
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict):
            raise ProviderError(f"ollama: the model sent non-object arguments for tool `{name}`")
        call_id = call.get("id") or f"call_{uuid.uuid4().hex[:24]}"
        self.calls.append(ToolCallEvent(id=str(call_id), name=name, arguments=arguments))

    def end(self, out: Batch) -> None:
        """The body ended: before `done`, a transient failure."""
        if self.done:
            return
        raise RetryableError(
            "ollama: the response stream ended before done", reason="stream ended early"
        )


def _usage(chunk: Obj) -> TokenUsage:
    prompt = chunk.get("prompt_eval_count")
    output = chunk.get("eval_count")
    return TokenUsage(
        input_tokens=prompt if type(prompt) is int else None,
        output_tokens=output if type(output) is int else None,
    )
