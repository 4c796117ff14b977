"""The embedded default store as the daemon sees it: the async storage port
(`port.ConversationStorage`) over the synchronous `store.ConversationStore`.

Each call that may wait on the disk (a read of a log, an fsync, a directory scan) is
one hop to a worker thread, as the daemon's call sites made before the port was async;
what is a few system calls that never wait on a device runs on the event loop, where a
hop would cost more than the call: `exists` (a stat), `lock_turn` (an open and a
non-blocking `flock`), a lock's release (a close), `append` (a flushed write), and `create`
(a directory and an empty log): with a thousand turns starting, a hop cost more loop
time than those calls (the limiter's and the queue's bookkeeping, a wake-up each way).
"""

from __future__ import annotations

import builtins
import functools
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import anyio
import anyio.to_thread

from jpd.conversation.attributes import Attributes
from jpd.conversation.events import Event, TurnStart
from jpd.conversation.jsonl.no_fleet import NoFleet
from jpd.conversation.jsonl.store import ConversationStore
from jpd.conversation.jsonl.turn_lock import TurnLock
from jpd.conversation.metadata import ConversationMeta

T = TypeVar("T")


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


class _EntryBatch:
    """Conversations whose `sync_entries` share one hop."""

    def __init__(self, ids: builtins.list[str]) -> None:
        self.ids = ids
        self.done = anyio.Event()
        self.errors: dict[str, Exception] = {}


def _not_synced(conversation_id: str) -> Exception:
    # Its entries stay pending: the end-of-turn `sync` makes them durable.
    return RuntimeError(f"the entries of {conversation_id} were not synced (cancelled)")


async def _hop(call: Callable[[], T]) -> T:
    return await anyio.to_thread.run_sync(call)


class ThreadedStore(NoFleet):
    """See the module docstring; `files` is the synchronous store underneath."""

    def __init__(self, root: Path, max_open: int | None = None) -> None:
        # None: `state.default_max_open`, sized for a thousand logs appended to in turn.
        self.files = ConversationStore(root, max_open)
        self._entries: _EntryBatch | None = None
        """`sync_entries` calls waiting for the next hop."""
        self._entries_hop = anyio.Lock()

    @property
    def root(self) -> Path:
        return self.files.root

    def conversation_dir(self, conversation_id: str) -> Path:
        return self.files.conversation_dir(conversation_id)

    async def open(self) -> None:
        """Nothing to open: files are opened when used."""

    def append(self, conversation_id: str, event: Event) -> None:
        self.files.append(conversation_id, event)

    async def create(self, conversation_id: str) -> None:
        self.files.create(conversation_id)

    async def exists(self, conversation_id: str) -> bool:
        return self.files.exists(conversation_id)

    async def sync(self, conversation_id: str) -> None:
        await _hop(functools.partial(self.files.sync, conversation_id))

    async def sync_entries(self, conversation_id: str) -> None:
        """Joins the batch that waits for the next hop: turns started at once share a
        hop and an fsync of `conversations/` (one hop runs at a time)."""
        batch = self._entries
        if batch is not None:
            batch.ids.append(conversation_id)
            await batch.done.wait()
        else:
            batch = self._entries = _EntryBatch([conversation_id])
            try:
                async with self._entries_hop:  # the batch fills while the last one runs
                    self._entries = None
                    batch.errors = await _hop(
                        functools.partial(self.files.sync_entries_of, batch.ids)
                    )
            except Exception as exc:  # each caller of the batch learns it
                batch.errors = dict.fromkeys(batch.ids, exc)
            finally:
                if self._entries is batch:  # cancelled before its hop: the next takes them
                    self._entries = None
                    batch.errors = {cid: _not_synced(cid) for cid in batch.ids}
                batch.done.set()
        error = batch.errors.get(conversation_id)
        if error is not None:
            raise error

    async def load(self, conversation_id: str, *, sanitized: bool = True) -> builtins.list[Event]:
        return await _hop(functools.partial(self.files.load, conversation_id, sanitized=sanitized))

    async def load_encoded(self, conversation_id: str) -> bytes:
        return await _hop(functools.partial(self.files.load_encoded, conversation_id))

    async def delete(self, conversation_id: str) -> None:
        await _hop(functools.partial(self.files.delete, conversation_id))

    async def metadata(self, conversation_id: str) -> ConversationMeta:
        return await _hop(functools.partial(self.files.metadata, conversation_id))

    async def release(self, conversation_id: str) -> None:
        # A hop still: turns that started together end together, and a thousand
        # metadata.json writes in one pass of the loop held control requests back.
        await _hop(functools.partial(self.files.release, conversation_id))

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
