"""A running command's live output (`tool_progress` messages) as ACP tool-call updates.

With an editor that declares `clientCapabilities._meta.terminal_output` (Zed's
convention, as claude-agent-acp and codex-acp use it): the call gets `terminal` content
and `_meta.terminal_info`, each chunk goes as `_meta.terminal_output`, and the end as
`_meta.terminal_exit`, and the call keeps its terminal when it ends. Otherwise nothing
is sent while the command runs: its output comes once, as the call's result (re-sending
the whole output on every chunk would flood the editor).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from acp import update_tool_call
from acp.schema import TerminalToolCallContent, ToolCallProgress

_EXIT = re.compile(r"^exit code: (-?\d+)")


def declares_terminal_output(capabilities: Any) -> bool:
    """Whether the editor's client capabilities declare `_meta.terminal_output`."""
    meta = getattr(capabilities, "field_meta", None)
    return isinstance(meta, dict) and meta.get("terminal_output") is True


@dataclass
class LiveOutput:
    """Live output of one turn's running calls."""

    terminal: bool = False
    shown: dict[str, str] = field(default_factory=dict)
    """Calls with output so far: id -> its text (fallback) or "" (terminal)."""

    def chunk(self, call_id: str, data: str) -> list[ToolCallProgress]:
        if not self.terminal:
            return []
        updates: list[ToolCallProgress] = []
        if call_id not in self.shown:
            self.shown[call_id] = ""
            start = update_tool_call(
                call_id, content=[TerminalToolCallContent(type="terminal", terminal_id=call_id)]
            )
            start.field_meta = {"terminal_info": {"terminal_id": call_id}}
            updates.append(start)
        update = update_tool_call(call_id)
        update.field_meta = {"terminal_output": {"terminal_id": call_id, "data": data}}
        return [*updates, update]

    def ended(self, call_id: str, content: str) -> tuple[list[ToolCallProgress], bool]:
        """Before the call's final update: the terminal's exit, if it had one; and
        whether it had one (the final update then keeps it)."""
        if self.shown.pop(call_id, None) is None or not self.terminal:
            return [], False
        found = _EXIT.match(content)
        update = update_tool_call(call_id)
        update.field_meta = {
            "terminal_exit": {
                "terminal_id": call_id,
                "exit_code": int(found.group(1)) if found else None,
                "signal": None if found else "SIGKILL",
            }
        }
        return [update], True
