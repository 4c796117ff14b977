"""Reading a context-window refusal: is it one, and what window did the provider state?

The providers word it differently: Anthropic `prompt is too long: 5608 tokens > 5607
maximum`, OpenAI `This model's maximum context length is 8192 tokens. However, your
messages resulted in 9000 tokens`, Gemini `The input token count (9000) exceeds the
maximum number of tokens allowed (8192)`, llama.cpp's server `the request exceeds the
available context size` (some versions add `n_ctx`), Ollama `the input length exceeds
the context length`. The turn compacts against the stated window (protocol.md 12.5).
"""

from __future__ import annotations

import re

from jpd.llm.errors import ContextOverflow, ProviderError

_N = r"(\d[\d,_]*)"
_LIMITS = (
    re.compile(rf"tokens?\s*>\s*{_N}", re.I),
    re.compile(rf"maximum context length is\s*{_N}", re.I),
    re.compile(rf"maximum number of tokens allowed\s*\(?{_N}", re.I),
    re.compile(rf"\bn_ctx\W{{0,3}}{_N}", re.I),
    re.compile(rf"context (?:size|length|window)(?: is| of|:|=)?\s*\(?{_N}", re.I),
    re.compile(rf"\blimit(?: is| of|:)?\s*{_N}\s*tokens", re.I),
)
_REQUESTED = (
    re.compile(rf"too long:\s*{_N}\s*tokens", re.I),
    re.compile(rf"resulted in\s*{_N}\s*tokens", re.I),
    re.compile(rf"requested\s*{_N}\s*tokens", re.I),
    re.compile(rf"input token count\s*\(?{_N}", re.I),
    re.compile(rf"\bn_prompt_tokens\W{{0,3}}{_N}", re.I),
    re.compile(rf"prompt(?: tokens)?\s*\(?{_N}\)?\s*(?:tokens\s*)?exceeds?", re.I),
)
_WORDINGS = (
    "exceeds the maximum number of tokens",
    "input length exceeds the context length",
    "exceeds the context length",
)


def _first(patterns: tuple[re.Pattern[str], ...], text: str) -> int | None:
    for pattern in patterns:
        match = pattern.search(text)
        if match is not None:
            value = int(match.group(1).replace(",", "").replace("_", ""))
            if value > 0:
                return value
    return None


def stated_window(text: str) -> int | None:
    """The window (tokens) a refusal states, if it states one."""
    return _first(_LIMITS, text)


def refused_size(text: str) -> int | None:
    """The size (tokens) of the refused request, if the refusal says it."""
    return _first(_REQUESTED, text)


def as_overflow(error: ProviderError) -> ContextOverflow | None:
    """`error` as a `ContextOverflow` when its wording is a window refusal the HTTP
    mapping does not know (Gemini's, Ollama's); else None."""
    text = error.message.lower()
    if any(words in text for words in _WORDINGS):
        return ContextOverflow(error.message)
    return None
