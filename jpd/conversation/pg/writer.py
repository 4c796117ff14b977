"""Appends in order, off the caller's path: a conversation's events queue here and one
task per conversation with something queued (on the event loop) writes them, oldest
first, each time all that is queued in one transaction (a batch: never a commit per
event when they come faster than commits). So an append never waits for the database
(nor for its retries during an outage); `written` waits for what is queued, and raises
what failed.

Each append gets a mark (increasing over all conversations); `when_written` calls back
once the appends up to a mark are committed, so that the daemon sends its clients only
events that are in the store (`jpd.core.append_gate`).

After a failed write nothing more of that conversation is written (the log must not get
a hole): the queued events are dropped and every later `append` and `written` raises
the same error, until `forget` (a new lease, a deleted conversation).

Everything here runs on the event loop (no lock): `submit` is called from it, and the
writing task and the callbacks run in it.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

log = logging.getLogger(__name__)

WriteBatch = Callable[[Any, list[dict[str, Any]]], Awaitable[None]]
"""Writes (key, params of consecutive appends with that key) in one transaction."""
Written = Callable[[int, bool], None]
"""(the mark written through, whether all went well) -> None; called on the event loop."""
BATCH = 256


class _Queue:
    def __init__(self) -> None:
        self.items: deque[tuple[int, Any, dict[str, Any]]] = deque()
        self.task: asyncio.Task[None] | None = None  # writing, while busy
        self.idle = asyncio.Event()
        self.idle.set()
        self.error: BaseException | None = None
        self.done = 0  # the mark written through
        self.waiters: list[tuple[int, Written]] = []

    @property
    def busy(self) -> bool:
        return self.task is not None


class OrderedWriter:
    """See the module docstring."""

    def __init__(self, write: WriteBatch) -> None:
        self._write = write
        self._queues: dict[str, _Queue] = {}
        self._marks = itertools.count(1)

    def submit(self, conversation_id: str, key: Any, params: dict[str, Any]) -> int:
        """Queue the append `params` (written with `key`) after the conversation's
        earlier ones; returns its mark. Raises at once the error that stopped its writes.
        Called on the event loop (the writing task is started there)."""
        queue = self._queues.setdefault(conversation_id, _Queue())
        if queue.error is not None:
            raise queue.error
        mark = next(self._marks)
        queue.items.append((mark, key, params))
        if queue.task is None:
            queue.idle.clear()
            queue.task = asyncio.get_running_loop().create_task(
                self._drain(conversation_id, queue), name="jpd-append"
            )
        return mark

    async def _drain(self, conversation_id: str, queue: _Queue) -> None:
        try:
            while queue.items and queue.error is None:
                key = queue.items[0][1]
                batch = []
                for item in itertools.islice(queue.items, BATCH):
                    if item[1] is not key:
                        break  # another lease: its own transaction
                    batch.append(item)
                try:
                    await self._write(key, [params for _, _, params in batch])
                except Exception as exc:
                    log.warning("append to %s failed: %s", conversation_id, exc)
                    queue.error = exc
                    break
                for _ in batch:
                    queue.items.popleft()
                queue.done = batch[-1][0]
                due = [w for w in queue.waiters if w[0] <= queue.done]
                queue.waiters = [w for w in queue.waiters if w[0] > queue.done]
                for _, callback in due:
                    callback(queue.done, True)
        except BaseException as exc:  # cancelled (the loop ends): nothing more is written
            queue.error = queue.error or exc
            raise
        finally:
            queue.items.clear()
            queue.task = None
            if queue.error is None and self._queues.get(conversation_id) is queue:
                del self._queues[conversation_id]  # nothing to remember
            waiters, queue.waiters = queue.waiters, []
            queue.idle.set()
            ok = queue.error is None
            for _, callback in waiters:  # written through `done`, and no further
                callback(queue.done, ok)

    def unwritten(self, conversation_id: str) -> int | None:
        """The mark of the conversation's newest append not yet written; None when all
        are written (or failed: nothing more will be)."""
        queue = self._queues.get(conversation_id)
        if queue is None or queue.error is not None or not queue.items:
            return None
        return queue.items[-1][0]

    def when_written(self, conversation_id: str, mark: int, callback: Written) -> None:
        """Call `callback(done, ok)` once the appends up to `mark` are written (ok), or
        the writes stopped short of it (not ok), at once if that is so already."""
        queue = self._queues.get(conversation_id)
        if queue is not None and queue.busy and queue.done < mark:
            queue.waiters.append((mark, callback))
            return
        done = mark if queue is None or queue.error is None else queue.done
        callback(done, queue is None or queue.error is None)

    def pending(self, conversation_id: str) -> bool:
        """Whether the conversation has appends not yet written."""
        queue = self._queues.get(conversation_id)
        return queue is not None and (queue.busy or queue.error is not None)

    async def written(self, conversation_id: str, *, check: bool = True) -> None:
        """Wait until the conversation's queued appends are written; raise what failed
        (unless not `check`: a reader only waits to read what was appended)."""
        queue = self._queues.get(conversation_id)
        if queue is None:
            return
        await queue.idle.wait()
        if check and queue.error is not None:
            raise queue.error

    async def forget(self, conversation_id: str) -> None:
        """Start afresh (after waiting for what is queued): a new lease, or a delete."""
        queue = self._queues.get(conversation_id)
        if queue is None:
            return
        await queue.idle.wait()
        if self._queues.get(conversation_id) is queue:
            del self._queues[conversation_id]

    async def settle(self) -> None:
        """Wait until every conversation's queued appends are written (or failed)."""
        for queue in list(self._queues.values()):
            await queue.idle.wait()
