"""The daemon's stored conversations: listing, reading and deleting them, the message
histories kept between turns, and closing the turns a stopped daemon left open
(recovery, protocol.md section 12.4), which then become resumable (section 5.21)."""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING

import anyio
from anyio.abc import TaskGroup

from jpd.conversation.paths import InvalidConversationId
from jpd.conversation.port import (
    ConversationBusy,
    ConversationExists,
    ConversationNotFound,
    ConversationStorage,
    SharedLog,
    StoreUnreachable,
)
from jpd.core.hub import EventHub
from jpd.protocol.errors import Busy, InvalidParams, NotFound, StoreUnavailableError
from jpd.protocol.summaries import ConversationSummary, TurnInfo

if TYPE_CHECKING:
    from jpd.conversation.events import Event, TurnStart
    from jpd.conversation.port import TurnLease
    from jpd.llm.history import MessageHistory

log = logging.getLogger(__name__)

HISTORY_CACHE = 64  # conversations whose message history stays built between turns


def check_id(conversation_id: str) -> None:
    """Raise `InvalidParams` (-32602) for an id that cannot name a conversation."""
    try:
        from jpd.conversation.paths import validate_id

        validate_id(conversation_id)
    except InvalidConversationId as exc:
        raise InvalidParams(str(exc)) from exc


class Conversations:
    """Stored conversations as the daemon serves them; `busy` says whether a
    conversation runs a turn in this daemon."""

    def __init__(
        self, store: ConversationStorage, hub: EventHub, busy: Callable[[str], bool]
    ) -> None:
        self.store = store
        self._hub = hub
        self._busy = busy
        # Message histories of recently used conversations, extended by their turns; in
        # a fleet, used only while no other member ran a turn there since (`SharedLog`).
        self.histories: OrderedDict[str, MessageHistory] = OrderedDict()
        self._shared = store if isinstance(store, SharedLog) else None
        # Conversation id -> its interrupted last turn (protocol.md 12.4), found by the
        # start-up scan and kept up to date, so `turn/list` reads no log.
        self.resumable: dict[str, TurnInfo] = {}
        # Set once the start-up recovery has run.
        self.recovered = anyio.Event()
        # New conversations whose directory entries wait for `_sync_created`'s next
        # round, and whether that task runs (see `sync_entries_soon`).
        self._created: list[str] = []
        self._syncing = False

    async def list(self) -> list[ConversationSummary]:
        """All conversations, most recently updated first."""
        metas = await self.store.list()
        return [
            ConversationSummary(
                conversation_id=m.id,
                title=m.title or "",
                created_at=m.created_at,
                updated_at=m.updated_at,
                event_count=m.event_count,
                workspace=m.workspace,
            )
            for m in metas
        ]

    async def get(self, conversation_id: str) -> bytes:
        """The persisted (sanitized) events as one encoded JSON array, in their stored
        form; read, checked and encoded in a worker thread, never on the event loop."""
        check_id(conversation_id)
        try:
            if not self._busy(conversation_id):
                await self.recover(conversation_id)  # closes a turn a stopped daemon left
            return await self.store.load_encoded(conversation_id)
        except ConversationNotFound as exc:
            raise NotFound(str(exc)) from exc

    async def delete(self, conversation_id: str) -> None:
        """Delete a conversation that has no running turn."""
        check_id(conversation_id)
        if self._busy(conversation_id):
            raise Busy(f"conversation {conversation_id} has a running turn; cancel it first")
        try:
            await self.store.delete(conversation_id)
        except ConversationNotFound as exc:
            raise NotFound(str(exc)) from exc
        except ConversationBusy as exc:
            raise Busy(str(exc)) from exc
        await self._hub.forget(conversation_id)
        self.histories.pop(conversation_id, None)
        self.resumable.pop(conversation_id, None)

    async def history(self, conversation_id: str) -> MessageHistory:
        """The conversation's messages: kept from its last turn, else loaded and built
        once in a worker thread (never on the event loop)."""
        history = self.histories.get(conversation_id)
        if history is not None and self._shared is not None:
            try:
                shared = self._shared
                current = await shared.unchanged_since_mine(conversation_id)
            except Exception:  # the store is away: the build below says so
                current = False
            if not current:  # another member ran a turn there since
                self.histories.pop(conversation_id, None)
                history = None
        if history is not None:
            self.histories.move_to_end(conversation_id)
            return history
        from jpd.conversation.gc_pause import gc_paused
        from jpd.conversation.logfile import drop_sliced
        from jpd.llm.history import MessageHistory

        check_id(conversation_id)

        def build(events: list[Event]) -> MessageHistory:
            with gc_paused(len(events)):  # no collector pauses for other clients
                history = MessageHistory(events, self.store.conversation_dir(conversation_id))
            drop_sliced(events)  # not freed all at once on return (see drop_sliced)
            return history

        try:
            await self.recover(conversation_id)  # closes a turn a stopped daemon left
            events = await self.store.load(conversation_id)
            await self.store.fetch_blobs(conversation_id)  # in a fleet: images written elsewhere
            return await anyio.to_thread.run_sync(build, events)
        except ConversationNotFound as exc:
            raise NotFound(str(exc)) from exc

    def remember_history(self, conversation_id: str, history: MessageHistory) -> None:
        self.histories[conversation_id] = history
        self.histories.move_to_end(conversation_id)
        while len(self.histories) > HISTORY_CACHE:
            self.histories.popitem(last=False)

    # --- recovery (protocol.md section 12.4) ---------------------------------------

    async def recover_all(self) -> None:
        from jpd.conversation.recovery import recover_all

        try:
            found = await recover_all(self.store)
            for conversation_id, start in found.items():
                self.note_resumable(conversation_id, start)
        except Exception:  # recovery also runs per conversation when it is loaded
            log.exception("recovering conversations left open failed")
        finally:
            self.recovered.set()

    def note_resumable(self, conversation_id: str, start: TurnStart) -> None:
        if self._busy(conversation_id):
            return
        self.resumable[conversation_id] = TurnInfo(
            turn_id=start.turn_id,
            conversation_id=conversation_id,
            model=start.model or "",
            started_at=start.timestamp,
            resumable=True,
        )

    async def recover(self, conversation_id: str) -> None:
        """Close the conversation's last turn if a stopped daemon left it open."""
        from jpd.conversation.recovery import recover

        await self.recovered.wait()
        lock = await self.store.lock_turn(conversation_id)
        if lock is None:
            return  # another daemon runs a turn here: it is not ours to close
        try:
            if not await recover(self.store, conversation_id):
                return
        finally:
            await lock.release()
        start = (await self.store.last_turn(conversation_id))[1]
        if start is not None:
            self.note_resumable(conversation_id, start)

    async def create(self, conversation_id: str) -> TurnLease:
        """Create a new conversation and take its turn lock."""
        try:
            await self.store.create(conversation_id)
            lock = await self.store.lock_turn(conversation_id)
        except ConversationExists:
            raise InvalidParams(f"conversation {conversation_id} already exists") from None
        except ConversationNotFound as exc:  # deleted as soon as created
            raise NotFound(str(exc)) from exc
        except StoreUnreachable as exc:
            raise StoreUnavailableError(str(exc)) from None
        if lock is None:
            raise Busy(f"conversation {conversation_id} has a turn running in another jpd")
        return lock

    async def create_unlocked(self, conversation_id: str) -> None:
        """Create a new conversation whose turn waits in a fleet's queue."""
        try:
            await self.store.create(conversation_id)
        except ConversationExists:
            raise InvalidParams(f"conversation {conversation_id} already exists") from None
        except StoreUnreachable as exc:
            raise StoreUnavailableError(str(exc)) from None

    def sync_entries_soon(self, conversation_id: str, task_group: TaskGroup) -> None:
        """Make a new conversation's directory entries durable in the background (the
        end-of-turn sync then has only the log to fsync, protocol.md 7.2), with the
        conversations created meanwhile: one task (started in `task_group` when none
        runs) syncs them in rounds, rather than a task per new conversation (a thousand
        turns starting at once paid a task each, which cost more than the hop they
        share)."""
        self._created.append(conversation_id)
        if not self._syncing:
            self._syncing = True
            task_group.start_soon(self._sync_created)

    async def _sync_created(self) -> None:
        try:
            while self._created:
                batch, self._created = self._created, []
                try:
                    errors = await self.store.sync_entries_many(batch)
                except Exception as exc:  # the end-of-turn syncs do it then
                    errors = dict.fromkeys(batch, exc)
                for conversation_id, error in errors.items():
                    log.error(
                        "could not sync the directory of conversation %s: %s",
                        conversation_id,
                        error,
                    )
        finally:
            self._syncing = False

    async def lock_turn(self, conversation_id: str) -> TurnLease:
        """The conversation's turn lock, held while this daemon runs a turn there."""
        try:
            lock = await self.store.lock_turn(conversation_id)
        except ConversationNotFound as exc:
            raise NotFound(str(exc)) from exc
        except StoreUnreachable as exc:
            raise StoreUnavailableError(str(exc)) from None
        if lock is None:
            raise Busy(f"conversation {conversation_id} has a turn running in another jpd")
        return lock
