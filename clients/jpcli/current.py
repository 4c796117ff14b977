"""Which conversation `jp` continues: the current one of this workspace.

`jp` remembers, per data dir and workspace, the conversation its last turn there used
(`jp conversation use ID` sets it). The state file is the client's own
(`$JP_STATE_DIR/current.json`, default `<XDG_STATE_HOME or ~/.local/state>/jp/`);
the daemon knows nothing of it. Conversation ids may be given as any unique prefix.
Standard library only.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Mapping
from typing import Any

from jpcli import paths

WORKSPACE_MARKERS = (".jp", ".git", ".hg")


class Ambiguous(ValueError):
    """A prefix matches several conversations; the message lists them."""


def state_dir(env: Mapping[str, str]) -> str:
    """`$JP_STATE_DIR`, else `<XDG_STATE_HOME or ~/.local/state>/jp`."""
    explicit = env.get("JP_STATE_DIR", "").strip()
    if explicit:
        return os.path.abspath(os.path.expanduser(explicit))
    return os.path.dirname(paths.log_dir(env))


def workspace_of(directory: str) -> str:
    """The nearest ancestor of `directory` holding `.jp`, `.git` or `.hg`; else itself."""
    current = os.path.abspath(directory)
    while True:
        if any(os.path.exists(os.path.join(current, m)) for m in WORKSPACE_MARKERS):
            return current
        parent = os.path.dirname(current)
        if parent == current:
            return os.path.abspath(directory)
        current = parent


class CurrentConversations:
    """The current conversation of each workspace, for one data dir."""

    def __init__(self, env: Mapping[str, str], cwd: str | None = None) -> None:
        self.file = os.path.join(state_dir(env), "current.json")
        self.data_dir = paths.data_dir(env)
        self.workspace = workspace_of(cwd if cwd is not None else os.getcwd())

    def get(self) -> str | None:
        """The remembered conversation of this workspace, if any."""
        value = self._read().get(self.data_dir, {}).get(self.workspace)
        return value if isinstance(value, str) else None

    def set(self, conversation_id: str | None) -> None:
        """Remember (None: forget) this workspace's conversation; best effort."""
        state = self._read()
        workspaces = state.setdefault(self.data_dir, {})
        if conversation_id is None:
            workspaces.pop(self.workspace, None)
        else:
            workspaces[self.workspace] = conversation_id
        with contextlib.suppress(OSError):
            os.makedirs(os.path.dirname(self.file), mode=0o700, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=os.path.dirname(self.file), prefix=".current.")
            with os.fdopen(fd, "w") as handle:
                json.dump(state, handle, indent=1, sort_keys=True)
            os.replace(tmp, self.file)

    def _read(self) -> dict[str, dict[str, Any]]:
        try:
            with open(self.file, encoding="utf-8") as handle:
                state = json.load(handle)
        except (OSError, ValueError):
            return {}
        if not isinstance(state, dict):
            return {}
        return {k: v for k, v in state.items() if isinstance(v, dict)}


def resolve_prefix(prefix: str, conversation_ids: list[str]) -> str | None:
    """The one id equal to or starting with `prefix`; None when none does.

    Raises `Ambiguous` when several do.
    """
    if prefix in conversation_ids:
        return prefix
    matches = [c for c in conversation_ids if c.startswith(prefix)]
    if len(matches) > 1:
        shown = ", ".join(matches[:5]) + (", ..." if len(matches) > 5 else "")
        raise Ambiguous(f"{prefix!r} matches {len(matches)} conversations: {shown}")
    return matches[0] if matches else None
