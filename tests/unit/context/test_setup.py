"""Who writes summaries (`conversation.context.model`) and the keeper's settings."""

from __future__ import annotations

from typing import Any

from jpd.config import Config
from jpd.context.setup import context_settings, summarizer
from jpd.llm.errors import ProviderUnavailable
from tests.unit.context.fakes import WindowModel, config


class Providers:
    def __init__(self, other: Any) -> None:
        self.other = other
        self.asked: list[str] = []

    def get(self, cfg: Config) -> Any:
        self.asked.append(cfg.assistant.model.id)
        if self.other is None:
            raise ProviderUnavailable("no key for it")
        return self.other


def test_a_cheaper_model_writes_summaries() -> None:
    turn_model, cheap = WindowModel(window=1), WindowModel(window=2)
    providers = Providers(cheap)
    writer = summarizer(config(model="test/cheap"), turn_model, providers)
    assert writer.provider is cheap and writer.model == "cheap"
    assert writer.model_id == "test/cheap" and providers.asked == ["test/cheap"]


def test_an_unusable_summary_model_falls_back_to_the_turns() -> None:
    turn_model = WindowModel(window=1)
    writer = summarizer(config(model="test/cheap"), turn_model, Providers(None))
    assert writer.provider is turn_model and writer.model_id == "test/window"


def test_the_turns_model_writes_them_by_default() -> None:
    turn_model = WindowModel(window=1)
    providers = Providers(None)
    writer = summarizer(config(), turn_model, providers)
    assert writer.provider is turn_model and providers.asked == []


def test_settings_follow_the_config() -> None:
    small = context_settings(config(window=2048))
    assert small.small and small.reserve == 256 and small.threshold == int(1792 * 0.8)
    off = context_settings(config(compact=False, compact_at=0.95))
    assert not off.enabled and off.compact_at == 0.95
    assert context_settings(config(window=None)).threshold is None


def test_what_a_config_decides_is_worked_out_once_per_config_object() -> None:
    from jpd.context import setup

    turn_model, cheap = WindowModel(window=1), WindowModel(window=2)
    cfg = config(model="test/cheap", window=2048)
    first = setup.keeper_factory(cfg, turn_model, Providers(cheap))
    assert setup._PER_CONFIG[id(cfg)][0] is cfg  # held: its id is not reused meanwhile
    settings = setup._PER_CONFIG[id(cfg)][1]
    setup.keeper_factory(cfg, turn_model, Providers(cheap))
    assert setup._PER_CONFIG[id(cfg)][1] is settings
    # Another config object (the files changed) is worked out afresh.
    other = config(window=4096)
    writer = summarizer(other, turn_model, Providers(cheap))
    assert writer.model_id == "test/window" and setup._of_config(other)[0].window == 4096
    assert first is not None


def test_a_counting_provider_is_told_apart_by_its_class() -> None:
    from jpd.context.count import TokenCount

    class Counting(WindowModel):
        context_window = 8

        async def count_tokens(self, request: Any) -> int:
            return 1

        def token_bound(self, request: Any) -> int:
            return 1

    assert TokenCount("test/window", Counting(window=1)).exact
    assert not TokenCount("test/window", WindowModel(window=1)).exact
    assert TokenCount("test/window", Counting(window=2)).exact  # known now, still right
