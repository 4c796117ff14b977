"""`jp -c KEY=VALUE` options turned into the nested `config` dict of `turn/start`."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any


def _reject_constant(name: str) -> Any:
    # NaN/Infinity are not JSON; such a value is kept as the literal string instead.
    raise ValueError(name)


def parse_value(raw: str) -> Any:
    """The value as JSON when it parses (`true`, `3`, `"x"`, `[1]`, `{...}`), else the string."""
    try:
        return json.loads(raw, parse_constant=_reject_constant)
    except ValueError:
        return raw


def split_key(key: str) -> list[str]:
    """Split a dotted key; a segment in single or double quotes may contain dots (`tools.'*'`).

    Raises `ValueError` for an empty key, an empty segment or an unclosed quote.
    """
    segments: list[str] = []
    current: list[str] = []
    quote: str | None = None
    quoted = False  # the current segment was quoted, so it may be empty-looking but valid
    for char in key:
        if quote is not None:
            if char == quote:
                quote = None
            else:
                current.append(char)
        elif char in "'\"" and not current:
            quote, quoted = char, True
        elif char == ".":
            segments.append(_segment(current, quoted, key))
            current, quoted = [], False
        else:
            current.append(char)
    if quote is not None:
        raise ValueError(f"unclosed quote in key {key!r}")
    segments.append(_segment(current, quoted, key))
    return segments


def _segment(chars: list[str], quoted: bool, key: str) -> str:
    segment = "".join(chars)
    if not quoted:
        segment = segment.strip()
    if not segment:
        raise ValueError(f"empty segment in key {key!r}")
    return segment


def parse_config_overrides(items: Iterable[str]) -> dict[str, Any]:
    """Merge `KEY=VALUE` items into one nested dict; later items win.

    `a.b=1` sets `{"a": {"b": 1}}`; a later `a=2` replaces the whole `a`, and a later
    `a.c=3` extends an existing table (or replaces a non-table value with a table).
    Raises `ValueError` (naming the item) for an item without `=` or with a bad key.
    """
    result: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep:
            raise ValueError(f"expected KEY=VALUE, got {item!r}")
        path = split_key(key)
        table = result
        for segment in path[:-1]:
            child = table.get(segment)
            if not isinstance(child, dict):
                child = table[segment] = {}
            table = child
        table[path[-1]] = parse_value(raw)
    return result
