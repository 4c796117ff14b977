"""What kind of work each tool does: one definition for editors and permission modes.

The values are ACP's `ToolKind` (an editor picks an icon and a review from it); the
permission modes (`accept-edits`, `read-only`) decide by it too. A tool not named here
(local, MCP) is `other`.
"""

from __future__ import annotations

from typing import Literal

ToolKind = Literal["read", "edit", "delete", "move", "search", "execute", "think", "fetch", "other"]

BUILTIN_KINDS: dict[str, ToolKind] = {
    "fs_list_files": "search",
    "fs_grep_files": "search",
    "fs_read_file": "read",
    "fs_modify_file": "edit",
    "fs_create_file": "edit",
    "run_command": "execute",
    "update_plan": "think",
    "describe_tools": "read",
    "ask_user": "other",
}


def tool_kind(name: str) -> ToolKind:
    """The kind of the tool called `name` (`other` when it is not a built-in)."""
    return BUILTIN_KINDS.get(name, "other")


def writes_files(name: str) -> bool:
    """Whether the tool changes files of the workspace (an edit)."""
    return tool_kind(name) in ("edit", "delete", "move")
