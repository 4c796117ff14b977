"""The effective config, one leaf per line, with the layer each value came from
(`jp config show`, protocol.md "config/show")."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from jpd.config.errors import ConfigError
from jpd.config.jp_compat import translate
from jpd.config.loader import (
    layer_reads,
    load_config,
    parse_toml_layer,
    read_config_bytes,
    read_file_layer,
    read_trusted_bytes,
    validate_layer,
)

DEFAULT_ORIGIN = "default"
REDACTED = "<redacted>"

# Values that may carry credentials: MCP `env`/`headers` tables and anything named like a
# key or token (`api_key_env` names a variable, not a key, so it is shown).
_SECRET_TABLES = frozenset({"env", "headers"})
_SECRET_NAME = re.compile(r"(api_?key|token|secret|password|authorization)$", re.IGNORECASE)
_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")


def _segment(name: str) -> str:
    return name if _BARE_KEY.match(name) else "'" + name.replace("'", "\\'") + "'"


def flatten(value: Any, prefix: tuple[str, ...] = ()) -> dict[tuple[str, ...], Any]:
    """Leaves of a JSON-ready tree by key path; an empty table is a leaf (`{}`)."""
    if isinstance(value, dict) and value:
        leaves: dict[tuple[str, ...], Any] = {}
        for key, child in value.items():
            leaves.update(flatten(child, (*prefix, str(key))))
        return leaves
    return {prefix: value}


def is_secret(path: Sequence[str]) -> bool:
    """Whether a leaf's value must not be shown."""
    if any(part in _SECRET_TABLES for part in path[:-1]):
        return True
    return bool(path) and bool(_SECRET_NAME.search(path[-1]))


def config_origins(
    *,
    workspace: Path | None,
    env: Mapping[str, str],
    overrides: Sequence[tuple[str, Mapping[str, Any]]] = (),
) -> list[tuple[str, Any, str, bool]]:
    """`(dotted key, value, origin, redacted)` for every leaf of the effective config.

    The origin is the last layer that set the key (or a table above it): the user or
    workspace file's path, an override's source name, else `default`. Raises
    `ConfigError` like `load_config`. Reads files: call it from a worker thread.
    """
    effective = load_config(workspace=workspace, env=env, overrides=overrides)
    layers: list[tuple[str, dict[str, Any]]] = []
    for path, trusted in layer_reads(workspace, env):
        file_layer = read_file_layer(path, trusted)
        if file_layer is not None:
            layers.append((str(path), file_layer.model_dump(mode="json", exclude_unset=True)))
    for source, override in overrides:
        layer = validate_layer(override, source=source, base_dir=workspace)
        layers.append((source, layer.model_dump(mode="json", exclude_unset=True)))
    set_by = [(source, set(flatten(data))) for source, data in layers]
    rows: list[tuple[str, Any, str, bool]] = []
    for leaf, value in flatten(effective.model_dump(mode="json")).items():
        origin = DEFAULT_ORIGIN
        for source, keys in set_by:
            if any(leaf[:n] in keys for n in range(1, len(leaf) + 1)):
                origin = source
        secret = is_secret(leaf)
        key = ".".join(_segment(part) for part in leaf)
        rows.append((key, REDACTED if secret else value, origin, secret))
    return rows


def config_warnings(
    *,
    workspace: Path | None,
    env: Mapping[str, str],
    overrides: Sequence[tuple[str, Mapping[str, Any]]] = (),
) -> list[str]:
    """`source: key: what happened` for each JP key read or ignored in the layers
    (jpd/config/jp_compat.py). Reads files: call it from a worker thread."""
    layers: list[tuple[str, Any]] = []
    for path, trusted in layer_reads(workspace, env):
        raw = read_config_bytes(path) if trusted is None else read_trusted_bytes(path, trusted)
        if raw is not None:
            with contextlib.suppress(ConfigError):  # reported by the load itself
                layers.append((str(path), parse_toml_layer(path, raw)))
    layers.extend((source, dict(override)) for source, override in overrides)
    return [f"{source}: {warning}" for source, data in layers for warning in translate(data)[1]]
