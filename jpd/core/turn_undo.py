"""`turn/undo`: put back the files a turn changed (protocol.md, "Workspace tools").

The turn's `file_changed` events say which files and what they held; the saved copies
are in the conversation's `snapshots/`. The conversation's turn lock is held meanwhile,
so no turn starts and changes files while they are restored.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio

from jpd.conversation.paths import SNAPSHOTS_DIR
from jpd.conversation.store import ConversationNotFound
from jpd.core.conversations import check_id
from jpd.core.parts import DaemonParts
from jpd.protocol.errors import InvalidParams, NotFound

# Loaded with the first undo, not at start-up (protocol.md section 4, "Start-up").
if TYPE_CHECKING:
    from jpd.conversation import events as ev


class UndoRefusedError(InvalidParams):
    """The turn's changes cannot be undone (the message names why and which files)."""


def last_turn(events: list[ev.Event]) -> str | None:
    """The id of the conversation's last turn, if it has one."""
    from jpd.conversation import events as ev

    for event in reversed(events):
        if isinstance(event, ev.TurnStart):
            return event.turn_id
    return None


class TurnUndo:
    """Undoes turns of the daemon's conversations."""

    def __init__(self, parts: DaemonParts) -> None:
        self._parts = parts

    async def undo(self, conversation_id: str, turn_id: str | None) -> ev.TurnUndone:
        """Restore every file `turn_id` (default: the last turn) changed; a created file
        is removed. All or nothing: a file changed since is named and none is touched."""
        from jpd.conversation import events as ev
        from jpd.tools.changes import UndoRefused, plan_undo, undo

        check_id(conversation_id)
        parts = self._parts
        parts.turns.check_idle(conversation_id)
        lock = await parts.conversations.lock_turn(conversation_id)
        try:
            parts.turns.check_idle(conversation_id)
            try:
                events = await anyio.to_thread.run_sync(
                    lambda: parts.store.load(conversation_id, sanitized=False)
                )
            except ConversationNotFound as exc:
                raise NotFound(str(exc)) from exc
            target = turn_id or last_turn(events)
            if target is None:
                raise UndoRefusedError(f"conversation {conversation_id} has no turns")
            if not any(isinstance(e, ev.TurnStart) and e.turn_id == target for e in events):
                raise NotFound(f"turn {target} is not in conversation {conversation_id}")
            snapshots = parts.store.conversation_dir(conversation_id) / SNAPSHOTS_DIR
            try:
                plan = plan_undo(events, target)
                done = await anyio.to_thread.run_sync(undo, plan, snapshots, target)
            except UndoRefused as exc:
                raise UndoRefusedError(str(exc)) from exc
            parts.store.append(conversation_id, done)
            await anyio.to_thread.run_sync(parts.store.sync, conversation_id)
            return done
        finally:
            lock.release()
