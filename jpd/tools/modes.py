"""What a turn's permission mode (jpd.protocol.modes) decides for one tool call."""

from __future__ import annotations

from typing import Literal

from jpd.protocol.modes import PermissionMode
from jpd.tools.kinds import tool_kind, writes_files

Decision = Literal["allow", "refuse", "configured"]


def mode_decision(mode: PermissionMode, tool_name: str) -> Decision:
    """`allow` (no permission request), `refuse` (never runs), or `configured` (the
    tool's `run`/`result` settings decide, asking where they say `ask`)."""
    if mode == "read-only":
        changes = writes_files(tool_name) or tool_kind(tool_name) == "execute"
        return "refuse" if changes else "configured"
    if mode == "auto":
        return "allow"
    if mode == "accept-edits" and writes_files(tool_name):
        return "allow"
    return "configured"
