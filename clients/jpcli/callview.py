"""The whole of a tool call, as shown before the user approves it.

A permission prompt must show everything that is approved: no argument is cut. Each
argument gets its own line (JSON); a string with newlines (a script, a file's new
content) is shown as an indented block, line by line, and the terminal wraps long lines.
Characters that could hide or rewrite what is shown (terminal escapes and other control
characters, bidirectional overrides and other invisible format characters) are shown
escaped, as `\\u001b`, never sent to the terminal as they are.
"""

from __future__ import annotations

import json
import unicodedata
from typing import Any

from jpcli.render import TOOL_MARK, format_tool_call

BLOCK = "    │ "


def visible(text: str) -> str:
    """`text` with control and format characters escaped (tabs kept)."""
    out: list[str] = []
    for char in str(text):
        if char != "\t" and unicodedata.category(char) in ("Cc", "Cf", "Zl", "Zp"):
            out.append(f"\\u{ord(char):04x}")
        else:
            out.append(char)
    return "".join(out)


def call_lines(name: str, arguments: Any) -> list[str]:
    """Every line of the call `name(arguments)`, nothing cut."""
    lines = [f"{TOOL_MARK} {visible(name)}"]
    if arguments is None or arguments == {}:
        return lines
    if not isinstance(arguments, dict):
        return [*lines, f"  {json.dumps(arguments, ensure_ascii=False)}"]
    for key, value in arguments.items():
        if isinstance(value, str) and "\n" in value:
            lines.append(f"  {visible(key)}:")
            lines += [BLOCK + visible(line) for line in value.split("\n")]
        else:
            # JSON escapes control characters; format characters are escaped too.
            lines.append(f"  {visible(key)} = {visible(json.dumps(value, ensure_ascii=False))}")
    return lines


def short_call(name: str, arguments: Any, width: int = 200) -> str | None:
    """The one-line `⚙ name(key=value, …)` when it shows the call faithfully (nothing
    cut, no whitespace collapsed, nothing escaped), else None: use `call_lines`."""
    line = format_tool_call(name, arguments, limit=None)
    if len(line) > width or visible(line) != line:
        return None
    if isinstance(arguments, dict):
        args = ", ".join(
            f"{key}={json.dumps(value, ensure_ascii=False)}" for key, value in arguments.items()
        )
    else:
        args = "" if arguments is None else json.dumps(arguments, ensure_ascii=False)
    return line if " ".join(args.split()) == args and " ".join(name.split()) == name else None
