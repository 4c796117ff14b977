"""Fitting an inquiry side request into the context of another model (protocol.md 10.4).

An inquiry normally reuses the turn's model and request prefix, which fit by
construction. When `conversation.inquiry.assistant` (or a question's `target`)
picks another model, the prefix cache no longer applies and that model's context
may be smaller, so the oldest exchanges are dropped until the request fits.

A limit is only known for the embedded model (`providers.local.n_ctx`); hosted
providers publish no context size in config, so their side requests are sent
whole and an overflow comes back as a provider error (`backend_error`).
Tokens are estimated from characters, deliberately on the generous side, since the
backend has no tokenizer for an arbitrary model.
"""

from __future__ import annotations

from collections.abc import Sequence

from jpd.config import Config
from jpd.llm import base as llm

CHARS_PER_TOKEN = 3
"""Pessimistic: English prose averages ~4 characters a token, JSON and code fewer."""
DEFAULT_RESERVE = 512
"""Tokens kept free for the answer when the request sets no `max_tokens`."""


def context_limit(config: Config) -> int | None:
    """The context size (tokens) of `config.assistant.model`, when config knows it."""
    if config.assistant.model.provider == "local":
        return config.providers.local.n_ctx
    return None


def estimate_tokens(text: str) -> int:
    """A generous token estimate for `text`."""
    return -(-len(text) // CHARS_PER_TOKEN)


def fit_history(
    history: Sequence[llm.Message],
    tail: Sequence[llm.Message],
    request: llm.ModelRequest,
    limit: int,
) -> list[llm.Message]:
    """`history` without its oldest exchanges, so that `request` fits `limit` tokens.

    `request` gives the system prompt, tools and `max_tokens`; `history + tail` will be
    its messages (`tail`: the paused results and the question). An exchange starts at
    a user message, so tool calls keep their results. The last exchange (the running
    turn, with the asking tool call) is always kept: if even that does not fit, the
    history goes out whole and the provider reports the overflow.
    """
    fixed = estimate_tokens(request.system or "") + sum(
        estimate_tokens(tool.model_dump_json()) for tool in request.tools
    )
    fixed += sum(_size(m) for m in tail)
    budget = limit - fixed - (request.max_tokens or DEFAULT_RESERVE)
    sizes = [_size(m) for m in history]
    if sum(sizes) <= budget:
        return list(history)
    starts = [i for i, m in enumerate(history) if isinstance(m, llm.UserMessage)]
    for start in starts:
        if sum(sizes[start:]) <= budget or start == starts[-1]:
            return list(history[start:])
    return list(history)


def _size(message: llm.Message) -> int:
    return estimate_tokens(message.model_dump_json())
