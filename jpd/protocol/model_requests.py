"""Params and result of `model/list`: the default model, aliases and providers
(protocol.md 5.20; camelCase on the wire)."""

from pydantic import Field

from jpd.protocol.base import WireModel, WireParams
from jpd.protocol.environment import ClientEnvironment


class ModelListParams(WireParams):
    environment: ClientEnvironment | None = Field(default=None, repr=False)
    """The client's environment: its config file and keys decide what is listed."""


class ProviderStatus(WireModel):
    name: str
    available: bool
    key_variable: str | None = None
    """The environment variable its API key is read from (hosted providers)."""
    problem: str | None = None
    """Why it cannot be used now (absent when `available`)."""
    models: list[str] | None = None
    """The models its server has, for a provider that lists them (Ollama's `/api/tags`)."""


class ModelListResult(WireModel):
    default_model: str
    """`assistant.model.id`: what a turn uses without `model`."""
    aliases: dict[str, str]
    """`[aliases]`: names accepted as `turn/start` `model`."""
    providers: list[ProviderStatus]
