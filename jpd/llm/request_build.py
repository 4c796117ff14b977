"""Serialising request bodies so equal inputs give byte-identical bytes.

Builders (`anthropic_request.py`, `openai_request.py`) construct every JSON
object in a fixed key order and keep tools and messages in the order given;
this module serialises without sorting (sorting would reorder user-supplied
tool schemas) and with fixed separators. Prompt caches match on exact prefixes,
so any nondeterminism here silently costs cache hits.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Sequence
from typing import Any


class Encoded(str):
    """A body value already serialised (as `encode_body` would): put in as it is."""


_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), sort_keys=False)
"""One encoder: `json.dumps` with these options builds a new one per call, which cost
more than encoding a request's small members."""


def _dumps(value: Any) -> str:
    return _ENCODER.encode(value)


def encode_body(body: dict[str, Any]) -> bytes:
    """Serialise a body: insertion order, compact separators, UTF-8. A top-level value
    that is `Encoded` goes in as it is: the same bytes as serialising what it holds."""
    if not any(type(value) is Encoded for value in body.values()):
        return _dumps(body).encode()
    members = (
        f"{_dumps(key)}:{value if type(value) is Encoded else _dumps(value)}"
        for key, value in body.items()
    )
    return ("{" + ",".join(members) + "}").encode()


_ONCE: dict[tuple[str, tuple[int, ...]], tuple[Sequence[object], Encoded]] = {}
_ONCE_LOCK = threading.Lock()


def encoded_once(kind: str, sources: Sequence[object], value: Callable[[], Any]) -> Encoded:
    """`value()` serialised, once per `kind` (what `value` makes of the sources, e.g. one
    wire format's tools) for the same `sources` objects (compared by identity,
    and held so that no other object takes their ids): the tool schemas of every turn
    under one config are the same objects (jpd/tools/catalog.py), and serialising them
    cost more than the rest of the request. `value` must depend on `sources` alone,
    which must not change."""
    key = (kind, tuple(map(id, sources)))
    found = _ONCE.get(key)
    if (
        found is not None
        and len(found[0]) == len(sources)
        and all(a is b for a, b in zip(found[0], sources, strict=True))
    ):
        return found[1]
    encoded = Encoded(_dumps(value()))
    with _ONCE_LOCK:
        if len(_ONCE) >= 64:  # many configs: start over
            _ONCE.clear()
        _ONCE[key] = (tuple(sources), encoded)
    return encoded


def encode_arguments(arguments: dict[str, Any]) -> str:
    """Tool-call arguments as the JSON string some APIs expect, in the same stable form."""
    return _ENCODER.encode(arguments)
