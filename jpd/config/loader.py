"""Loading the layered configuration and parsing `-c key=value` assignments.

Layers, lowest first: built-in defaults, the user file (`$JP_CONFIG` or
`<user_config_dir>/config.toml`), the workspace file (`<workspace>/.jp/config.toml`,
only once the user trusts it: jpd/config/trust.py; read once, and the bytes whose trust
was checked are the bytes parsed),
then overrides (`turn/start` config, `-c`). Each layer is validated on its own, so
an error names the layer it came from, then the layers are merged and the result
validated as a whole.
"""

from __future__ import annotations

import datetime
import logging
import os
import re
import tomllib
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import platformdirs
from pydantic import ValidationError

from jpd.config.config import Config
from jpd.config.errors import ConfigError, from_validation_error
from jpd.config.jp_compat import translate
from jpd.config.merge import merge_models

log = logging.getLogger(__name__)

CONFIG_ENV = "JP_CONFIG"
ASSIGNMENT_SOURCE = "-c"
_MERGED_SOURCE = "merged configuration"


def user_config_path(env: Mapping[str, str] | None = None) -> Path:
    """`$JP_CONFIG` if set (and not empty), else `<user_config_dir("jp")>/config.toml`."""
    env = os.environ if env is None else env
    explicit = env.get(CONFIG_ENV)
    if explicit:
        return Path(explicit).expanduser()
    return Path(platformdirs.user_config_dir("jp")) / "config.toml"


def workspace_config_path(workspace: Path) -> Path:
    """The workspace layer: `<workspace>/.jp/config.toml`."""
    return workspace / ".jp" / "config.toml"


def read_config_bytes(path: Path) -> bytes | None:
    """The bytes of one config file; None when it does not exist."""
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        message = f"cannot read: {exc.strerror or exc}"
        problem = {"key": "", "message": message, "source": str(path)}
        raise ConfigError(message, source=str(path), errors=[problem]) from None


def parse_toml_layer(path: Path, raw: bytes) -> dict[str, Any]:
    """Parse the bytes `raw` of the TOML file `path` (named in errors)."""
    try:
        return tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ConfigError(f"invalid TOML: not UTF-8 ({exc.reason})", source=str(path)) from None
    except tomllib.TOMLDecodeError as exc:
        # tomllib's message ends with "(at line N, column M)".
        raise ConfigError(f"invalid TOML: {exc}", source=str(path)) from None


def read_toml_layer(path: Path) -> dict[str, Any] | None:
    """Parse one TOML file; None when it does not exist."""
    raw = read_config_bytes(path)
    return None if raw is None else parse_toml_layer(path, raw)


def validate_layer(data: Any, *, source: str, base_dir: Path | None = None) -> Config:
    """Validate one layer on its own; relative paths resolve against `base_dir`. JP's
    spellings are read as jpd's first, each JP-only key logged (jpd/config/jp_compat.py)."""
    data, warnings = translate(data)
    for warning in warnings:
        log.warning("%s: %s", source, warning)
    try:
        return Config.model_validate(data, context={"base_dir": base_dir})
    except ValidationError as exc:
        raise from_validation_error(exc, source=source, data=data) from None


def config_paths(workspace: Path | None, env: Mapping[str, str] | None) -> list[Path]:
    """The files of the layered config, lowest first: the user file, then the
    workspace's when there is a workspace (either may not exist)."""
    paths = [user_config_path(env)]
    if workspace is not None:
        paths.append(workspace_config_path(workspace))
    return paths


Trust = Callable[[Path, bytes], bool]
"""Whether the workspace config file `path`, whose bytes are these, may be used."""

ReadLayer = Callable[[Path, Trust | None], Config | None]
"""Reads one config file's layer; with a `Trust`, the file is the workspace's: its
bytes are read once, checked, and only then parsed (None when not trusted)."""


def workspace_trust(env: Mapping[str, str] | None) -> Trust:
    """The user's trust (jpd/config/trust.py), read with the request's environment."""
    resolved = os.environ if env is None else env

    def trusted(path: Path, raw: bytes) -> bool:
        from jpd.config import trust

        return trust.is_trusted(path, raw, resolved)

    return trusted


def read_trusted_bytes(path: Path, trusted: Trust) -> bytes | None:
    """The workspace config's bytes when it exists, is the workspace's own file and is
    trusted as read; else None (an untrusted file is skipped as if absent)."""
    from jpd.config.trust import Refused, read_workspace_config

    try:
        raw = read_workspace_config(path)
    except OSError as exc:
        message = f"cannot read: {exc.strerror or exc}"
        problem = {"key": "", "message": message, "source": str(path)}
        raise ConfigError(message, source=str(path), errors=[problem]) from None
    if isinstance(raw, Refused):
        log.warning("ignoring workspace config: %s", raw.reason)
        return None
    return raw if raw is not None and trusted(path, raw) else None


def read_file_layer(path: Path, trusted: Trust | None = None) -> Config | None:
    """One config file, parsed and validated on its own; None when it does not exist
    (or, given `trusted`, is a workspace file not trusted as read: `read_trusted_bytes`).

    A problem raises `ConfigError` naming the file and, where it can be found, the
    line of each bad key.
    """
    raw = read_config_bytes(path) if trusted is None else read_trusted_bytes(path, trusted)
    return file_layer(path, raw)


def file_layer(path: Path, raw: bytes | None) -> Config | None:
    """The layer of the config file `path` whose bytes are `raw` (None: it does not
    exist), validated on its own; errors as `read_file_layer`."""
    if raw is None:
        return None
    try:
        return validate_layer(parse_toml_layer(path, raw), source=str(path), base_dir=path.parent)
    except ConfigError as exc:
        raise _with_lines(exc, path, raw) from None


def layer_reads(
    workspace: Path | None, env: Mapping[str, str] | None
) -> list[tuple[Path, Trust | None]]:
    """Each file of `config_paths` with the trust it is read under (the workspace's)."""
    paths = config_paths(workspace, env)
    trusts: list[Trust | None] = [None] * len(paths)
    if workspace is not None:
        trusts[-1] = workspace_trust(env)
    return list(zip(paths, trusts, strict=True))


def load_config(
    *,
    workspace: Path | None = None,
    env: Mapping[str, str] | None = None,
    overrides: Sequence[tuple[str, Mapping[str, Any]]] = (),
    read_layer: ReadLayer = read_file_layer,
) -> Config:
    """Load and merge every layer; raise `ConfigError` listing the problems of every
    bad layer at once (each with its source, key and, for files, line).

    `overrides` are `(source_name, nested_dict)` pairs applied in order (e.g.
    `("turn/start config", {...})`, `("-c", parse_assignment(...))`); relative
    paths in them resolve against `workspace` when given. Each file of
    `config_paths` is read with `read_layer`, in order (`read_file_layer`, or a
    `ConfigCache`'s), the workspace's under the user's trust. This reads files: call it
    from a worker thread in async code.
    """
    layers: list[Config] = []
    problems: list[ConfigError] = []
    for path, trusted in layer_reads(workspace, env):
        try:
            layer = read_layer(path, trusted)
            if layer is not None:
                layers.append(layer)
        except ConfigError as exc:
            problems.append(exc)
    for source, override in overrides:
        try:
            layers.append(validate_layer(override, source=source, base_dir=workspace))
        except ConfigError as exc:
            problems.append(exc)
    if problems:
        raise _combined(problems)

    merged = Config()
    for layer in layers:
        merged = merge_models(merged, layer)
    whole = merged.model_dump(exclude_unset=True)
    try:
        return Config.model_validate(whole)
    except ValidationError as exc:
        raise from_validation_error(exc, source=_MERGED_SOURCE, data=whole) from None


def _with_lines(error: ConfigError, path: Path, raw: bytes) -> ConfigError:
    """`error` with `source` and, where the key can be found in the bytes parsed,
    `line` on every problem."""
    try:
        lines = raw.decode("utf-8").splitlines()
    except UnicodeDecodeError:
        lines = []
    for problem in error.errors:
        problem["source"] = str(path)
        line = _key_line(lines, problem.get("key", "")) if lines else None
        if line is not None:
            problem["line"] = str(line)
    return error


_HEADER = re.compile(r"^\s*\[+\s*([^\]]*?)\s*\]+")


def _key_line(lines: list[str], key: str) -> int | None:
    """The 1-based line that sets `key` (a best effort: the last segment assigned under
    a table header that, with the assignment's dotted prefix, makes up the key)."""
    parts = key.split(".")
    if not key:
        return None
    table: list[str] = []
    fallback: int | None = None
    for number, text in enumerate(lines, 1):
        header = _HEADER.match(text)
        if header:
            table = [p.strip().strip("\"'") for p in header.group(1).split(".")]
            if table == parts:
                fallback = fallback or number
            continue
        if "=" not in text:
            continue
        left = text.split("=", 1)[0].strip()
        dotted = [p.strip().strip("\"'") for p in left.split(".")]
        full = table + dotted
        if full == parts:
            return number
        if fallback is None and full == parts[: len(full)]:
            fallback = number  # a table or inline table that holds the key
    return fallback


def _combined(problems: list[ConfigError]) -> ConfigError:
    """One `ConfigError` carrying every problem of every layer."""
    if len(problems) == 1:  # one layer: its error lists all its problems already
        return problems[0]
    errors = [e | {"source": e.get("source", p.source)} for p in problems for e in p.errors]
    shown = "; ".join(
        f"{e['source']}{':' + e['line'] if e.get('line') else ''}: "
        f"{e['key'] + ': ' if e.get('key') else ''}{e['message']}"
        for e in errors
    )
    return ConfigError(f"{len(errors)} problems: {shown}", key="", source="config", errors=errors)


# --- -c key=value -------------------------------------------------------------------

_KEY_SEGMENT = re.compile(r""""([^"]*)"|'([^']*)'|([^.="'\s]+)""")
_SPACE = re.compile(r"\s*")


def parse_assignment(text: str) -> dict[str, Any]:
    """Parse `a.b.c=value` into `{"a": {"b": {"c": value}}}`.

    Key segments are bare (anything but `.`, `=`, quotes and spaces, so `*` works)
    or quoted. The value is a TOML value when it parses as one (numbers, booleans,
    arrays, inline tables, quoted strings), else the bare text.
    """
    keys, value_text = _split_assignment(text)
    value: Any = _parse_value(value_text.strip())
    for key in reversed(keys):
        value = {key: value}
    result: dict[str, Any] = value
    return result


def _split_assignment(text: str) -> tuple[list[str], str]:
    keys: list[str] = []
    pos = _skip_space(text, 0)
    while True:
        match = _KEY_SEGMENT.match(text, pos)
        if match is None:
            raise _assignment_error(text, "expected a key")
        segment = next(group for group in match.groups() if group is not None)
        if not segment:
            raise _assignment_error(text, "empty key segment")
        keys.append(segment)
        pos = _skip_space(text, match.end())
        if text.startswith(".", pos):
            pos = _skip_space(text, pos + 1)
        elif text.startswith("=", pos):
            return keys, text[pos + 1 :]
        else:
            raise _assignment_error(text, "expected '.' or '=' after a key")


def _skip_space(text: str, pos: int) -> int:
    match = _SPACE.match(text, pos)
    return match.end() if match is not None else pos


def _assignment_error(text: str, reason: str) -> ConfigError:
    return ConfigError(f"{reason} in {text!r} (expected key=value)", source=ASSIGNMENT_SOURCE)


def _parse_value(text: str) -> Any:
    # A newline could smuggle a second TOML key in; such text is taken literally.
    if "\n" in text or "\r" in text:
        return text
    try:
        value = tomllib.loads(f"value = {text}")["value"]
    except tomllib.TOMLDecodeError:
        return text
    # No config key is a date; "2024-01-01" is more likely meant as text.
    return text if _has_datetime(value) else value


def _has_datetime(value: Any) -> bool:
    if isinstance(value, datetime.date | datetime.time):
        return True
    if isinstance(value, list):
        return any(_has_datetime(item) for item in value)
    if isinstance(value, dict):
        return any(_has_datetime(item) for item in value.values())
    return False
