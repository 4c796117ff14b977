"""protocol.md and the method table (jpd/protocol/method_table.py) describe the same
methods: every method has a section, every section names a method that exists, and
where a section lists its params in a table, the fields are the params model's."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from jpd.protocol.method_table import TABLE, Method

SPEC = (Path(__file__).resolve().parents[2] / "protocol.md").read_text(encoding="utf-8")
HEADING = re.compile(r"^(#{2,4}) (.+)$", re.MULTILINE)
METHOD_NAME = re.compile(r"`(\$/[a-zA-Z]+|[a-z]+(?:/[a-zA-Z]+)?)`")


def method_sections() -> dict[str, str]:
    """Method name -> the text of the protocol.md section whose heading names it."""
    found: dict[str, str] = {}
    headings = list(HEADING.finditer(SPEC))
    for here, after in zip(headings, [*headings[1:], None], strict=True):
        title = here.group(2)
        names = METHOD_NAME.findall(title)
        end = after.start() if after is not None else len(SPEC)
        for name in names:
            if "/" in name or name in {"initialize", "initialized", "shutdown", "exit"}:
                found[name] = SPEC[here.end() : end]
    return found


def params_table(section: str) -> set[str] | None:
    """The field names of the section's `Params:` table, if it has one."""
    match = re.search(r"^Params:\s*\n\s*\n((?:\|.*\n)+)", section, re.MULTILINE)
    if match is None:
        return None
    rows = match.group(1).splitlines()[2:]  # past the header and its rule
    return {m.group(1) for row in rows if (m := re.match(r"\|\s*`([A-Za-z_]+)`", row))}


def wire_fields(method: Method) -> set[str]:
    """The camelCase field names of the method's params model."""
    return {f.alias or name for name, f in method.params.model_fields.items()}


def test_every_method_in_the_table_has_a_section() -> None:
    assert sorted(set(TABLE) - set(method_sections())) == []


def test_every_section_names_a_method_of_the_table() -> None:
    assert sorted(set(method_sections()) - set(TABLE)) == []


@pytest.mark.parametrize("name", sorted(TABLE))
def test_every_params_field_is_named_in_its_section(name: str) -> None:
    section = method_sections().get(name, "")
    named = {
        word for span in re.findall(r"`([^`]+)`", section) for word in re.findall(r"\w+", span)
    }
    assert sorted(wire_fields(TABLE[name]) - named) == []


@pytest.mark.parametrize("name", sorted(n for n in TABLE if params_table(method_sections()[n])))
def test_a_params_table_lists_exactly_the_params_fields(name: str) -> None:
    assert params_table(method_sections()[name]) == wire_fields(TABLE[name])
