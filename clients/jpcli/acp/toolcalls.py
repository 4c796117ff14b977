"""The content of ACP tool calls, built in one place: title, kind, locations, and for an
edit its diff, from the daemon's `tool_call` event (protocol.md 7.1); the final
`tool_call_update` keeps the diff beside the result text.

Older daemons and replayed logs carry no `toolKind`, and local and MCP tools are
`other` to the daemon: the kind is then guessed from the tool's name.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, cast, get_args

from acp import start_tool_call, text_block, tool_content, tool_diff_content, update_tool_call
from acp.schema import (
    ContentToolCallContent,
    FileEditToolCallContent,
    TerminalToolCallContent,
    ToolCallLocation,
    ToolCallProgress,
    ToolCallStart,
    ToolKind,
)

Content = ContentToolCallContent | FileEditToolCallContent | TerminalToolCallContent

_KINDS: tuple[tuple[ToolKind, tuple[str, ...]], ...] = (
    ("read", ("read", "cat", "view", "open")),
    ("edit", ("write", "edit", "patch", "replace", "modify", "create")),
    ("delete", ("delete", "remove", "rm")),
    ("search", ("search", "grep", "find", "glob", "list")),
    ("fetch", ("fetch", "http", "web", "url")),
    ("execute", ("run", "exec", "shell", "bash", "command")),
)
_TITLE_ARGS = 60


def tool_kind(name: str) -> ToolKind:
    """A best guess of the ACP tool kind from a tool's name (editors pick icons by it)."""
    lowered = name.lower()
    for kind, words in _KINDS:
        if any(word in lowered for word in words):
            return kind
    return "other"


def tool_title(name: str, arguments: Any) -> str:
    """`name(arg=value, ...)`, shortened: the line an editor shows for a call."""
    if not isinstance(arguments, dict) or not arguments:
        return name
    shown = ", ".join(f"{key}={json.dumps(value)}" for key, value in arguments.items())
    if len(shown) > _TITLE_ARGS:
        shown = shown[: _TITLE_ARGS - 1] + "\u2026"
    return f"{name}({shown})"


@dataclass(frozen=True)
class CallView:
    """What the editor is shown of one call besides its result."""

    kind: ToolKind
    locations: list[ToolCallLocation] = field(default_factory=list)
    diff: list[Content] = field(default_factory=list)

    @classmethod
    def of(cls, name: str, event: dict[str, Any] | None = None) -> CallView:
        """The view of a `tool_call` event (or, without one, of the tool's name)."""
        event = event or {}
        sent = event.get("toolKind")
        # `other` is the daemon's word for a tool it does not know (local, MCP): the
        # name may still tell.
        known = sent in get_args(ToolKind) and sent != "other"
        kind = cast(ToolKind, sent) if known else tool_kind(name)
        locations = [
            ToolCallLocation(path=str(item["path"]), line=item.get("line"))
            for item in event.get("locations") or []
            if isinstance(item, dict) and isinstance(item.get("path"), str)
        ]
        diff: list[Content] = []
        edit = event.get("diff")
        if isinstance(edit, dict) and isinstance(edit.get("newText"), str):
            old = edit.get("oldText")
            diff.append(
                tool_diff_content(
                    str(edit.get("path")), edit["newText"], old if isinstance(old, str) else None
                )
            )
        return cls(kind=kind, locations=locations, diff=diff)


def replayed_view(name: str, arguments: Any, changed: str | None) -> CallView:
    """The view of a recorded call: `changed` is the file its `file_changed` event
    names (the log keeps no kind or diff, so they are rebuilt from the arguments)."""
    if changed is None or not isinstance(arguments, dict):
        return CallView.of(name)
    diff: dict[str, Any] = {"path": changed}
    if isinstance(arguments.get("new_text"), str):
        diff.update(oldText=arguments.get("old_text"), newText=arguments["new_text"])
    elif isinstance(arguments.get("content"), str):
        diff.update(newText=arguments["content"])
    return CallView.of(name, {"locations": [{"path": changed}], "diff": diff})


def tool_started(
    call_id: str, name: str, arguments: Any, view: CallView | None = None
) -> ToolCallStart:
    """The `tool_call` update for a call the model made."""
    view = view or CallView.of(name)
    return start_tool_call(
        call_id,
        tool_title(name, arguments),
        kind=view.kind,
        status="in_progress",
        content=view.diff or None,
        locations=view.locations or None,
        raw_input=arguments,
    )


def tool_ended(
    call_id: str, content: str, is_error: bool, view: CallView | None = None
) -> ToolCallProgress:
    """The final `tool_call_update` of a call: its status and result (an edit that
    succeeded keeps its diff above the result)."""
    shown: list[Content] = [] if view is None or is_error else list(view.diff)
    shown.append(tool_content(text_block(content)))
    return update_tool_call(
        call_id,
        status="failed" if is_error else "completed",
        kind=view.kind if view else None,
        content=shown,
        locations=view.locations or None if view else None,
        raw_output=content,
    )


def tool_note(call_id: str, text: str) -> ToolCallProgress:
    """A `tool_call_update` that sets the call's content to a note for the person."""
    return update_tool_call(call_id, content=[tool_content(text_block(text))])
