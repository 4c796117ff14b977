"""The token estimate counts each tool's schema by its JSON length, remembered per tool
name while the schema stays equal (jpd/context/count.py `_schema_chars`)."""

from __future__ import annotations

import json

from jpd.context import count
from jpd.llm.base import ToolDefinition


def _tool(parameters: dict[str, object]) -> ToolDefinition:
    return ToolDefinition(name="grep_files", description="search", parameters=parameters)


def test_an_equal_schema_counts_the_same_and_a_changed_one_is_counted_anew() -> None:
    small: dict[str, object] = {"type": "object", "properties": {"q": {"type": "string"}}}
    assert count._schema_chars(_tool(small)) == len(json.dumps(small))
    assert count._schema_chars(_tool(dict(small))) == len(json.dumps(small))
    large = {**small, "required": ["q"], "description": "x" * 500}
    assert count._schema_chars(_tool(large)) == len(json.dumps(large))
    assert count._schema_chars(_tool(small)) == len(json.dumps(small))
