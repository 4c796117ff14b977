"""The embedded default store as the daemon sees it: the async storage port
(`port.ConversationStorage`) over the synchronous `store.ConversationStore`.

Each call that may wait on the disk (a read of a log, an fsync, a directory scan) is
one hop to a worker thread, as the daemon's call sites made before the port was async;
what is a few system calls that never wait on a device runs on the event loop, where a
hop would cost more than the call: `exists` (a stat), `lock_turn` (an open and a
non-blocking `flock`), a lock's release (a close), `append` (a flushed write), and `create`
(a directory and an empty log): with a thousand turns starting, a hop cost more loop
time than those calls (the limiter's and the queue's bookkeeping, a wake-up each way).
Calls that turns started or ended together make at once share a hop
(`shared_hop.SharedHop`): `sync`, `sync_entries` and `release`.
"""

from __future__ import annotations

import builtins
import functools
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

import anyio
import anyio.to_thread

from jpd.conversation.attributes import Attributes
from jpd.conversation.events import Event, TurnStart
from jpd.conversation.jsonl.no_fleet import NoFleet
from jpd.conversation.jsonl.shared_hop import SharedHop
from jpd.conversation.jsonl.store import ConversationStore
from jpd.conversation.jsonl.turn_lock import TurnLock
from jpd.conversation.metadata import ConversationMeta

T = TypeVar("T")

SYNC_HOPS = 4
"""Worker-thread hops of `sync` running at once (see `ThreadedStore.__init__`)."""


class AsyncTurnLock:
    """`port.TurnLease` of a `flock` (`turn_lock.TurnLock`): never lost, its own seqs."""

    def __init__(self, lock: TurnLock) -> None:
        self.lock = lock

    async def release(self) -> None:
        self.lock.release()  # a close: no hop

    def on_lost(self, callback: Callable[[], None]) -> None:
        """A `flock` held by a live process is never lost."""

    @property
    def seq_floor(self) -> None:
        return None

    def track_seqs(self, next_seq: Callable[[], int]) -> None:
        """Nothing to record."""


async def _hop(call: Callable[[], T]) -> T:
    return await anyio.to_thread.run_sync(call)


class ThreadedStore(NoFleet):
    """See the module docstring; `files` is the synchronous store underneath."""

    def __init__(self, root: Path, max_open: int | None = None) -> None:
        # None: `state.default_max_open`, sized for a thousand logs appended to in turn.
        self.files = ConversationStore(root, max_open)
        self._entries = SharedHop(self.files.sync_entries_of)
        self._releases = SharedHop(self.files.release_all)
        # Turns that end together share hops for their fsyncs; a few run at once, so
        # that a batch's fsyncs (one after the other in its thread) never wait for long.
        self._syncs = SharedHop(self.files.sync_all, hops=SYNC_HOPS)

    @property
    def root(self) -> Path:
        return self.files.root

    def conversation_dir(self, conversation_id: str) -> Path:
        return self.files.conversation_dir(conversation_id)

    async def open(self) -> None:
        """Nothing to open: files are opened when used."""

    def append(self, conversation_id: str, event: Event) -> None:
        self.files.append(conversation_id, event)

    def append_many(self, conversation_id: str, events: Sequence[Event]) -> None:
        self.files.append_many(conversation_id, events)

    async def create(self, conversation_id: str) -> None:
        self.files.create(conversation_id)

    async def exists(self, conversation_id: str) -> bool:
        return self.files.exists(conversation_id)

    async def sync(self, conversation_id: str) -> None:
        await self._syncs.run(conversation_id)

    async def sync_entries(self, conversation_id: str) -> None:
        """Turns started at once share a hop and an fsync of `conversations/`."""
        await self._entries.run(conversation_id)

    async def sync_entries_many(self, conversation_ids: builtins.list[str]) -> dict[str, Exception]:
        """`sync_entries` of several conversations in one hop (`Conversations` gathers
        the ones created meanwhile); the error of each that failed, by id."""
        return await _hop(functools.partial(self.files.sync_entries_of, conversation_ids))

    async def load(self, conversation_id: str, *, sanitized: bool = True) -> builtins.list[Event]:
        return await _hop(functools.partial(self.files.load, conversation_id, sanitized=sanitized))

    async def load_encoded(self, conversation_id: str) -> bytes:
        return await _hop(functools.partial(self.files.load_encoded, conversation_id))

    async def delete(self, conversation_id: str) -> None:
        await _hop(functools.partial(self.files.delete, conversation_id))

    async def metadata(self, conversation_id: str) -> ConversationMeta:
        return await _hop(functools.partial(self.files.metadata, conversation_id))

    async def release(self, conversation_id: str) -> None:
        # Off the loop: turns that started together end together, and a thousand
        # metadata.json writes in one pass of the loop held control requests back. Those
        # turns share a hop (they paid one each).
        await self._releases.run(conversation_id)

    async def close(self) -> None:
        await _hop(self.files.close)

    async def attributes(self, conversation_id: str) -> Attributes:
        return await _hop(functools.partial(self.files.attributes, conversation_id))

    async def update_attributes(
        self, conversation_id: str, change: Callable[[Attributes], Attributes]
    ) -> Attributes:
        return await _hop(functools.partial(self.files.update_attributes, conversation_id, change))

    async def all_attributes(self) -> dict[str, Attributes]:
        return await _hop(self.files.all_attributes)

    async def lock_turn(self, conversation_id: str) -> AsyncTurnLock | None:
        lock = self.files.lock_turn(conversation_id)
        return None if lock is None else AsyncTurnLock(lock)

    async def last_turn(self, conversation_id: str) -> tuple[bool, TurnStart | None]:
        return await _hop(functools.partial(self.files.last_turn, conversation_id))

    async def scan_turns(self) -> builtins.list[tuple[str, bool, TurnStart | None]]:
        return await _hop(lambda: builtins.list(self.files.scan_turns()))

    # Defined last: inside the class body this name shadows the builtin `list`.
    async def list(self) -> builtins.list[ConversationMeta]:
        return await _hop(self.files.list)
