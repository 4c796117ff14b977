"""The one-line title of a tool call, as people write it: `Read src/calc.py (1-50)`,
`Edit src/calc.py`, `Search "def add" in src`, the command itself (never cut).

One definition for every client: the daemon sends it as `title` on the `tool_call`
turn event (protocol.md 7.1), so an editor and a terminal show the same words. Paths are
shown relative to the workspace (absolute when outside it, e.g. an additional directory).
A tool without a phrase here (local, MCP) is `name(key=value, ...)`, whole.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


def _text(arguments: dict[str, Any], key: str) -> str | None:
    value = arguments.get(key)
    return value if isinstance(value, str) else None


def _number(arguments: dict[str, Any], key: str) -> int | None:
    value = arguments.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def shown_path(path: str | None, root: Path) -> str:
    """`path` relative to the workspace `root` when it lies inside (`.` for the root)."""
    if not path:
        return "."
    full = os.path.normpath(os.path.join(root, os.path.expanduser(path)))
    base = os.path.normpath(root)
    if full == base:
        return "."
    if full.startswith(base.rstrip(os.sep) + os.sep):
        return os.path.relpath(full, base)
    return full


def _lines(arguments: dict[str, Any]) -> str:
    start, end = _number(arguments, "start_line"), _number(arguments, "end_line")
    if start is None and end is None:
        return ""
    if end is None:
        return f" (from line {start})"
    return f" ({start or 1}-{end})"


def generic_title(name: str, arguments: Any) -> str:
    """`name(key=value, ...)`, every argument whole (JSON values)."""
    if not isinstance(arguments, dict) or not arguments:
        return name
    shown = ", ".join(
        f"{key}={json.dumps(value, ensure_ascii=False)}" for key, value in arguments.items()
    )
    return f"{name}({shown})"


def call_title(name: str, arguments: Any, root: Path) -> str:
    """The title of a call of `name` with `arguments` in the workspace `root`."""
    if not isinstance(arguments, dict):
        return generic_title(name, arguments)
    path = _text(arguments, "path")
    where = shown_path(path, root)
    if name == "fs_read_file" and path:
        return f"Read {where}{_lines(arguments)}"
    if name == "fs_modify_file" and path:
        return f"Edit {where}"
    if name == "fs_create_file" and path:
        return f"Write {where}"
    if name == "fs_list_files":
        pattern = _text(arguments, "pattern")
        return f"List {where}" + (f" ({pattern})" if pattern else "")
    if name == "fs_grep_files" and _text(arguments, "pattern") is not None:
        pattern = json.dumps(arguments["pattern"], ensure_ascii=False)
        glob = _text(arguments, "glob")
        return f"Search {pattern} in {where}" + (f" ({glob})" if glob else "")
    command = _text(arguments, "command")
    if name == "run_command" and command is not None:
        return command
    if name == "update_plan":
        return "Update plan"
    if name == "describe_tools" and isinstance(arguments.get("tools"), list):
        return "Describe " + ", ".join(str(tool) for tool in arguments["tools"])
    return generic_title(name, arguments)
