"""The registry creates each provider from its config section, only when configured."""

from __future__ import annotations

import json
from typing import Any

import pytest

from jpd.config import Config
from jpd.llm.errors import ProviderUnavailable
from jpd.llm.registry import KNOWN, ProviderRegistry, key_variable
from tests.fixtures.fake_llm_server import FakeLLMServer
from tests.fixtures.llm_support import ask, collect
from tests.fixtures.llm_wire import o_text_answer, stream_reply


def config(model: str, **providers: Any) -> Config:
    return Config.model_validate({"assistant": {"model": {"id": model}}, "providers": providers})


def test_the_new_providers_are_known() -> None:
    assert {"google", "ollama"} <= set(KNOWN)


def test_google_needs_its_key_and_says_which() -> None:
    registry = ProviderRegistry({})
    cfg = config("google/gemini-x")
    assert key_variable(cfg, "google") == "GEMINI_API_KEY"
    assert "GEMINI_API_KEY" in (registry.unavailable("google", cfg, {}) or "")
    with pytest.raises(ProviderUnavailable, match="GEMINI_API_KEY"):
        registry.get(cfg)
    custom = config("google/gemini-x", google={"api_key_env": "MY_GEMINI"})
    assert "MY_GEMINI" in custom.providers.api_key_variables()
    provider = registry.get(custom, {"MY_GEMINI": "k"})
    assert (provider.name, type(provider).__name__) == ("google", "GoogleProvider")


def test_openai_speaks_responses_unless_chat_is_asked() -> None:
    registry = ProviderRegistry({"OPENAI_API_KEY": "k"})
    assert type(registry.get(config("openai/gpt-x"))).__name__ == "OpenAIResponsesProvider"
    chat = registry.get(config("openai/gpt-x", openai={"api": "chat"}))
    assert type(chat).__name__ == "OpenAIProvider"
    compatible = registry.get(
        config("openai-compatible/m", openai_compatible={"base_url": "http://x/v1"})
    )
    assert type(compatible).__name__ == "OpenAIProvider"


def test_ollama_needs_no_key_and_sizes_by_the_window() -> None:
    registry = ProviderRegistry({})
    small = Config.model_validate(
        {"assistant": {"model": {"id": "ollama/qwen3", "context_window": 4096}}}
    )
    large = Config.model_validate(
        {"assistant": {"model": {"id": "ollama/qwen3", "context_window": 32768}}}
    )
    assert registry.unavailable("ollama", small, {}) is None
    assert key_variable(small, "ollama") is None
    first, second = registry.get(small), registry.get(large)
    assert first is not second
    assert (getattr(first, "context_window", None), getattr(second, "context_window", None)) == (
        4096,
        32768,
    )
    assert first.base_url == "http://127.0.0.1:11434"  # type: ignore[attr-defined]


async def test_openrouter_attribution_headers_are_settings() -> None:
    with FakeLLMServer() as server:
        server.push(stream_reply(*o_text_answer("ok")))
        cfg = config(
            "openai-compatible/m",
            openai_compatible={
                "base_url": f"{server.base_url}/api/v1",
                "app_url": "https://example.org/jp",
                "app_title": "jp",
            },
        )
        registry = ProviderRegistry({})
        provider = registry.get(cfg)
        await collect(provider.stream(ask(model="m")))
        await registry.aclose()
    (request,) = server.requests
    assert request.path == "/api/v1/chat/completions"
    assert request.headers["http-referer"] == "https://example.org/jp"
    assert request.headers["x-title"] == "jp"
    assert json.loads(request.body)["model"] == "m"


def test_one_provider_per_settings_and_key_whatever_the_config_object() -> None:
    registry = ProviderRegistry({"ANTHROPIC_API_KEY": "k"})
    cfg = config("anthropic/claude-x")
    provider = registry.get(cfg)
    assert registry.get(cfg) is provider
    assert registry.get(config("anthropic/claude-y")) is provider  # another model, same client
    other = registry.get(config("anthropic/claude-x", anthropic={"base_url": "http://other"}))
    assert other is not provider and other.base_url == "http://other"  # type: ignore[attr-defined]
    assert registry.get(cfg, {"ANTHROPIC_API_KEY": "another key"}) is not provider
