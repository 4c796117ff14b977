"""The config each request runs with: the layers of protocol.md section 13 for the
request's workspace and environment, loaded through one cache for the daemon's life,
so that a file is read and validated again only when it changed."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from jpd.core.request_env import RequestEnv
from jpd.protocol.errors import ConfigInvalid

# Start-up imports no config (protocol.md section 4, "Start-up"): it loads with the
# first request that needs it.
if TYPE_CHECKING:
    from jpd.config import Config
    from jpd.config.cache import ConfigCache


class RequestConfigs:
    """Loads the layered config of each request; a request that sends no `env` gets
    the daemon's own (`daemon_env`)."""

    def __init__(self, daemon_env: Mapping[str, str]) -> None:
        self._daemon_env = daemon_env
        self._cache: ConfigCache | None = None
        self._warnings: dict[tuple[object, ...], list[str]] = {}

    def _files(self) -> ConfigCache:
        if self._cache is None:
            from jpd.config.cache import ConfigCache

            self._cache = ConfigCache()
        return self._cache

    def load(
        self,
        workspace: Path | None,
        overrides: list[tuple[str, Mapping[str, Any]]] | None = None,
        env: Mapping[str, str] | None = None,
    ) -> Config:
        """Layered config for one request (`env`: the request's, None: the daemon's);
        errors become `ConfigInvalid` (-32003). Reads the files that changed: call it
        from a worker thread in async code."""
        from jpd.config import ConfigError

        try:
            return self._files().load(
                workspace=workspace,
                env=self._daemon_env if env is None else env,
                overrides=overrides or [],
            )
        except ConfigError as exc:
            raise ConfigInvalid(str(exc), data=getattr(exc, "errors", None)) from exc

    async def for_request(
        self, renv: RequestEnv, overrides: list[tuple[str, Mapping[str, Any]]] | None = None
    ) -> Config:
        """The request's config. When no file changed since it was last loaded, it is
        taken on the event loop for the price of a `stat` per file: no worker thread,
        whose hop costs more than that. Otherwise it is loaded in a worker thread."""
        if not overrides:
            cached = self._files().cached(renv.workspace, renv.env)
            if cached is not None:
                return cached
        return await anyio.to_thread.run_sync(self.load, renv.workspace, overrides, renv.env)

    async def named(self, renv: RequestEnv, references: list[str]) -> dict[str, Any]:
        """The named config files `references` (`--cfg`, jpd/config/named.py) and what
        they extend, merged in order, each checked on its own first; `ConfigInvalid`
        names the file of a problem."""
        from jpd.config import ConfigError, validate_layer
        from jpd.config.merge import deep_merge
        from jpd.config.named import named_layers

        base = await self.for_request(renv)
        env = self._daemon_env if renv.env is None else renv.env

        def load() -> dict[str, Any]:
            merged: dict[str, Any] = {}
            for source, table in named_layers(
                references,
                workspace=renv.workspace,
                env=env,
                extra_folders=base.config_load_paths,
            ):
                validate_layer(table, source=source, base_dir=Path(source).parent)
                merged = deep_merge(merged, table)
            return merged

        try:
            return await anyio.to_thread.run_sync(load)
        except ConfigError as exc:
            raise ConfigInvalid(str(exc), data=getattr(exc, "errors", None)) from exc

    async def for_turn(
        self,
        renv: RequestEnv,
        config: Mapping[str, Any] | None,
        model: str | None,
        kept: Mapping[str, Any] | None = None,
    ) -> Config:
        """The layered config of one turn, with the conversation's `kept` config, then
        its `config` and `model` layers; `model` may be one of the config's `aliases`."""
        from jpd.config import ConfigError

        overrides: list[tuple[str, Mapping[str, Any]]] = []
        if kept:
            overrides.append(("conversation config", kept))
        if config:
            overrides.append(("turn/start config", config))
        cfg = await self.for_request(renv, overrides)
        if model is None:
            return cfg
        try:
            return cfg.with_model(cfg.resolve_model(model), source="turn/start model")
        except ConfigError as exc:
            raise ConfigInvalid(str(exc), data=getattr(exc, "errors", None)) from exc

    async def file_warnings(self, renv: RequestEnv) -> list[str]:
        """The warnings of JP keys read or ignored in the config files (`turn/start`
        `configWarnings`). Computed in a worker thread only when a file changed since
        last time (a `stat` per file on the loop otherwise, as `for_request`)."""
        from jpd.config.loader import layer_reads
        from jpd.config.origins import config_warnings

        env = self._daemon_env if renv.env is None else renv.env
        key: list[object] = [renv.workspace]
        for path, _trust in layer_reads(renv.workspace, env):
            try:
                info = os.stat(path)
            except OSError:
                key.append((path, None))
                continue
            key.append((path, info.st_mtime_ns, info.st_size, info.st_ino))
        found = self._warnings.get(tuple(key))
        if found is None:
            found = await anyio.to_thread.run_sync(
                lambda: config_warnings(workspace=renv.workspace, env=env)
            )
            if len(self._warnings) > 64:  # many workspaces: start over
                self._warnings.clear()
            self._warnings[tuple(key)] = found
        return found

    async def show(
        self, renv: RequestEnv, config: Mapping[str, Any] | None = None
    ) -> tuple[list[tuple[str, Any, str, bool]], list[str]]:
        """Every effective config leaf with its origin (secrets redacted), and the
        warnings of JP keys read or ignored; a bad layer raises `ConfigInvalid` (-32003)
        as for a turn. Read afresh: `config/show` is rare, and shows what is in the
        files now."""
        from jpd.config import ConfigError
        from jpd.config.origins import config_origins, config_warnings

        overrides = [("-c", config)] if config else []

        def compute() -> tuple[list[tuple[str, Any, str, bool]], list[str]]:
            try:
                rows = config_origins(workspace=renv.workspace, env=renv.env, overrides=overrides)
                warnings = config_warnings(
                    workspace=renv.workspace, env=renv.env, overrides=overrides
                )
                return rows, warnings
            except ConfigError as exc:
                raise ConfigInvalid(str(exc), data=getattr(exc, "errors", None)) from exc

        return await anyio.to_thread.run_sync(compute)


KEPT_SECTIONS = ("assistant",)
"""The parts of a turn's `config` a conversation keeps for its later turns. Tool
permissions (`conversation.tools`) are not among them: a `-c` that lets a tool run
unasked is meant for the turn it was given with."""


def kept_config(
    previous: Mapping[str, Any] | None, given: Mapping[str, Any] | None
) -> dict[str, Any]:
    """The config a conversation keeps after a turn given `given`: `previous` with the
    kept sections of `given` laid over it."""
    from jpd.config.merge import deep_merge

    kept = dict(previous or {})
    for section in KEPT_SECTIONS:
        value = (given or {}).get(section)
        if isinstance(value, Mapping):
            kept = deep_merge(kept, {section: dict(value)})
    return kept
