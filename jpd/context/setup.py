"""A turn's context keeper from its config: the window, the answer reserve, the
switches of `conversation.context` and the model that writes summaries."""

from __future__ import annotations

from collections.abc import Callable

from jpd.config import Config
from jpd.context.count import TokenCount
from jpd.context.keeper import ContextKeeper, ContextSettings
from jpd.context.summarizer import Summarizer
from jpd.context.window import SUMMARY_RESERVE_MAX, answer_reserve, context_window
from jpd.conversation import events as ev
from jpd.llm.base import Provider
from jpd.llm.errors import ProviderError
from jpd.llm.history import MessageHistory
from jpd.llm.registry import ProviderSource

Record = Callable[[ev.ContextCompacted], None]


def context_settings(cfg: Config) -> ContextSettings:
    """The context settings of the turn's model."""
    window = context_window(cfg)
    max_tokens = cfg.assistant.model.parameters.max_tokens
    context = cfg.conversation.context
    return ContextSettings(
        window=window,
        reserve=answer_reserve(max_tokens, window) if window is not None else 0,
        enabled=context.compact,
        compact_at=context.compact_at,
        model=cfg.assistant.model.id,
        max_tokens=max_tokens,
    )


_PER_CONFIG: dict[int, tuple[Config, ContextSettings, str]] = {}
"""By `id` of a config (held, so that its id is not reused): what every turn under it
computes alike. A config is immutable, and the same object while its files are
unchanged (jpd/config/cache.py)."""


def _of_config(cfg: Config) -> tuple[ContextSettings, str]:
    """The context settings of `cfg` and the model its summaries are asked of."""
    found = _PER_CONFIG.get(id(cfg))
    if found is not None and found[0] is cfg:
        return found[1], found[2]
    settings = context_settings(cfg)
    model_id = cfg.conversation.context.model or cfg.inquiry_assistant().model.id
    if len(_PER_CONFIG) >= 64:  # turns with a config of their own: start over
        _PER_CONFIG.clear()
    _PER_CONFIG[id(cfg)] = (cfg, settings, model_id)
    return settings, model_id


def summarizer(cfg: Config, provider: Provider, providers: ProviderSource) -> Summarizer:
    """Who writes summaries: `conversation.context.model`, else the inquiry assistant's
    model when it differs from the turn's, else the turn's own (which reads the prompt
    cache the turn has warmed)."""
    settings, model_id = _of_config(cfg)
    if model_id != cfg.assistant.model.id:
        try:
            provider = providers.get(cfg.with_model(model_id, source="conversation.context.model"))
        except ProviderError:  # no key for it here: the turn's own model writes them
            model_id = cfg.assistant.model.id
    window = settings.window or 200_000
    return Summarizer(
        provider=provider,
        model=model_id.split("/", 1)[1],
        model_id=model_id,
        max_tokens=200 if settings.small else min(SUMMARY_RESERVE_MAX, window // 8),
        small=settings.small,
    )


def keeper_factory(
    cfg: Config, provider: Provider, providers: ProviderSource
) -> Callable[[MessageHistory, Record], ContextKeeper]:
    """What `TurnSpec.context` holds: the keeper is bound to the turn's history and log."""
    settings = _of_config(cfg)[0]
    writer = summarizer(cfg, provider, providers)
    count = TokenCount(cfg.assistant.model.id, provider)

    def build(history: MessageHistory, record: Record) -> ContextKeeper:
        return ContextKeeper(settings, count, writer, history, record)

    return build
