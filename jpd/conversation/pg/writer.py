"""Appends in order, off the caller's thread: a conversation's events queue here and
one thread per conversation with something queued writes them, oldest first. So an
append from the event loop never waits for the database (nor for its retries during an
outage); `written` waits for what is queued, and raises what failed.

After a failed write nothing more of that conversation is written (the log must not get
a hole): the queued events are dropped and every later `append` and `written` raises
the same error, until `forget` (a new lease, a deleted conversation).
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)

Write = Callable[[dict[str, Any]], None]


class _Queue:
    def __init__(self) -> None:
        self.items: deque[tuple[Write, dict[str, Any]]] = deque()
        self.busy = False
        self.error: BaseException | None = None


class OrderedWriter:
    """See the module docstring."""

    def __init__(self) -> None:
        self._queues: dict[str, _Queue] = {}
        self._cond = threading.Condition()

    def submit(self, conversation_id: str, write: Write, params: dict[str, Any]) -> None:
        """Queue `write(params)` after the conversation's earlier ones; raises at once
        the error that stopped its writes."""
        with self._cond:
            queue = self._queues.setdefault(conversation_id, _Queue())
            if queue.error is not None:
                raise queue.error
            queue.items.append((write, params))
            if queue.busy:
                return
            queue.busy = True
        threading.Thread(
            target=self._drain, args=(conversation_id, queue), name="jpd-append", daemon=True
        ).start()

    def _drain(self, conversation_id: str, queue: _Queue) -> None:
        while True:
            with self._cond:
                if not queue.items or queue.error is not None:
                    queue.items.clear()
                    queue.busy = False
                    if queue.error is None and self._queues.get(conversation_id) is queue:
                        del self._queues[conversation_id]  # nothing to remember
                    self._cond.notify_all()
                    return
                write, params = queue.items[0]
            try:
                write(params)
            except BaseException as exc:
                log.warning("append to %s failed: %s", conversation_id, exc)
                with self._cond:
                    queue.error = exc
            with self._cond:
                if queue.items:
                    queue.items.popleft()

    def pending(self, conversation_id: str) -> bool:
        """Whether the conversation has appends not yet written."""
        queue = self._queues.get(conversation_id)
        return queue is not None and (queue.busy or queue.error is not None)

    def written(self, conversation_id: str, *, check: bool = True) -> None:
        """Wait until the conversation's queued appends are written; raise what failed
        (unless not `check`: a reader only waits to read what was appended)."""
        with self._cond:
            queue = self._queues.get(conversation_id)
            if queue is None:
                return
            while queue.busy:
                self._cond.wait()
            if check and queue.error is not None:
                raise queue.error

    def forget(self, conversation_id: str) -> None:
        """Start afresh (after waiting for what is queued): a new lease, or a delete."""
        with self._cond:
            queue = self._queues.get(conversation_id)
            if queue is None:
                return
            while queue.busy:
                self._cond.wait()
            del self._queues[conversation_id]

    def settle(self) -> None:
        """Wait until every conversation's queued appends are written (or failed)."""
        with self._cond:
            while any(queue.busy for queue in self._queues.values()):
                self._cond.wait()
