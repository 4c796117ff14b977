"""A turn lease in Postgres: a row's (holder, epoch, expiry), renewed while held.

Claiming is a compare-and-set on the conversation row (free or expired -> ours, with
the epoch raised by one), so two daemons never both hold it. Every append names the
epoch (`appends.PgAppends.append`): once another daemon claimed the lease, a zombie's
writes fail in the database. A holder that cannot renew before its own deadline (the
start of its last successful renewal plus the TTL, never later than the expiry the
database recorded) counts the lease as lost: appends stop locally and `on_lost`
callbacks run (the daemon cancels the turn and kills its tools). The renewal is a task
on the event loop; a loop too busy to renew in time loses the lease the same way.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import anyio
import psycopg

if TYPE_CHECKING:
    from psycopg_pool import AsyncConnectionPool

log = logging.getLogger(__name__)

SEQ_BLOCK = 65_536
"""turn/event seqs reserved for the holder with each claim and renewal: far more than a
turn sends between two renewals (deltas are merged on a 5 ms tick)."""

CLAIM_SQL = """
UPDATE jpd_conversations
   SET lease_holder = %(holder)s, lease_epoch = lease_epoch + 1,
       lease_expires = now() + make_interval(secs => %(ttl)s),
       stream_seq = stream_seq + %(block)s
 WHERE id = %(cid)s
   AND CASE WHEN %(queued)s THEN lease_holder = '(queued)'
            ELSE lease_holder IS NULL OR lease_expires < now() END
RETURNING lease_epoch, stream_seq - %(block)s
"""
"""The one claim of a turn lease: a free or expired one, or (`queued`) the one the turn
queue holds for a queued turn (`queue.QUEUED`, no expiry: nobody else claims it)."""
RENEW_SQL = """
UPDATE jpd_conversations SET lease_expires = now() + make_interval(secs => %(ttl)s),
       stream_seq = greatest(stream_seq, %(reserve)s)
 WHERE id = %(cid)s AND lease_epoch = %(epoch)s AND lease_holder = %(holder)s
RETURNING 1
"""
RELEASE_SQL = """
WITH ran AS (  -- the queued turn this lease ran (or ended) is done with the queue
  DELETE FROM jpd_turn_queue WHERE conversation_id = %(cid)s AND claimed_by IS NOT NULL
     AND EXISTS (SELECT 1 FROM jpd_conversations WHERE id = %(cid)s
                  AND lease_epoch = %(epoch)s AND lease_holder = %(holder)s))
UPDATE jpd_conversations SET lease_holder = NULL, lease_expires = NULL,
       stream_seq = coalesce(%(next)s, stream_seq)
 WHERE id = %(cid)s AND lease_epoch = %(epoch)s AND lease_holder = %(holder)s
"""


class PgLease:
    """A held turn lease (`port.TurnLease`); renewed by a task every third of its TTL."""

    def __init__(
        self,
        pool: AsyncConnectionPool[Any],
        conversation_id: str,
        holder: str,
        epoch: int,
        ttl: float,
        started: float,
        forget: Callable[[PgLease], None],
        seq_floor: int = 1,
        drain: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self._pool = pool
        self.conversation_id = conversation_id
        self.holder = holder
        self.epoch = epoch
        self.ttl = ttl
        self.deadline = started + ttl
        self._forget = forget
        self._drain = drain
        """Waits for the appends queued under the lease: written before it is given back."""
        self.seq_floor = seq_floor
        self._next_seq: Callable[[], int] | None = None
        self._callbacks: list[Callable[[], None]] = []
        self.lost = False
        self.released = False
        # On the event loop: created where the lease was claimed (a coroutine).
        self._task: asyncio.Task[None] | None = asyncio.get_running_loop().create_task(
            self._keep(), name=f"jpd-lease-{conversation_id}"
        )

    def _params(self) -> dict[str, object]:
        return {"cid": self.conversation_id, "epoch": self.epoch, "holder": self.holder}

    def on_lost(self, callback: Callable[[], None]) -> None:
        if not self.lost:
            self._callbacks.append(callback)
            return
        callback()

    def track_seqs(self, next_seq: Callable[[], int]) -> None:
        """Renewals reserve a block of seqs above `next_seq()` (called from the renewal
        task), and the release records it exactly: the next holder goes on from it."""
        self._next_seq = next_seq

    def _seq(self) -> int | None:
        try:
            return None if self._next_seq is None else int(self._next_seq())
        except Exception:  # the hub forgot the conversation: keep the reservation
            return None

    def check(self) -> bool:
        """Whether the lease is still held by the local clock (marks it lost if not)."""
        if not self.lost and time.monotonic() >= self.deadline:
            self._lose("not renewed in time")
        return not self.lost

    def _stop(self) -> None:
        task, self._task = self._task, None
        if task is not None and task is not asyncio.current_task():
            task.cancel()

    async def release(self) -> None:
        if self.released:
            return
        if self._drain is not None and not self.lost:
            await self._drain()
        if self.released:  # released meanwhile
            return
        self.released = True
        self._stop()
        self._forget(self)
        if self.lost:
            return
        try:
            with anyio.fail_after(self.ttl):
                async with self._pool.connection(timeout=self.ttl) as conn:
                    await conn.execute(RELEASE_SQL, {**self._params(), "next": self._seq()})
        except (psycopg.Error, OSError, TimeoutError) as exc:  # it expires by itself
            log.warning("could not release the lease of %s: %s", self.conversation_id, exc)

    async def _keep(self) -> None:
        while True:
            await asyncio.sleep(self.ttl / 3)
            if not await self.renew():
                return

    async def renew(self) -> bool:
        """Extend the lease; False once it is lost."""
        started = time.monotonic()
        budget = max(0.1, self.deadline - started)
        try:
            # Never past the deadline: a renewal that comes back later is no use.
            with anyio.fail_after(budget):
                row = await self._renew(budget)
        except Exception as exc:  # a database that is away: try again until the deadline
            log.warning("could not renew the lease of %s: %s", self.conversation_id, exc)
            return self.check()
        if row is None:
            self._lose("another daemon took the turn over")
            return False
        self.deadline = started + self.ttl
        return self.check()

    async def _renew(self, budget: float) -> tuple[Any, ...] | None:
        async with self._pool.connection(timeout=budget) as conn:
            seq = self._seq()
            reserve = 0 if seq is None else seq + SEQ_BLOCK
            params = {**self._params(), "ttl": self.ttl, "reserve": reserve}
            row: tuple[Any, ...] | None = await (await conn.execute(RENEW_SQL, params)).fetchone()
            return row

    def _lose(self, why: str) -> None:
        if self.lost or self.released:
            return
        self.lost = True
        callbacks, self._callbacks = self._callbacks, []
        self._stop()
        log.warning("lost the turn lease of %s: %s", self.conversation_id, why)
        for callback in callbacks:
            try:
                callback()
            except Exception:
                log.exception("a lease-lost callback failed")
