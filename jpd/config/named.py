"""Named config files and personas (JP's `--cfg NAME|PATH`, `config_load_paths`,
`extends`; protocol.md 13, "Named config files and personas").

`--cfg dev` loads `dev.toml` from the first folder of the load path that has it: the
user config folder's `config/`, then the folders of `config_load_paths`, then the
workspace's `.jp/config/` only while the workspace's `.jp/config.toml` exists and is
trusted (a repository must not answer for a name the user meant as their own, so the
user's folders come first). A value with a `/` or ending in `.toml` is a path
(relative to the working folder): the user named that file. A persona is such a file:
a system prompt, a model, tools.

A file may begin with `extends = ["base", "../shared.toml"]`: those load first, each
name or path resolved from the extending file's folder and then the load path; a loop
or a chain deeper than `MAX_DEPTH` is an error.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import platformdirs

from jpd.config.errors import ConfigError
from jpd.config.loader import (
    CONFIG_ENV,
    read_config_bytes,
    read_toml_layer,
    workspace_config_path,
)

MAX_DEPTH = 8
NAMED_DIR = "config"


def user_named_dir(env: Mapping[str, str]) -> Path:
    """`config/` beside the user config file (`$JP_CONFIG`'s folder when set)."""
    explicit = env.get(CONFIG_ENV)
    base = (
        Path(explicit).expanduser().parent if explicit else Path(platformdirs.user_config_dir("jp"))
    )
    return base / NAMED_DIR


def load_path(
    workspace: Path | None, env: Mapping[str, str], extra: Sequence[Path] = ()
) -> list[Path]:
    """The folders a name is looked up in, first match wins."""
    folders = [user_named_dir(env), *extra]
    if workspace is not None and _trusted(workspace_config_path(workspace), env):
        folders.append(workspace / ".jp" / NAMED_DIR)
    return folders


def _trusted(path: Path, env: Mapping[str, str]) -> bool:
    """Whether the workspace's config exists and is trusted: its named files are then
    the user's choice too (a repository without a trusted config offers none)."""
    from jpd.config.trust import is_trusted

    raw = read_config_bytes(path)
    return raw is not None and is_trusted(path, raw, env)


def is_path(reference: str) -> bool:
    return "/" in reference or reference.endswith(".toml") or reference.startswith("~")


def resolve(reference: str, folders: Sequence[Path], base: Path | None) -> Path:
    """The file `reference` (a name or a path) names; `ConfigError` when none exists."""
    if not reference.strip():
        raise ConfigError("an empty config file name", source="--cfg")
    if is_path(reference):
        path = Path(reference).expanduser()
        if not path.is_absolute() and base is not None:
            path = base / path
        if path.is_file():
            return path
        raise ConfigError(f"no config file {path}", source="--cfg")
    if "\\" in reference or reference in (".", ".."):
        raise ConfigError(f"invalid config name {reference!r}", source="--cfg")
    for folder in folders:
        candidate = folder / f"{reference}.toml"
        if candidate.is_file():
            return candidate
    where = ", ".join(str(f) for f in folders)
    raise ConfigError(f"no config named {reference!r} (looked in {where})", source="--cfg")


def named_layers(
    references: Sequence[str],
    *,
    workspace: Path | None,
    env: Mapping[str, str],
    extra_folders: Sequence[Path] = (),
) -> list[tuple[str, dict[str, Any]]]:
    """`(path, table)` of each named file and of what it extends, lowest first.
    Reads files: call it from a worker thread."""
    folders = load_path(workspace, env, extra_folders)
    layers: list[tuple[str, dict[str, Any]]] = []
    for reference in references:
        _load(resolve(reference, folders, workspace), folders, layers, chain=())
    return layers


def _load(
    path: Path,
    folders: Sequence[Path],
    layers: list[tuple[str, dict[str, Any]]],
    chain: tuple[Path, ...],
) -> None:
    real = path.resolve()
    if real in chain:
        shown = " -> ".join(str(p) for p in (*chain, real))
        raise ConfigError(f"extends loops: {shown}", source=str(path))
    if len(chain) >= MAX_DEPTH:
        raise ConfigError(f"extends is nested deeper than {MAX_DEPTH}", source=str(path))
    table = read_toml_layer(path)
    if table is None:
        raise ConfigError("the file went away", source=str(path))
    extends = table.pop("extends", [])
    if isinstance(extends, str):
        extends = [extends]
    if not isinstance(extends, list) or not all(isinstance(e, str) for e in extends):
        raise ConfigError("extends: a list of config names or paths", source=str(path))
    for parent in extends:
        _load(resolve(parent, folders, path.parent), folders, layers, (*chain, real))
    layers.append((str(path), table))
