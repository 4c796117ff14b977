"""Tool parameters as JSON schema, and checking call arguments (`jpd.tools.schema`)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from jpd.config.tools import ParameterConfig
from jpd.tools.schema import parameters_to_schema, validate_arguments


def params(raw: dict[str, Any]) -> dict[str, ParameterConfig]:
    return {name: ParameterConfig.model_validate(value) for name, value in raw.items()}


RAW = {
    "path": {"type": "string", "required": True, "description": "File to read"},
    "mode": {"type": "string", "enum": ["fast", "slow"], "default": "fast"},
    "count": {"type": "integer"},
    "files": {
        "type": "array",
        "items": {
            "type": "object",
            "properties": {
                "name": {"type": "string", "required": True},
                "size": {"type": "number"},
            },
        },
    },
    "opts": {
        "type": "object",
        "required": True,
        "properties": {"depth": {"type": "integer", "required": True}, "flag": {"type": "boolean"}},
    },
    "value": {"type": ["boolean", "string"]},
    "nothing": {"type": "null"},
}
SCHEMA = parameters_to_schema(params(RAW))


# --- rendering -----------------------------------------------------------------------


def test_schema_shape() -> None:
    assert SCHEMA == {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "File to read"},
            "mode": {"type": "string", "enum": ["fast", "slow"], "default": "fast"},
            "count": {"type": "integer"},
            "files": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {"name": {"type": "string"}, "size": {"type": "number"}},
                    "required": ["name"],
                    "additionalProperties": False,
                },
            },
            "opts": {
                "type": "object",
                "properties": {"depth": {"type": "integer"}, "flag": {"type": "boolean"}},
                "required": ["depth"],
                "additionalProperties": False,
            },
            "value": {"type": ["boolean", "string"]},
            "nothing": {"type": "null"},
        },
        "required": ["path", "opts"],
        "additionalProperties": False,
    }


def test_key_order_is_deterministic() -> None:
    rendered = json.dumps(SCHEMA)

    assert rendered.index('"type"') < rendered.index('"properties"')
    assert rendered.index('"required": ["path", "opts"]') < rendered.rindex(
        '"additionalProperties"'
    )
    assert list(SCHEMA) == ["type", "properties", "required", "additionalProperties"]
    assert list(SCHEMA["properties"]["mode"]) == ["type", "enum", "default"]
    assert json.dumps(parameters_to_schema(params(RAW))) == rendered


def test_required_follows_declaration_order() -> None:
    schema = parameters_to_schema(
        params(
            {"z": {"type": "string", "required": True}, "a": {"type": "string", "required": True}}
        )
    )

    assert schema["required"] == ["z", "a"]
    assert list(schema["properties"]) == ["z", "a"]


def test_no_parameters() -> None:
    assert parameters_to_schema({}) == {
        "type": "object",
        "properties": {},
        "additionalProperties": False,
    }


def test_free_form_object_stays_open() -> None:
    schema = parameters_to_schema(params({"extra": {"type": "object"}}))

    assert schema["properties"]["extra"] == {"type": "object"}
    assert validate_arguments(schema, {"extra": {"anything": [1, 2]}}) == []


# --- validation ----------------------------------------------------------------------


def valid_arguments(**changes: Any) -> dict[str, Any]:
    arguments: dict[str, Any] = {
        "path": "a.txt",
        "mode": "slow",
        "count": 3,
        "files": [{"name": "x", "size": 1.5}, {"name": "y"}],
        "opts": {"depth": 2, "flag": False},
        "value": True,
        "nothing": None,
    }
    arguments.update(changes)
    return arguments


def test_valid_arguments() -> None:
    assert validate_arguments(SCHEMA, valid_arguments()) == []
    assert validate_arguments(SCHEMA, {"path": "p", "opts": {"depth": 0}}) == []


def test_integral_float_is_an_integer_and_integer_is_a_number() -> None:
    arguments = valid_arguments(count=3.0, files=[{"name": "x", "size": 2}])

    assert validate_arguments(SCHEMA, arguments) == []


@pytest.mark.parametrize(
    ("changes", "error"),
    [
        ({"count": 3.5}, "argument 'count' must be of type integer, got number"),
        ({"count": True}, "argument 'count' must be of type integer, got boolean"),
        ({"count": "3"}, "argument 'count' must be of type integer, got string"),
        ({"path": None}, "argument 'path' must be of type string, got null"),
        ({"files": {"name": "x"}}, "argument 'files' must be of type array, got object"),
        ({"value": 1}, "argument 'value' must be of type boolean or string, got integer"),
        ({"nothing": 0}, "argument 'nothing' must be of type null, got integer"),
        ({"mode": "medium"}, "argument 'mode' must be one of 'fast', 'slow', got 'medium'"),
        ({"extra": 1}, "unknown argument 'extra'"),
        ({"opts": {"depth": 1, "color": "red"}}, "unknown argument 'opts.color'"),
        ({"opts": {"flag": True}}, "missing required argument 'opts.depth'"),
        ({"opts": {"depth": "deep"}}, "argument 'opts.depth' must be of type integer, got string"),
        ({"files": [{"name": "x"}, {"size": 1}]}, "missing required argument 'files[1].name'"),
        ({"files": [{"name": 7}]}, "argument 'files[0].name' must be of type string, got integer"),
    ],
)
def test_invalid_arguments(changes: dict[str, Any], error: str) -> None:
    assert validate_arguments(SCHEMA, valid_arguments(**changes)) == [error]


def test_missing_required_arguments() -> None:
    assert validate_arguments(SCHEMA, {}) == [
        "missing required argument 'path'",
        "missing required argument 'opts'",
    ]


def test_every_problem_is_reported() -> None:
    errors = validate_arguments(SCHEMA, {"count": "x", "bogus": 1, "opts": {"depth": 1}})

    assert errors == [
        "missing required argument 'path'",
        "argument 'count' must be of type integer, got string",
        "unknown argument 'bogus'",
    ]


@pytest.mark.parametrize(
    ("arguments", "kind"), [([1], "array"), ("x", "string"), (None, "null"), (1, "integer")]
)
def test_arguments_must_be_an_object(arguments: Any, kind: str) -> None:
    assert validate_arguments(SCHEMA, arguments) == [
        f"arguments must be of type object, got {kind}"
    ]


def test_enum_tells_booleans_from_numbers() -> None:
    schema = parameters_to_schema(
        params({"level": {"type": ["integer", "boolean"], "enum": [1, 2]}})
    )

    assert validate_arguments(schema, {"level": 1}) == []
    assert validate_arguments(schema, {"level": True}) == [
        "argument 'level' must be one of 1, 2, got True"
    ]


def test_enum_of_arrays() -> None:
    schema = parameters_to_schema(
        params(
            {
                "pair": {
                    "type": "array",
                    "enum": [[1, True]],
                    "items": {"type": ["integer", "boolean"]},
                }
            }
        )
    )

    assert validate_arguments(schema, {"pair": [1, True]}) == []
    assert validate_arguments(schema, {"pair": [True, 1]}) != []
