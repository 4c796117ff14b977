"""Choose and cache the provider for a model id `<provider>/<model>`.

Providers are created once per distinct configuration and kept for the daemon's
lifetime: the embedded model loads once, and the scripted test provider keeps its
position in the script across turns.

A hosted provider whose API key variable is unset is refused here, so
`turn/start` fails with -32004 naming the variable before any conversation is
created. Each request may bring the client's environment (protocol.md 5.5): the
variables a provider reads (its key, its base URL) are part of the cache key, and a
provider keeps only those variables, never the rest of a client's environment.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Protocol

from jpd.llm.errors import ProviderUnavailable

if TYPE_CHECKING:
    from jpd.config import Config
    from jpd.llm.base import Provider

KNOWN = ("test", "local", "anthropic", "openai", "openai-compatible", "google", "ollama")
_KEYED = ("anthropic", "openai", "openai-compatible", "google")
"""The providers that read an API key (openai-compatible only when configured)."""


class ProviderSource(Protocol):
    """Where a turn gets providers for other models (the inquiry backend)."""

    def get(self, config: Config) -> Provider:
        """The provider for `config.assistant.model`."""
        ...


class ProviderRegistry:
    """Creates providers on first use and caches them by their settings."""

    def __init__(self, env: Mapping[str, str]) -> None:
        self._env = dict(env)
        self._cache: dict[str, Provider] = {}
        self._keys: dict[int, tuple[Config, str]] = {}

    def get(self, config: Config, env: Mapping[str, str] | None = None) -> Provider:
        """The provider for `config.assistant.model`, created if needed; `env` is the
        request's environment (None: the daemon's).

        Raises `ProviderUnavailable` with a one-line, actionable message.
        """
        model = config.assistant.model
        name = model.provider
        source = self._env if env is None else env
        variables = {v: source[v] for v in _variables(config, name) if v in source}
        # A digest, so that API keys are not kept in a readable cache key.
        digest = hashlib.sha256(json.dumps(variables, sort_keys=True).encode()).hexdigest()
        key = f"{self._settings_key(config)}|{digest}"
        provider = self._cache.get(key)
        if provider is None:
            provider = self._create(name, model.name, config, variables)
            self._cache[key] = provider
        return provider

    def _settings_key(self, config: Config) -> str:
        """What of `config` chooses its model's provider object: computed once per
        config object (the same one while its files are unchanged, jpd/config/cache.py;
        held, so that its id is not reused)."""
        found = self._keys.get(id(config))
        if found is not None and found[0] is config:
            return found[1]
        model = config.assistant.model
        name = model.provider
        # The embedded model loads per model; Ollama sizes its context by the window.
        per_model = {"local": model.name, "ollama": str(model.context_window)}.get(name, "")
        key = f"{name}|{per_model}|{_section(config, name)}"
        if len(self._keys) >= 64:  # turns with configs of their own: start over
            self._keys.clear()
        self._keys[id(config)] = (config, key)
        return key

    def unavailable(
        self, name: str, config: Config, env: Mapping[str, str] | None = None
    ) -> str | None:
        """Why provider `name` cannot be used with `config` and `env` (None: it can),
        without creating it (no model is loaded, no request is sent)."""
        source = self._env if env is None else env
        try:
            if name == "test" and config.providers.test.script is None:
                raise ProviderUnavailable("needs a script: set providers.test.script")
            if name == "local":
                import importlib.util

                from jpd.llm.model_files import INSTALL_HINT, resolve_model_path

                if importlib.util.find_spec("llama_cpp") is None:
                    raise ProviderUnavailable(f"llama-cpp-python is not installed: {INSTALL_HINT}")
                model = config.assistant.model
                resolve_model_path(
                    model.name if model.provider == "local" else "smollm2",
                    config.providers.local.model_path,
                )
            if name == "openai-compatible" and config.providers.openai_compatible.base_url is None:
                raise ProviderUnavailable("set providers.openai_compatible.base_url")
            if name in _KEYED:
                variables = _variables(config, name)
                if variables:
                    _require_key(source, variables[0], name)
        except ProviderUnavailable as exc:
            return exc.message
        except Exception as exc:  # e.g. a missing model file
            return str(exc)
        return None

    async def server_models(self, name: str, config: Config) -> tuple[list[str] | None, str | None]:
        """The models provider `name`'s server has (Ollama), and why they could not be
        listed (None: they were)."""
        if name != "ollama":
            return None, None
        from jpd.llm.ollama import OllamaProvider

        provider = OllamaProvider(base_url=config.providers.ollama.base_url)
        try:
            return await provider.model_names(), None
        except ProviderUnavailable as exc:
            return None, exc.message
        except Exception as exc:
            return None, str(getattr(exc, "message", exc))
        finally:
            await provider.aclose()

    def bound(self, env: Mapping[str, str] | None) -> ProviderSource:
        """This registry for one request's environment."""
        return _Bound(self, env)

    def _create(
        self, name: str, model_name: str, config: Config, env: Mapping[str, str]
    ) -> Provider:
        if name == "test":
            from jpd.llm.scripted import ScriptedProvider, load_script

            settings = config.providers.test
            if settings.script is None:
                raise ProviderUnavailable(
                    "the test provider needs a script: set providers.test.script"
                )
            return ScriptedProvider(load_script(settings.script), record=settings.record)
        if name == "local":
            return self._local(model_name, config)
        if name == "anthropic":
            from jpd.llm.anthropic import AnthropicProvider

            anthropic = config.providers.anthropic
            _require_key(env, anthropic.api_key_env, name)
            return AnthropicProvider(**anthropic.model_dump(), env=env)
        if name == "openai":
            openai = config.providers.openai
            _require_key(env, openai.api_key_env, name)
            if openai.api == "responses":
                from jpd.llm.openai_responses import OpenAIResponsesProvider

                return OpenAIResponsesProvider(**openai.model_dump(exclude={"api"}), env=env)
            from jpd.llm.openai import OpenAIProvider

            return OpenAIProvider(**openai.model_dump(exclude={"api"}), env=env)
        if name == "google":
            from jpd.llm.google import GoogleProvider

            google = config.providers.google
            _require_key(env, google.api_key_env, name)
            return GoogleProvider(**google.model_dump(), env=env)
        if name == "ollama":
            from jpd.llm.ollama import OllamaProvider

            ollama = config.providers.ollama
            return OllamaProvider(
                **ollama.model_dump(), env=env, context_window=config.assistant.model.context_window
            )
        if name == "openai-compatible":
            from jpd.llm.openai import OpenAIProvider

            section = config.providers.openai_compatible
            if section.base_url is None:
                raise ProviderUnavailable(
                    "openai-compatible models need a server: set "
                    "providers.openai_compatible.base_url (e.g. http://localhost:11434/v1)"
                )
            if section.api_key_env is not None:
                _require_key(env, section.api_key_env, name)
            return OpenAIProvider.compatible(
                **section.model_dump(exclude={"app_url", "app_title"}),
                headers=section.headers(),
                env=env,
            )
        raise ProviderUnavailable(
            f"unknown or unsupported provider {name!r} in assistant.model.id; "
            f"known providers: {', '.join(KNOWN)}"
        )

    @staticmethod
    def _local(model_name: str, config: Config) -> Provider:
        import importlib.util

        from jpd.llm.model_files import INSTALL_HINT, resolve_model_path

        local = config.providers.local
        # Fail at turn/start, not mid-turn, when the extra or the model file is missing.
        if importlib.util.find_spec("llama_cpp") is None:
            raise ProviderUnavailable(
                f"the embedded model needs llama-cpp-python, which is not installed: {INSTALL_HINT}"
            )
        resolve_model_path(model_name, local.model_path)
        from jpd.llm.local_worker import LocalWorkerProvider

        return LocalWorkerProvider(
            model_path=local.model_path,
            n_ctx=local.n_ctx,
            n_threads=local.n_threads,
            seed=local.seed,
            idle_timeout=local.idle_timeout,
        )

    async def aclose(self) -> None:
        """Close every cached provider."""
        providers, self._cache = list(self._cache.values()), {}
        for provider in providers:
            await provider.aclose()


class _Bound:
    def __init__(self, registry: ProviderRegistry, env: Mapping[str, str] | None) -> None:
        self._registry = registry
        self._env = env

    def get(self, config: Config) -> Provider:
        return self._registry.get(config, self._env)


def _require_key(env: Mapping[str, str], variable: str, provider: str) -> None:
    """`ProviderUnavailable` naming `variable` when it is unset or blank."""
    # Imported here: transport pulls in httpx, which only hosted models need.
    from jpd.llm.transport import read_api_key

    read_api_key(env, variable, provider)


def key_variable(config: Config, name: str) -> str | None:
    """The variable provider `name` reads its API key from (None: it needs none)."""
    if name in _KEYED:
        variables = _variables(config, name)
        return variables[0] if variables else None
    return None


def _variables(config: Config, name: str) -> tuple[str, ...]:
    """The environment variables the provider `name` reads."""
    if name == "anthropic":
        return (config.providers.anthropic.api_key_env, "ANTHROPIC_BASE_URL")
    if name == "openai":
        return (config.providers.openai.api_key_env, "OPENAI_BASE_URL")
    if name == "google":
        return (config.providers.google.api_key_env,)
    if name == "openai-compatible":
        variable = config.providers.openai_compatible.api_key_env
        return (variable,) if variable is not None else ()
    return ()


def _section(config: Config, name: str) -> str:
    section = getattr(config.providers, name.replace("-", "_"), None)
    if section is None:
        return ""
    return json.dumps(section.model_dump(mode="json"), sort_keys=True)
