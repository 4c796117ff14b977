"""JSON type names of Python values, for validation messages (arguments and answers)."""

from __future__ import annotations

from typing import Any


def json_type(value: Any) -> str:
    """The JSON Schema type name of a JSON value (`integer` for ints, not `number`)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def with_article(value: Any) -> str:
    """The JSON type of `value` with an article, for messages ("a string", "null")."""
    name = json_type(value)
    if name in ("integer", "number"):
        return "a number"
    if name in ("array", "object"):
        return f"an {name}"
    return name if name == "null" else f"a {name}"
