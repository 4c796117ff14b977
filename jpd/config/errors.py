"""`ConfigError` and the translation of pydantic validation errors into it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import ValidationError

# pydantic prefixes messages of errors raised inside validators; the prefix is noise here.
_VALUE_ERROR_PREFIXES = ("Value error, ", "Assertion failed, ")


class ConfigError(Exception):
    """A configuration layer is invalid.

    `str(error)` is one line: `<source>: <key>: <message>` (or `<source>: <message>`
    when the problem is not tied to a key, e.g. TOML syntax). `errors` lists every
    problem found in the layer as `{"key", "message"}` dicts, for JSON-RPC `data`.
    """

    def __init__(
        self,
        message: str,
        *,
        key: str = "",
        source: str,
        errors: Sequence[Mapping[str, str]] | None = None,
    ) -> None:
        self.key = key
        self.source = source
        self.message = message
        self.errors: list[dict[str, str]] = (
            [dict(e) for e in errors] if errors is not None else [{"key": key, "message": message}]
        )
        line = f"{source}: {key}: {message}" if key else f"{source}: {message}"
        super().__init__(line)


def dotted_key(loc: Sequence[int | str], data: Any, error_type: str) -> str:
    """Turn a pydantic error location into the dotted key the user wrote.

    Locations contain union tags (`table`, `scalar`, ...) that are not keys. Walking
    the input alongside the location tells them apart: a real key exists in the
    input mapping at that point; a tag does not (except the final element of a
    `missing` error, which names the absent key).
    """
    parts: list[str] = []
    current = data
    last = len(loc) - 1
    for index, element in enumerate(loc):
        if isinstance(current, Mapping):
            if element in current:
                parts.append(str(element))
                current = current[element]
            elif index == last and error_type == "missing":
                parts.append(str(element))
        elif isinstance(current, list) and isinstance(element, int) and element < len(current):
            parts.append(str(element))
            current = current[element]
    return ".".join(parts)


def _message(error: Mapping[str, Any]) -> str:
    if error["type"] == "extra_forbidden":
        return "unknown key"
    if error["type"] == "missing":
        return "missing required key"
    if error["type"] == "model_type":
        return "expected a table"
    if error["type"] == "path_type":
        return "expected a path string"
    message = str(error["msg"])
    for prefix in _VALUE_ERROR_PREFIXES:
        if message.startswith(prefix):
            return message[len(prefix) :]
    return message


def from_validation_error(
    exc: ValidationError, *, source: str, data: Any, prefix: str = ""
) -> ConfigError:
    """Build a `ConfigError` naming `source` and the first failing key of `data`.

    `prefix` is prepended to every key (for values validated below the root, such
    as the model id given to `Config.with_model`).
    """
    errors: list[dict[str, str]] = []
    for error in exc.errors():
        key = dotted_key(error["loc"], data, error["type"])
        full = ".".join(part for part in (prefix, key) if part)
        errors.append({"key": full, "message": _message(error)})
    first = errors[0]
    return ConfigError(first["message"], key=first["key"], source=source, errors=errors)
