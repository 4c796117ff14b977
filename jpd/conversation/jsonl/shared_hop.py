"""One worker-thread hop shared by the calls that wait for it: turns that start or end
together (a thousand at once) share a hop for their small store work, rather than
paying each a hop (a limiter's and a queue's bookkeeping, a wake-up each way) that cost
more CPU than the work it carries."""

from __future__ import annotations

from collections.abc import Callable

import anyio
import anyio.to_thread


class _Batch:
    """Conversations whose call waits for the next hop."""

    def __init__(self, conversation_id: str) -> None:
        self.ids = [conversation_id]
        self.done = anyio.Event()
        self.errors: dict[str, Exception] = {}


class SharedHop:
    """`run(id)` joins the batch that waits for the next hop; up to `hops` hops run at
    once and the next batch fills meanwhile (while fewer run, a call has a hop of its
    own at once). `call_many` runs in the worker thread with the ids of a batch (an id
    may come twice) and returns the error of each id that failed."""

    def __init__(
        self, call_many: Callable[[list[str]], dict[str, Exception]], hops: int = 1
    ) -> None:
        self._call_many = call_many
        self._waiting: _Batch | None = None
        self._hop = anyio.Semaphore(hops)

    async def run(self, conversation_id: str) -> None:
        """Wait until a hop ran the call for `conversation_id`; raise its error, if any.

        The caller that opens a batch runs its hop shielded from cancellation: the
        callers that joined it count on it (a cancelled caller that joined stops
        waiting, and its call still runs)."""
        batch = self._waiting
        if batch is not None:
            batch.ids.append(conversation_id)
        else:
            batch = self._waiting = _Batch(conversation_id)
            with anyio.CancelScope(shield=True):
                try:
                    async with self._hop:  # the batch fills while the last one runs
                        self._waiting = None
                        batch.errors = await anyio.to_thread.run_sync(self._call_many, batch.ids)
                except Exception as exc:  # each caller of the batch learns it
                    batch.errors = dict.fromkeys(batch.ids, exc)
                finally:
                    if self._waiting is batch:  # not reached (an error taking the lock)
                        self._waiting = None
                    batch.done.set()
        await batch.done.wait()
        error = batch.errors.get(conversation_id)
        if error is not None:
            raise error
