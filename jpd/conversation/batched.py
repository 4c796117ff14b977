"""Calls that wait together share one run: turns that start or end together (a
thousand at once) share one worker-thread hop for their small store work, or one
filing of their replay events, rather than paying each a run (a limiter's and a queue's
bookkeeping, a wake-up each way) that cost more CPU than the work it carries."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager

import anyio


class _Batch:
    """Ids whose call waits for the next run."""

    def __init__(self, key: str) -> None:
        self.ids = [key]
        self.done = anyio.Event()
        self.errors: dict[str, Exception] = {}


class Batched:
    """`run(id)` joins the batch that waits for the next run of `run_many`, which gets
    the ids of a batch (an id may come twice) and returns the error of each id that
    failed. A run holds `gate` (a lock, or a semaphore for several runs at once); the
    next batch fills while it is held."""

    def __init__(
        self,
        run_many: Callable[[list[str]], Awaitable[dict[str, Exception]]],
        gate: AbstractAsyncContextManager[object],
    ) -> None:
        self._run_many = run_many
        self._gate = gate
        self._waiting: _Batch | None = None

    async def run(self, key: str) -> None:
        """Wait until a run made the call for `key`; raise its error, if any.

        The caller that opens a batch runs it shielded from cancellation: the callers
        that joined it count on it (a cancelled caller that joined stops waiting, and
        its call still runs)."""
        batch = self._waiting
        if batch is not None:
            batch.ids.append(key)
        else:
            batch = self._waiting = _Batch(key)
            with anyio.CancelScope(shield=True):
                try:
                    async with self._gate:  # the batch fills while the last one runs
                        self._waiting = None
                        batch.errors = await self._run_many(batch.ids)
                except Exception as exc:  # each caller of the batch learns it
                    batch.errors = dict.fromkeys(batch.ids, exc)
                finally:
                    if self._waiting is batch:  # not reached (an error taking the gate)
                        self._waiting = None
                    batch.done.set()
        await batch.done.wait()
        error = batch.errors.get(key)
        if error is not None:
            raise error
