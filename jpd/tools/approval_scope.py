"""What a remembered permission answer ("always", `remember: true`) covers.

For most tools, the tool: every later call of it in the turn. For `run_command`, a
command prefix, as Claude Code's `Bash(npm test:*)`: the command's first word, plus
its second unless that is an option (starts with `-`). Approving `python3 run_tests.py`
covers `python3 run_tests.py -k foo`, never `python3 evil.py` or `curl ...`. A command
whose prefix cannot be told safely (any shell syntax beyond plain words: `;`, `&`,
`|`, `$`, backquotes, redirections, globs, a leading `VAR=value`...) is never covered
by a remembered answer, and an answer to it is not remembered: it asks every time.
"""

from __future__ import annotations

import re
import shlex
from typing import Any

COMMAND_TOOL = "run_command"
PLAIN = re.compile(r"[A-Za-z0-9 _\-./:=,+@%'\"]*")
"""Characters of a command made of plain words only (no shell operator or expansion)."""
_NAME = re.compile(r"[A-Za-z0-9_\-./+@%:,]+")


def approval_scope(tool_name: str, arguments: dict[str, Any]) -> str | None:
    """The key a remembered answer is kept under for this call ("" for the whole tool),
    or None when no remembered answer may cover it."""
    if tool_name != COMMAND_TOOL:
        return ""
    command = arguments.get("command")
    return command_prefix(command) if isinstance(command, str) else None


def command_prefix(command: str) -> str | None:
    """`npm test` for `npm test --watch`; None when the command is not plain words."""
    if not PLAIN.fullmatch(command):
        return None
    try:
        words = shlex.split(command)
    except ValueError:
        return None
    if not words or not _NAME.fullmatch(words[0]) or "=" in words[0]:
        return None
    prefix = words[:1]
    if len(words) > 1 and not words[1].startswith("-") and _NAME.fullmatch(words[1]):
        prefix.append(words[1])
    return " ".join(prefix)
