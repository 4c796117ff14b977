"""`turn/undo`: put back the files a turn changed; `turn/changes`: list them with their
text before the turn (protocol.md 5.23, 5.24).

The turn's `file_changed` events say which files and what they held; the saved copies
are in the conversation's `snapshots/`. The conversation's turn lock is held meanwhile,
so no turn starts and changes files while they are restored.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio

from jpd.conversation.paths import SNAPSHOTS_DIR
from jpd.conversation.port import ConversationNotFound
from jpd.core.conversations import check_id
from jpd.core.parts import DaemonParts
from jpd.protocol.errors import InvalidParams, NotFound
from jpd.protocol.turn_requests import ChangedFile, TurnChangesResult

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

    async def _events(
        self, conversation_id: str, turn_id: str | None
    ) -> tuple[list[ev.Event], str]:
        """The conversation's events and the turn meant (default: its last)."""
        from jpd.conversation import events as ev

        check_id(conversation_id)
        store = self._parts.store

        try:
            events = await store.load(conversation_id, sanitized=False)
            await store.fetch_blobs(conversation_id)  # in a fleet: snapshots written elsewhere
        except ConversationNotFound as exc:
            raise NotFound(str(exc)) from exc
        from jpd.tools.changes import last_changing_turn

        # Without a turn: the latest turn that changed files (a later one that only
        # talked is not meant), else the last turn.
        target = turn_id or last_changing_turn(events) or last_turn(events)
        if target is None:
            raise UndoRefusedError(f"conversation {conversation_id} has no turns")
        if not any(isinstance(e, ev.TurnStart) and e.turn_id == target for e in events):
            raise NotFound(f"turn {target} is not in conversation {conversation_id}")
        return events, target

    async def changes(self, conversation_id: str, turn_id: str | None) -> TurnChangesResult:
        """The files `turn_id` (default: the last turn) changed, with their text before."""
        from jpd.conversation import events as ev
        from jpd.tools.changes import saved_text, turn_changes

        events, target = await self._events(conversation_id, turn_id)
        snapshots = self._parts.store.conversation_dir(conversation_id) / SNAPSHOTS_DIR

        def read() -> list[ChangedFile]:
            return [
                ChangedFile(
                    path=str(r.path),
                    before=saved_text(snapshots, r.before),
                    created=r.before is None,
                )
                for r in turn_changes(events, target)
            ]

        files = await anyio.to_thread.run_sync(read)
        undone = any(isinstance(e, ev.TurnUndone) and e.turn_id == target for e in events)
        return TurnChangesResult(turn_id=target, files=files, undone=undone)

    async def undo(self, conversation_id: str, turn_id: str | None) -> ev.TurnUndone:
        """Restore every file `turn_id` (default: the last turn) changed; a created file
        is removed. All or nothing: a file changed since is named and none is touched."""
        from jpd.tools.changes import UndoRefused, plan_undo, undo

        check_id(conversation_id)
        parts = self._parts
        await parts.turns.let_go(conversation_id)  # a turn that just ended here, as turn/start
        parts.turns.check_idle(conversation_id)
        lock = await parts.conversations.lock_turn(conversation_id)
        try:
            parts.turns.check_idle(conversation_id)
            events, target = await self._events(conversation_id, turn_id)
            snapshots = parts.store.conversation_dir(conversation_id) / SNAPSHOTS_DIR
            try:
                plan = plan_undo(events, target)
                done = await anyio.to_thread.run_sync(undo, plan, snapshots, target)
            except UndoRefused as exc:
                raise UndoRefusedError(str(exc)) from exc
            parts.store.append(conversation_id, done)
            await parts.store.sync(conversation_id)
            # The model is told (jpd/llm/history.py): rebuild the kept history next time.
            parts.conversations.histories.pop(conversation_id, None)
            return done
        finally:
            await lock.release()
