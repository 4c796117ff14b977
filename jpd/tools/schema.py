"""A tool's parameters as the JSON schema sent to the model, and checking arguments.

`parameters_to_schema` renders `conversation.tools.<name>.parameters` with a fixed
key order, so the same config always gives the same bytes (provider prompt caches
depend on it). `validate_arguments` checks the arguments of a tool call against a
schema of that shape; it understands exactly the keywords we generate (type, enum,
items, properties, required, additionalProperties), which avoids a jsonschema
dependency for a subset this small.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from jpd.config.tools import ParameterConfig
from jpd.protocol.json_types import json_type


def _object_schema(params: Mapping[str, ParameterConfig]) -> dict[str, Any]:
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {name: parameter_schema(param) for name, param in params.items()},
    }
    required = [name for name, param in params.items() if param.required]
    if required:
        # Omitted when empty: draft-04 validators (used by some providers) reject `[]`.
        schema["required"] = required
    schema["additionalProperties"] = False
    return schema


def parameter_schema(param: ParameterConfig) -> dict[str, Any]:
    """The JSON schema of one parameter (keys in a fixed order)."""
    kind = list(param.type) if isinstance(param.type, list) else param.type
    schema: dict[str, Any] = {"type": kind}
    if param.description is not None:
        schema["description"] = param.description
    if param.enum is not None:
        schema["enum"] = list(param.enum)
    if param.items is not None:
        schema["items"] = parameter_schema(param.items)
    if param.properties is not None:
        nested = _object_schema(param.properties)
        del nested["type"]
        schema.update(nested)
    if param.default is not None:
        schema["default"] = param.default
    return schema


def parameters_to_schema(params: Mapping[str, ParameterConfig]) -> dict[str, Any]:
    """The arguments object of a tool as JSON schema: required names in declaration order,
    no other arguments allowed."""
    return _object_schema(params)


# --- validation --------------------------------------------------------------------


def _has_type(value: Any, expected: str) -> bool:
    actual = json_type(value)
    if expected == "number":
        return actual in ("integer", "number")
    if expected == "integer":
        # JSON does not tell 3 from 3.0; JSON Schema counts both as integers.
        return actual == "integer" or (actual == "number" and float(value).is_integer())
    return actual == expected


def _json_equal(left: Any, right: Any) -> bool:
    """Equality as JSON sees it: `true` is not `1`, unlike in Python."""
    if isinstance(left, bool) or isinstance(right, bool):
        return isinstance(left, bool) and isinstance(right, bool) and left == right
    if isinstance(left, list) and isinstance(right, list):
        return len(left) == len(right) and all(map(_json_equal, left, right))
    if isinstance(left, dict) and isinstance(right, dict):
        return left.keys() == right.keys() and all(_json_equal(left[k], right[k]) for k in left)
    return bool(left == right)


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _child(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _validate(schema: Mapping[str, Any], value: Any, path: str, errors: list[str]) -> None:
    label = f"argument {path!r}" if path else "arguments"
    expected = schema.get("type")
    if expected is not None:
        types = expected if isinstance(expected, list) else [expected]
        if not any(_has_type(value, kind) for kind in types):
            wanted = " or ".join(types)
            errors.append(f"{label} must be of type {wanted}, got {json_type(value)}")
            return
    enum = schema.get("enum")
    if enum is not None and not any(_json_equal(value, option) for option in enum):
        choices = ", ".join(_show(option) for option in enum)
        errors.append(f"{label} must be one of {choices}, got {_show(value)}")
        return
    if isinstance(value, dict):
        properties: Mapping[str, Any] = schema.get("properties") or {}
        for name in schema.get("required") or []:
            if name not in value:
                errors.append(f"missing required argument {_child(path, name)!r}")
        for name, item in value.items():
            if name in properties:
                _validate(properties[name], item, _child(path, name), errors)
            elif schema.get("additionalProperties") is False:
                errors.append(f"unknown argument {_child(path, name)!r}")
    elif isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        for index, item in enumerate(value):
            _validate(schema["items"], item, f"{path}[{index}]", errors)


def validate_arguments(schema: Mapping[str, Any], arguments: Any) -> list[str]:
    """Human-readable reasons `arguments` does not fit `schema`; empty when it does.

    Every problem is reported (not just the first), each naming the argument by its
    path (`options.depth`, `files[2]`), so the model can fix all of them at once.
    """
    errors: list[str] = []
    _validate(schema, arguments, "", errors)
    return errors
