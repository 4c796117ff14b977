"""JSON schemas of the protocol, generated from the pydantic models that define it.

`export_schemas()` maps a name to a standalone JSON Schema (draft 2020-12):
`<method>.params` and `<method>.result` for each method of the method table
(`jpd.protocol.method_table.TABLE`, both directions; notifications have params only),
`persisted-event` (one line of `events.jsonl`) and `error` (the JSON-RPC error object).

`python -m jpd.schemas --write` stores them in `schemas/protocol.schema.json` at the
repo root; `--check` exits 1 when that file is stale. A unit test runs the check, so
a change to a wire model cannot go unnoticed by protocol.md.
"""

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel
from pydantic.json_schema import GenerateJsonSchema
from pydantic_core import core_schema

from jpd.conversation.events import event_adapter
from jpd.protocol.base import WireModel
from jpd.protocol.method_table import TABLE, ClientRequest, ServerRequest

JSON_SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"
SCHEMA_PATH = Path(__file__).resolve().parent.parent / "schemas" / "protocol.schema.json"

Mode = Literal["validation", "serialization"]


class ErrorObject(WireModel):
    """The `error` member of a JSON-RPC error response."""

    code: int
    message: str
    """One line, meant for humans; never a traceback."""
    data: Any = None
    """Details where useful: pydantic errors for -32602, `{key, message}` list for -32003."""


class _WireJsonSchema(GenerateJsonSchema):
    """Serialization schemas that say what `WireModel.to_wire()` sends.

    `to_wire` drops None fields only, so a field whose default is not None (a value or a
    factory) is always present: required in the schema.
    """

    def field_is_required(
        self,
        field: core_schema.ModelField | core_schema.DataclassField | core_schema.TypedDictField,
        total: bool,
    ) -> bool:
        schema = field["schema"]
        if self.mode == "serialization" and schema["type"] == "default":
            return "default_factory" in schema or schema.get("default") is not None
        return super().field_is_required(field, total)


def _schema(model: type[BaseModel], mode: Mode) -> dict[str, Any]:
    schema = model.model_json_schema(by_alias=True, mode=mode, schema_generator=_WireJsonSchema)
    if mode == "serialization":
        _drop_null_defaults(schema)
    return schema


def _drop_null_defaults(schema: dict[str, Any]) -> None:
    """A field defaulting to None is absent on the wire, never `null`: say so."""
    for obj in [schema, *schema.get("$defs", {}).values()]:
        for prop in obj.get("properties", {}).values():
            if "default" not in prop or prop["default"] is not None:
                continue
            del prop["default"]
            branches = [b for b in prop.get("anyOf", []) if b != {"type": "null"}]
            if len(branches) == 1:
                del prop["anyOf"]
                prop.update(branches[0])
            elif branches:
                prop["anyOf"] = branches


def _persisted_event_schema() -> dict[str, Any]:
    """The `events.jsonl` line schema, with `inquiry_response` in its flat on-disk shape.

    In memory the outcome is nested under `response`; on disk its fields sit beside
    `type` and `timestamp`. A record without `outcome` (legacy `{id, answer}`) reads
    as answered, so only the other outcomes require it.
    """
    schema = event_adapter().json_schema(by_alias=True, mode="validation")
    defs: dict[str, Any] = schema["$defs"]
    nested = defs["InquiryResponse"]
    envelope = {k: v for k, v in nested["properties"].items() if k != "response"}
    variants = []
    for ref in nested["properties"]["response"]["oneOf"]:
        name = ref["$ref"].rsplit("/", 1)[-1]
        outcome = defs.pop(name)
        required = ["type", *outcome.get("required", [])]
        if name != "Answered":
            required.append("outcome")
        variants.append(
            {
                "title": f"InquiryResponse{name}",
                "type": "object",
                "properties": {**envelope, **outcome["properties"]},
                "required": required,
            }
        )
    defs["InquiryResponse"] = {
        "title": "InquiryResponse",
        "description": (
            "Flat on disk: {type, timestamp, id, outcome, answer | reason}. "
            "A record without `outcome` is a legacy answer."
        ),
        "anyOf": variants,
    }
    return schema


def _sorted(value: Any) -> Any:
    """Sort object keys recursively (arrays keep their order: it is meaningful)."""
    if isinstance(value, dict):
        return {key: _sorted(value[key]) for key in sorted(value)}
    if isinstance(value, list):
        return [_sorted(item) for item in value]
    return value


def export_schemas() -> dict[str, dict[str, Any]]:
    """Every protocol schema by name, with keys sorted, so the output is deterministic.

    What the daemon receives (client params, client results) is in pydantic's validation
    mode, what it sends in its serialization mode. A client request without a result
    model is documented as returning `null`.
    """
    out: dict[str, dict[str, Any]] = {}
    for name, method in TABLE.items():
        incoming = method.direction.startswith("client")
        out[f"{name}.params"] = _schema(
            method.params, "validation" if incoming else "serialization"
        )
        if isinstance(method, ClientRequest):
            result = method.result
            out[f"{name}.result"] = (
                {"title": "NullResult", "type": "null"}
                if result is None
                else _schema(result, "serialization")
            )
        elif isinstance(method, ServerRequest):
            out[f"{name}.result"] = _schema(method.result, "validation")
    out["persisted-event"] = _persisted_event_schema()
    out["error"] = _schema(ErrorObject, "serialization")
    for schema in out.values():
        schema["$schema"] = JSON_SCHEMA_DIALECT
    ordered: dict[str, dict[str, Any]] = _sorted(out)
    return ordered


def render() -> str:
    """The exact text of `schemas/protocol.schema.json`."""
    return json.dumps(export_schemas(), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    """`--write` regenerates the schema file; `--check` exits 1 if it is stale."""
    parser = argparse.ArgumentParser(prog="python -m jpd.schemas", description=__doc__)
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--write", action="store_true", help="write the schema file")
    action.add_argument("--check", action="store_true", help="fail if the schema file is stale")
    parser.add_argument("--path", type=Path, default=SCHEMA_PATH, help="schema file location")
    args = parser.parse_args(argv)
    path: Path = args.path
    text = render()
    if args.write:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        print(f"wrote {path}")
        return 0
    try:
        current = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        current = None
    if current != text:
        state = "is missing" if current is None else "differs from the wire models"
        print(
            f"{path} {state}: run `python -m jpd.schemas --write` and update protocol.md",
            file=sys.stderr,
        )
        return 1
    print(f"{path} is up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main())
