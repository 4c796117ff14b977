"""protocol.md agrees with the code (issue 31 point 6): its method summary tables list
exactly the methods of the method table, every `capabilities.methods` it shows is what
the daemon serves, and every JSON-RPC message in its examples validates against the
wire models (params of requests and notifications, results paired by id)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from jpd.protocol.method_table import TABLE
from jpd.rpc.methods import _METHOD_NAMES
from jpd.schemas import export_schemas

PROTOCOL = Path(__file__).resolve().parents[2] / "protocol.md"
TEXT = PROTOCOL.read_text(encoding="utf-8")
SCHEMAS = export_schemas()
INTERNAL = {"$/cancelRequest"}  # handled by the RPC layer, not a method of the summary


def summary_methods() -> set[str]:
    """The methods named in the first column of section 5's summary tables."""
    start = TEXT.index("## 5. Methods")
    end = TEXT.index("\n### ", start)
    names = set()
    for line in TEXT[start:end].splitlines():
        match = re.match(r"\| `([^`]+)`", line)
        if match:
            names.add(match.group(1))
    return names


def json_examples() -> list[list[tuple[int, Any]]]:
    """The JSON lines of each ```json block, parsed (line number, value)."""
    blocks: list[list[tuple[int, Any]]] = []
    current: list[tuple[int, Any]] | None = None
    for number, line in enumerate(TEXT.splitlines(), 1):
        if line.strip().startswith("```json"):
            current = []
            continue
        if line.strip() == "```" and current is not None:
            blocks.append(current)
            current = None
            continue
        if current is not None and line.strip().startswith("{"):
            try:
                current.append((number, json.loads(line)))
            except json.JSONDecodeError:
                continue  # a multi-line or annotated example: not a wire line
    return blocks


def messages() -> list[tuple[int, str, str, Any]]:
    """`(line, method, "params" | "result", value)` of every example message with a
    method of the table (results paired with their request's id in the same block). A
    request answered with an error in its block is an example of bad input: skipped."""
    found: list[tuple[int, str, str, Any]] = []
    for block in json_examples():
        failed = {
            json.dumps(v.get("id"))
            for _, v in block
            if isinstance(v, dict) and "error" in v and "method" not in v
        }
        pending: dict[Any, str] = {}
        for number, value in block:
            if not isinstance(value, dict) or value.get("jsonrpc") != "2.0":
                continue
            method = value.get("method")
            if isinstance(method, str) and method in TABLE:
                if "id" in value and json.dumps(value["id"]) in failed:
                    continue
                found.append((number, method, "params", value.get("params", {})))
                if "id" in value:
                    pending[json.dumps(value["id"])] = method
            elif "result" in value and json.dumps(value.get("id")) in pending:
                method = pending.pop(json.dumps(value.get("id")))
                found.append((number, method, "result", value["result"]))
    return found


def test_the_summary_tables_list_every_method_of_the_table() -> None:
    assert summary_methods() == set(TABLE) - INTERNAL


def test_every_methods_capability_shown_is_what_the_daemon_serves() -> None:
    shown = [
        (number, value["result"]["capabilities"]["methods"])
        for block in json_examples()
        for number, value in block
        if isinstance(value, dict)
        and isinstance(value.get("result"), dict)
        and "methods" in value["result"].get("capabilities", {})
    ]
    assert shown, "protocol.md shows no initialize result"
    for number, methods in shown:
        assert methods == _METHOD_NAMES, f"protocol.md line {number}"


def test_there_are_examples_of_most_methods() -> None:
    assert len({method for _, method, _, _ in messages()}) >= 10


@pytest.mark.parametrize(
    ("number", "method", "part", "value"),
    messages(),
    ids=[f"line{n}-{m}-{p}" for n, m, p, _ in messages()],
)
def test_each_example_message_validates(number: int, method: str, part: str, value: Any) -> None:
    """Against schemas/protocol.schema.json's schema of that message (what the daemon
    accepts for what it receives, what it sends for what it sends)."""
    schema = SCHEMAS[f"{method}.{part}"]
    if part == "params" and value is None:
        value = {}  # JSON-RPC: absent params; the daemon takes null as none
    errors = [
        f"{'/'.join(str(p) for p in e.absolute_path) or '(top)'}: {e.message}"
        for e in Draft202012Validator(schema).iter_errors(value)
    ]
    assert not errors, f"protocol.md line {number}: {method} {part}: {errors}"


def summary_rows() -> list[tuple[str, str]]:
    """`(method, params column)` of section 5's summary tables."""
    start = TEXT.index("## 5. Methods")
    end = TEXT.index("\n### ", start)
    rows = []
    for line in TEXT[start:end].splitlines():
        match = re.match(r"\| `([^`]+)`[^|]*\| ([^|]+) \|", line)
        if match:
            rows.append((match.group(1), match.group(2).strip()))
    return rows


@pytest.mark.parametrize(("method", "column"), summary_rows())
def test_the_summary_names_every_param_of_its_schema(method: str, column: str) -> None:
    schema = SCHEMAS[f"{method}.params"]
    properties = set(schema.get("properties", {}))
    required = set(schema.get("required", []))
    if column == "none":
        assert not required, f"{method} has required params"
        return
    assert column.startswith("`{") and column.endswith("}`"), column
    names = [n.strip() for n in column[2:-2].split(",")]
    assert {n.rstrip("?") for n in names} == properties, method
    # A param the schema requires is never documented as optional (the reverse is
    # allowed: `inquiry/answer`'s `answer` is needed, though its model defaults to null).
    assert required <= {n for n in names if not n.endswith("?")}, method
