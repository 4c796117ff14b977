"""Serialising request bodies so equal inputs give byte-identical bytes.

Builders (`anthropic_request.py`, `openai_request.py`) construct every JSON
object in a fixed key order and keep tools and messages in the order given;
this module serialises without sorting (sorting would reorder user-supplied
tool schemas) and with fixed separators. Prompt caches match on exact prefixes,
so any nondeterminism here silently costs cache hits.
"""

from __future__ import annotations

import json
from typing import Any


def encode_body(body: dict[str, Any]) -> bytes:
    """Serialise a body: insertion order, compact separators, UTF-8."""
    return json.dumps(body, ensure_ascii=False, separators=(",", ":"), sort_keys=False).encode()


def encode_arguments(arguments: dict[str, Any]) -> str:
    """Tool-call arguments as the JSON string some APIs expect, in the same stable form."""
    return json.dumps(arguments, ensure_ascii=False, separators=(",", ":"), sort_keys=False)
