"""Params and result of `config/show`: the effective config, key by key, with
where each value came from (protocol.md 5.22; camelCase on the wire)."""

from typing import Any

from pydantic import Field

from jpd.protocol.base import WireModel, WireParams
from jpd.protocol.environment import ClientEnvironment


class ConfigShowParams(WireParams):
    environment: ClientEnvironment | None = Field(default=None, repr=False)
    """The client's environment: its `JP_CONFIG` and working directory pick the files."""
    config: dict[str, Any] | None = None
    """Overrides laid over the files, as `turn/start` `config` (shown with origin `-c`)."""
    config_files: list[str] = Field(default_factory=list)
    """Named config files laid under `config`, as `turn/start` `configFiles`."""


class ConfigEntry(WireModel):
    key: str
    """Dotted key of one leaf (segments with dots or other characters quoted)."""
    value: Any = None
    """Its effective value (JSON); `"<redacted>"` when `redacted`."""
    origin: str
    """`default`, the user or workspace config file's path, or `-c`."""
    redacted: bool = False
    """The value may be a credential and is never sent."""


class ConfigShowResult(WireModel):
    entries: list[ConfigEntry]
    warnings: list[str] = Field(default_factory=list)
    """`source: key: what happened` for each key of JP's config jpd read its own way
    or ignored (protocol.md 13, "JP's config files")."""
