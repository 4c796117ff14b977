"""The size of a request before it is sent: exact where the provider can count
(the embedded model), else the last reported usage plus an estimate of what was added,
calibrated per model from the usage providers report."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TypeGuard

from jpd.llm import base as llm
from jpd.protocol.usage import TokenUsage

CHARS_PER_TOKEN = 4.0
SAFETY = 1.1
"""Estimates err on the large side: compacting a little early beats an overflow."""
IMAGE_TOKENS = 1_000

_ratios: dict[str, float] = {}
"""Observed tokens per estimated token, per model id (learned by every counter)."""


def raw_estimate(messages: Sequence[llm.Message]) -> int:
    """Uncalibrated tokens of `messages` (characters / 4, plus a little per message)."""
    chars = 0
    for message in messages:
        chars += 16 + len(message.content)
        if isinstance(message, llm.AssistantMessage):
            chars += len(message.reasoning or "")
            for call in message.tool_calls:
                chars += len(call.name) + len(json.dumps(call.arguments))
        else:
            chars += IMAGE_TOKENS * 4 * len(message.images)
    return int(chars / CHARS_PER_TOKEN) + 1


def _fixed_estimate(request: llm.ModelRequest) -> int:
    chars = len(request.system or "")
    for tool in request.tools:
        chars += len(tool.name) + len(tool.description) + _schema_chars(tool)
    return int(chars / CHARS_PER_TOKEN)


_schemas: dict[str, tuple[dict[str, object], int]] = {}
"""Tool name -> (its last schema, that schema's JSON length). Every turn offers its tools
anew (new dicts, equal to the last turn's): comparing them is a fraction of encoding
them, twice per model call and a thousand calls at once."""


def _schema_chars(tool: llm.ToolDefinition) -> int:
    parameters = tool.parameters
    known = _schemas.get(tool.name)
    if known is not None and known[0] == parameters:
        return known[1]
    chars = len(json.dumps(parameters))
    if len(_schemas) >= 1024:
        _schemas.clear()
    _schemas[tool.name] = (parameters, chars)
    return chars


def reported_input(usage: TokenUsage) -> int | None:
    """The prompt size a response reports (cached parts included), if it does."""
    if usage.input_tokens is None:
        return None
    return usage.input_tokens + (usage.cache_read_tokens or 0) + (usage.cache_creation_tokens or 0)


_COUNTERS: dict[type, bool] = {}


def _counts(provider: llm.Provider) -> TypeGuard[llm.TokenCounter]:
    """Whether `provider` counts tokens exactly: a protocol check (slow: it looks up
    every member) made once per provider class, not once per turn."""
    kind = type(provider)
    known = _COUNTERS.get(kind)
    if known is None:
        known = _COUNTERS[kind] = isinstance(provider, llm.TokenCounter)
    return known


class TokenCount:
    """Counts the requests of one model; `observe` teaches it each reported usage."""

    def __init__(self, model_id: str, provider: llm.Provider) -> None:
        self.model_id = model_id
        self._counter = provider if _counts(provider) else None
        self._last: tuple[llm.ModelRequest, int] | None = None

    @property
    def exact(self) -> bool:
        return self._counter is not None

    def estimate(self, request: llm.ModelRequest) -> int:
        """The calibrated estimate of the whole request."""
        ratio = _ratios.get(self.model_id, 1.0)
        raw = raw_estimate(request.messages) + _fixed_estimate(request)
        return int(raw * ratio * SAFETY)

    async def count(self, request: llm.ModelRequest, below: int | None = None) -> int:
        """The request's prompt tokens: exact, or the last reported size plus the
        estimate of the messages added since (when the request extends the last one;
        after a compaction it does not, so no stale count survives one).

        With `below`, a request whose cheap upper bound is under it is not counted
        exactly: the bound is returned, sparing the tokenizer a trip before the first
        token (the embedded model's is in its worker process)."""
        if self._counter is not None:
            if below is not None and (bound := self._counter.token_bound(request)) <= below:
                return bound
            return await self._counter.count_tokens(request)
        if self._last is not None:
            last, size = self._last
            n = len(last.messages)
            if (
                last.system == request.system
                and last.tools == request.tools
                and len(request.messages) >= n
                and (n == 0 or request.messages[n - 1] == last.messages[-1])
            ):
                added = raw_estimate(request.messages[n:]) if len(request.messages) > n else 0
                return size + int(added * _ratios.get(self.model_id, 1.0) * SAFETY)
        return self.estimate(request)

    def observe(self, request: llm.ModelRequest, usage: TokenUsage) -> None:
        """Learn from a response's usage: the request's true size, and the ratio of
        true to estimated tokens for this model."""
        size = reported_input(usage)
        if size is None or size <= 0:
            return
        self._last = (request, size)
        raw = raw_estimate(request.messages) + _fixed_estimate(request)
        if raw > 0:
            ratio = min(3.0, max(0.3, size / raw))
            old = _ratios.get(self.model_id)
            _ratios[self.model_id] = ratio if old is None else (old + ratio) / 2
