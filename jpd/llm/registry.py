"""Choose and cache the provider for a model id `<provider>/<model>`.

Providers are created once per distinct configuration and kept for the daemon's
lifetime: the embedded model loads once, and the scripted test provider keeps its
position in the script across turns.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING

from jpd.llm.base import Provider
from jpd.llm.errors import ProviderUnavailable

if TYPE_CHECKING:
    from jpd.config import Config

KNOWN = ("test", "local", "anthropic", "openai", "openai-compatible")


class ProviderRegistry:
    """Creates providers on first use and caches them by their settings."""

    def __init__(self, env: Mapping[str, str]) -> None:
        self._env = dict(env)
        self._cache: dict[str, Provider] = {}

    def get(self, config: Config) -> Provider:
        """The provider for `config.assistant.model`, created if needed.

        Raises `ProviderUnavailable` with a one-line, actionable message.
        """
        model = config.assistant.model
        name = model.provider
        section = _section(config, name)
        key = f"{name}|{model.name if name == 'local' else ''}|{section}"
        provider = self._cache.get(key)
        if provider is None:
            provider = self._create(name, model.name, config)
            self._cache[key] = provider
        return provider

    def _create(self, name: str, model_name: str, config: Config) -> Provider:
        if name == "test":
            from jpd.llm.scripted import ScriptedProvider, load_script

            settings = config.providers.test
            if settings.script is None:
                raise ProviderUnavailable(
                    "the test provider needs a script: set providers.test.script"
                )
            return ScriptedProvider(load_script(settings.script), record=settings.record)
        if name == "local":
            from jpd.llm.local import create_local_provider

            local = config.providers.local
            return create_local_provider(
                model_name,
                model_path=local.model_path,
                n_ctx=local.n_ctx,
                n_threads=local.n_threads,
                seed=local.seed,
            )
        raise ProviderUnavailable(
            f"unknown or unsupported provider {name!r} in assistant.model.id; "
            f"known providers: {', '.join(KNOWN)}"
        )

    async def aclose(self) -> None:
        """Close every cached provider."""
        providers, self._cache = list(self._cache.values()), {}
        for provider in providers:
            await provider.aclose()


def _section(config: Config, name: str) -> str:
    section = getattr(config.providers, name.replace("-", "_"), None)
    if section is None:
        return ""
    return json.dumps(section.model_dump(mode="json"), sort_keys=True)
