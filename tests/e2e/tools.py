"""Local tool scripts for end-to-end tests, written as real executables."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

PRELUDE = """\
import json, os, sys, time
request = json.load(sys.stdin)
tool = request["tool"]
args, answers, options = tool["arguments"], tool["answers"], tool["options"]
"""


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
