"""The content of ACP tool calls, built in one place: title, kind, locations, and for an
edit its diff, from the daemon's `tool_call` event (protocol.md 7.1); the final
`tool_call_update` keeps the diff beside the result text.

The title is the daemon's (`title`, jpd/tools/titles.py: `Read src/a.py (1-50)`, the
command itself); older daemons and logs without one get `name(key=value, ...)`, whole.
Older daemons and replayed logs carry no `toolKind`, and local and MCP tools are
`other` to the daemon: the kind is then guessed from the tool's name.
"""

from __future__ import annotations

import json
import os
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


def tool_kind(name: str) -> ToolKind:
    """A best guess of the ACP tool kind from a tool's name (editors pick icons by it)."""
    lowered = name.lower()
    for kind, words in _KINDS:
        if any(word in lowered for word in words):
            return kind
    return "other"


def tool_title(name: str, arguments: Any) -> str:
    """`name(arg=value, ...)`, whole: the title of a call the daemon gave none."""
    if not isinstance(arguments, dict) or not arguments:
        return name
    shown = ", ".join(
        f"{key}={json.dumps(value, ensure_ascii=False)}" for key, value in arguments.items()
    )
    return f"{name}({shown})"


@dataclass(frozen=True)
class CallView:
    """What the editor is shown of one call besides its result."""

    kind: ToolKind
    title: str = ""
    locations: list[ToolCallLocation] = field(default_factory=list)
    diff: list[Content] = field(default_factory=list)

    @classmethod
    def of(cls, name: str, event: dict[str, Any] | None = None) -> CallView:
        """The view of a `tool_call` event (or, without one, of the tool's name)."""
        event = event or {}
        title = event.get("title")
        if not isinstance(title, str) or not title:
            title = tool_title(name, event.get("arguments"))
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
        return cls(kind=kind, title=title, locations=locations, diff=diff)


def replayed_view(
    name: str, event: dict[str, Any], changed: str | None, workspace: str | None
) -> CallView:
    """The view of a recorded `tool_call_request` `event`: `changed` is the file its
    `file_changed` event names, `workspace` the turn's (the log keeps no kind or diff,
    so they are rebuilt from the arguments)."""
    arguments = event.get("arguments")
    title = {"title": event["title"]} if isinstance(event.get("title"), str) else {}
    if not isinstance(arguments, dict):
        return CallView.of(name, title)
    path = arguments.get("path")
    where = changed
    if where is None and isinstance(path, str) and name.startswith("fs_") and workspace:
        where = os.path.normpath(os.path.join(workspace, path))
    view: dict[str, Any] = {**title, "arguments": arguments}
    if where is not None:
        line = arguments.get("start_line")
        view["locations"] = [{"path": where, "line": line if isinstance(line, int) else None}]
    if changed is not None:
        diff: dict[str, Any] = {"path": changed}
        if isinstance(arguments.get("new_text"), str):
            diff.update(oldText=arguments.get("old_text"), newText=arguments["new_text"])
        elif isinstance(arguments.get("content"), str):
            diff.update(newText=arguments["content"])
        view["diff"] = diff
    return CallView.of(name, view)


def tool_started(call_id: str, view: CallView, arguments: Any) -> ToolCallStart:
    """The `tool_call` update for a call the model made."""
    return start_tool_call(
        call_id,
        view.title,
        kind=view.kind,
        status="in_progress",
        content=view.diff or None,
        locations=view.locations or None,
        raw_input=arguments,
    )


def tool_ended(
    call_id: str,
    content: str,
    is_error: bool,
    view: CallView | None = None,
    terminal: bool = False,
) -> ToolCallProgress:
    """The final `tool_call_update` of a call: its status and result (an edit that
    succeeded keeps its diff above the result; a command shown as a terminal keeps it)."""
    shown: list[Content] = [] if view is None or is_error else list(view.diff)
    if terminal:
        shown.append(TerminalToolCallContent(type="terminal", terminal_id=call_id))
    else:
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


def tool_stopped(call_id: str, why: str) -> ToolCallProgress:
    """The end of a call that got no result (its turn was cancelled or failed)."""
    return update_tool_call(call_id, status="failed", content=[tool_content(text_block(why))])


class CallIds:
    """ACP tool-call ids unique within a session: a provider may number calls per
    response (`call_1` in two turns), and an editor finds entries by id, so a repeated
    id gets a suffix (`call_1~2`). The daemon's id maps to the one shown until the same
    id starts another call."""

    def __init__(self) -> None:
        self._used: set[str] = set()
        self._current: dict[str, str] = {}
        self._daemon: dict[str, str] = {}

    def start(self, call_id: str) -> str:
        """The shown id of a call the daemon just started as `call_id`."""
        shown, n = call_id, 1
        while shown in self._used:
            n += 1
            shown = f"{call_id}~{n}"
        self._used.add(shown)
        self._current[call_id] = shown
        self._daemon[shown] = call_id
        return shown

    def of(self, call_id: str) -> str:
        """The shown id of the daemon's call `call_id` (itself when never started)."""
        return self._current.get(call_id, call_id)

    def daemon_of(self, shown: str) -> str:
        """The daemon's id of the shown call `shown`."""
        return self._daemon.get(shown, shown)
