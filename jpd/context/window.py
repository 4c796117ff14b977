"""Context windows: `assistant.model.context_window`, built-in values for known
models, `providers.local.n_ctx` for the embedded one; and the room kept for answers."""

from __future__ import annotations

from jpd.config import Config

# Longest prefix wins; ids as in `assistant.model.id`.
_KNOWN: tuple[tuple[str, int], ...] = (
    ("anthropic/claude-", 200_000),
    ("google/gemini-", 1_048_576),
    ("openai/gpt-4.1", 1_047_576),
    ("openai/gpt-4o", 128_000),
    ("openai/gpt-4-turbo", 128_000),
    ("openai/gpt-5", 400_000),
    ("openai/o1", 200_000),
    ("openai/o3", 200_000),
    ("openai/o4", 200_000),
)

SUMMARY_RESERVE_MAX = 20_000
"""The most kept for an answer or a summary on large windows (Claude Code measured its
summaries' p99.99 at about 17k tokens)."""


def context_window(cfg: Config) -> int | None:
    """The window of the turn's model in tokens, or None when unknown (then nothing is
    compacted before a provider says the request is too long)."""
    model = cfg.assistant.model
    if model.context_window is not None:
        return model.context_window
    if model.provider == "local":
        return cfg.providers.local.n_ctx
    best: tuple[str, int] | None = None
    for prefix, window in _KNOWN:
        if model.id.startswith(prefix) and (best is None or len(prefix) > len(best[0])):
            best = (prefix, window)
    return best[1] if best else None


def answer_reserve(max_tokens: int | None, window: int) -> int:
    """Tokens kept free for the model's answer: `max_tokens` when set, else an eighth of
    the window, between 256 and 20,000 (the small-context profile keeps its answers short)."""
    if max_tokens is not None:
        return min(max_tokens, window // 2)
    return min(SUMMARY_RESERVE_MAX, max(256, window // 8))
