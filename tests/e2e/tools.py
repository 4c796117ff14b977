"""Local tool scripts for end-to-end tests, written as real executables."""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Mapping
from pathlib import Path
from typing import Any

PRELUDE = """\
import json, os, sys, time
request = json.load(sys.stdin)
tool = request["tool"]
args, answers, options = tool["arguments"], tool["answers"], tool["options"]
"""


SHIP_IT = """
if "q" not in answers:
    print(json.dumps({"type": "needs_input", "question": {"id": "q", "text": "Ship it?",
        "answer_type": {"type": "boolean"}}}))
else:
    print("got=" + json.dumps(answers["q"]))
"""
"""A tool body asking one boolean question (`q`, "Ship it?"), then printing `got=<answer>`."""


def make_tool(directory: Path, name: str, body: str) -> str:
    """Write a Python tool script; returns a `command` value for config."""
    path = directory / f"{name}.py"
    path.write_text(PRELUDE + textwrap.dedent(body))
    return f"{sys.executable} {path}"


def tool_toml(name: str, command: str, **settings: str) -> str:
    """A `[conversation.tools.<name>]` table; values are raw TOML."""
    lines = [f"[conversation.tools.{name}]", f"command = {command!r}"]
    lines += [f"{key} = {value}" for key, value in settings.items()]
    return "\n".join(lines) + "\n"


def tool_call(name: str, call_id: str = "call_1", **arguments: Any) -> dict[str, Any]:
    """A scripted model response that calls one tool."""
    return {"tool_calls": [{"id": call_id, "name": name, "arguments": arguments}]}


def add_tool(
    env: Mapping[str, str], name: str, body: str, *, run: str = '"unattended"', **settings: str
) -> None:
    """Write tool `name` beside the config file of `env` and add its table to that config
    (`run` and `settings` are raw TOML values, as for `tool_toml`)."""
    config = Path(env["JP_CONFIG"])
    command = make_tool(config.parent, name, body)
    config.write_text(config.read_text() + tool_toml(name, command, run=run, **settings))
