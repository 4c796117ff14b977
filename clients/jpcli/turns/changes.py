"""The files a turn changed (`turn/changes`, protocol.md 5.24): one line at the end of a
turn, and `jp turn diff [TURN]`, the turn's change of each file as a unified diff
against the file as it is now (read here: the daemon and `jp` share the machine)."""

from __future__ import annotations

import difflib
import os
from pathlib import Path
from typing import Any, TextIO

from jpcli.diffs import paint_diff
from jpcli.rpc import Connection, RpcError

EXIT_OK = 0
EXIT_ERROR = 1


def _shown(path: str, cwd: str) -> str:
    """`path` relative to `cwd` when inside it."""
    relative = os.path.relpath(path, cwd)
    return path if relative.startswith("..") else relative


def changed_line(result: Any, cwd: str) -> str | None:
    """`Changed: calc.py, notes.md (new)` for a `turn/changes` result (None: nothing)."""
    files = result.get("files") if isinstance(result, dict) else None
    if not files:
        return None
    names = [
        _shown(str(f.get("path")), cwd) + (" (new)" if f.get("created") else "")
        for f in files
        if isinstance(f, dict)
    ]
    return "Changed: " + ", ".join(names)


def turn_changes(connection: Connection, conversation: str, turn: str | None) -> Any:
    params: dict[str, Any] = {"conversationId": conversation}
    if turn:
        params["turnId"] = turn
    return connection.request("turn/changes", params)


def file_diff(entry: dict[str, Any], cwd: str) -> list[str]:
    """One file's change: its text before the turn against the file now."""
    path = str(entry.get("path"))
    name = _shown(path, cwd)
    before = entry.get("before") if isinstance(entry.get("before"), str) else None
    try:
        now: str | None = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        now = None
    except (OSError, UnicodeDecodeError) as exc:
        return [f"jp: cannot read {name}: {exc}"]
    old_name = "/dev/null" if before is None else f"a/{name}"
    new_name = "/dev/null" if now is None else f"b/{name}"
    lines = difflib.unified_diff(
        (before or "").splitlines(), (now or "").splitlines(), old_name, new_name, lineterm=""
    )
    return list(lines)


def turn_diff(
    connection: Connection,
    turn: str | None,
    *,
    conversation: str | None,
    out: TextIO,
    err: TextIO,
    color: bool,
) -> int:
    """`jp turn diff [TURN]`: what `turn` (default: the conversation's last turn) changed,
    as unified diffs against the files as they are now."""
    if conversation is None:
        err.write("jp: no conversation in this workspace yet; name one with --conversation\n")
        return EXIT_ERROR
    try:
        result = turn_changes(connection, conversation, turn)
    except RpcError as exc:
        err.write(f"jp: cannot show the turn's changes: {exc.message}\n")
        return EXIT_ERROR
    files = [f for f in result.get("files") or [] if isinstance(f, dict)]
    cwd = os.getcwd()
    if not files:
        err.write(f"jp: turn {result.get('turnId')} changed no files\n")
        return EXIT_OK
    if result.get("undone"):
        err.write(f"jp: turn {result.get('turnId')} was undone; its files are as before it\n")
    for entry in files:
        for line in file_diff(entry, cwd):
            out.write((paint_diff(line) if color else line) + "\n")
    return EXIT_OK
