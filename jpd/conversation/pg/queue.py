"""The fleet's turn queue in Postgres (`port.TurnQueueStore`, docs/scale.md).

A turn started on a member without room waits in `jpd_turn_queue` (its `turn/start`
params, so that any member can start it) while the queue holds its conversation's lease
(holder `QUEUED`, no expiry: no other turn starts there, and nobody takes it over).
Members with room claim queued turns with `SELECT ... FOR UPDATE SKIP LOCKED` (racing
claimers never take one twice), a turn pinned to a workspace only by the members of its
host; the claim moves the lease to the claimer in the same transaction, with the one
claim statement of every lease (`lease.CLAIM_SQL`), and marks the row claimed; the row
goes when that lease is released (`lease.RELEASE_SQL`), so a claimer that dies before
the turn started leaves it claimable again once its lease expired. Turns whose lease
expired (their member stopped) are claimed the same way, for a takeover. Members are
woken by `NOTIFY jpd_queue` and poll as a backstop. `turn/cancel` of a turn queued or
running elsewhere is a row of `jpd_turn_cancels`, acted on by the member that runs or
claims it.
"""

from __future__ import annotations

import logging
import time
from datetime import datetime
from typing import TYPE_CHECKING, Any

import anyio
import psycopg

from jpd.conversation.pg.lease import CLAIM_SQL
from jpd.conversation.pg.rows import start_of
from jpd.conversation.port import QueueClaim

if TYPE_CHECKING:
    from jpd.conversation.pg.connections import Conn
    from jpd.conversation.pg.store import PgStore

log = logging.getLogger(__name__)

QUEUED = "(queued)"
"""The lease holder of a conversation whose turn waits in the queue."""
CHANNEL = "jpd_queue"
CANCEL_TTL = "interval '1 minute'"
PIN_OK = """(lease_holder IS NULL OR (last_start::jsonb ->> 'workspace') IS NULL
     OR left(lease_holder, length(%(host)s) + 1) = %(host)s || ':'
     OR lease_expires < now() - make_interval(secs => %(grace)s))"""
"""An expired turn this member may take over: not pinned to a workspace, or pinned to
this host, or left by its host for `PIN_GRACE` leases."""

_HOLD_FOR_QUEUE = """
UPDATE jpd_conversations SET lease_holder = '(queued)', lease_expires = NULL
 WHERE id = %(cid)s AND (lease_holder IS NULL OR lease_expires < now())
RETURNING id
"""
_ENQUEUE = """
INSERT INTO jpd_turn_queue (conversation_id, turn_id, host, model, workspace, request, queued_by)
VALUES (%(cid)s, %(turn)s, %(host)s, %(model)s, %(workspace)s, %(request)s, %(by)s)
"""
_PICK_QUEUED = """
SELECT q.conversation_id, q.turn_id, q.request, q.model, q.workspace, q.claimed_by
  FROM jpd_turn_queue q JOIN jpd_conversations c ON c.id = q.conversation_id
 WHERE CASE WHEN %(turn)s::text IS NULL THEN q.host IS NULL OR q.host = %(host)s
            ELSE q.turn_id = %(turn)s END
   AND (q.claimed_by IS NULL
        -- its claimer died before the turn started: claimable again (never a turn
        -- that started: that one is taken over, or it ended)
        OR (c.lease_expires < now() AND NOT c.turn_open
            AND coalesce(c.last_start::jsonb ->> 'turn_id', '') <> q.turn_id))
 ORDER BY q.queued_at LIMIT 1 FOR UPDATE OF q SKIP LOCKED
"""
_PICK_EXPIRED = f"""
SELECT id, last_start FROM jpd_conversations
 WHERE turn_open AND (lease_holder IS NULL OR lease_expires < now()) AND {PIN_OK}
 ORDER BY lease_expires NULLS FIRST LIMIT 1 FOR UPDATE SKIP LOCKED
"""
_ASK_CANCEL = """
INSERT INTO jpd_turn_cancels (turn_id)
SELECT %(turn)s WHERE EXISTS (SELECT 1 FROM jpd_turn_queue WHERE turn_id = %(turn)s)
   OR EXISTS (SELECT 1 FROM jpd_conversations WHERE turn_open AND lease_expires > now()
               AND (last_start::jsonb ->> 'turn_id') = %(turn)s)
ON CONFLICT DO NOTHING
RETURNING 1
"""


_CANCELS = f"""
WITH moot AS (DELETE FROM jpd_turn_cancels WHERE asked_at < now() - {CANCEL_TTL})
SELECT turn_id FROM jpd_turn_cancels WHERE asked_at >= now() - {CANCEL_TTL}
"""


class PgTurnQueue:
    """`port.TurnQueueStore` on `jpd_turn_queue`; see the module docstring."""

    def __init__(self, store: PgStore, grace: float) -> None:
        self._store = store
        self._grace = grace
        self._listener: psycopg.AsyncConnection[Any] | None = None

    async def enqueue(
        self,
        conversation_id: str,
        turn_id: str,
        *,
        request: str,
        model: str,
        workspace: str | None,
        pinned: bool,
    ) -> bool:
        store = self._store
        params = {
            "cid": conversation_id,
            "turn": turn_id,
            "host": store.host if pinned else None,
            "model": model,
            "workspace": workspace,
            "request": request,
            "by": store.holder,
        }

        async def work(conn: Conn) -> bool:
            async with conn.transaction():
                if await (await conn.execute(_HOLD_FOR_QUEUE.encode(), params)).fetchone() is None:
                    return False
                # A claimed row whose lease ended without its release (an outage): done.
                await conn.execute(
                    "DELETE FROM jpd_turn_queue WHERE conversation_id = %s", (conversation_id,)
                )
                await conn.execute(_ENQUEUE.encode(), params)
                await conn.execute(f"NOTIFY {CHANNEL}")
            return True

        return await store.run(work, retry_for=store.start_wait)

    async def claim(
        self, turn_id: str | None = None, *, takeover: bool = True
    ) -> QueueClaim | None:
        store = self._store
        started = time.monotonic()
        pick = {"turn": turn_id, "host": store.host}

        async def work(conn: Conn) -> QueueClaim | None:
            async with conn.transaction():
                row = await (await conn.execute(_PICK_QUEUED.encode(), pick)).fetchone()
                if row is not None:
                    cid, turn, request, model, workspace, claimed_by = row
                    # A row claimed before: its claimer's lease expired (the one claim).
                    claim = store.claim_params(cid, queued=claimed_by is None)
                    held = await (await conn.execute(CLAIM_SQL.encode(), claim)).fetchone()
                    if held is None:  # the queue lost its lease: a stale row, dropped
                        await conn.execute(
                            "DELETE FROM jpd_turn_queue WHERE conversation_id = %s", (cid,)
                        )
                        return None
                    await conn.execute(
                        "UPDATE jpd_turn_queue SET claimed_by = %s WHERE conversation_id = %s",
                        (store.holder, cid),
                    )
                    lease = await store.hold(cid, held, started)
                    return QueueClaim(cid, turn, lease, model, workspace, request)
                if turn_id is not None or not takeover:
                    return None
                expired = {"host": store.host, "grace": self._grace}
                row = await (await conn.execute(_PICK_EXPIRED.encode(), expired)).fetchone()
                if row is None:
                    return None
                start = start_of(row[1])
                claim = store.claim_params(row[0], queued=False)
                held = await (await conn.execute(CLAIM_SQL.encode(), claim)).fetchone()
                if held is None or start is None:
                    return None
                lease = await store.hold(row[0], held, started)
                return QueueClaim(row[0], start.turn_id, lease, start.model or "", start.workspace)

        return await store.run(work, retry_for=1.0)

    async def ask_cancel(self, turn_id: str) -> bool:
        async def work(conn: Conn) -> bool:
            async with conn.transaction():
                row = await (await conn.execute(_ASK_CANCEL.encode(), {"turn": turn_id})).fetchone()
                await conn.execute(f"NOTIFY {CHANNEL}")
            return row is not None

        return await self._store.run(work, retry_for=self._store.start_wait)

    async def cancels(self) -> list[str]:
        # A cancellation nobody acted on within a minute is moot (the turn ended, or its
        # member is gone): dropped, so that stale rows cost no claims.
        rows = await self._store.all(_CANCELS, retry_for=1.0)
        return [str(row[0]) for row in rows]

    async def cancelled(self, turn_id: str) -> None:
        await self._store.execute(
            "DELETE FROM jpd_turn_cancels WHERE turn_id = %s", (turn_id,), retry_for=1.0
        )

    async def queued(self) -> list[tuple[str, str, str, datetime]]:
        rows = await self._store.all(
            "SELECT conversation_id, turn_id, model, queued_at FROM jpd_turn_queue "
            "WHERE claimed_by IS NULL ORDER BY queued_at",
            retry_for=1.0,
        )
        return [(str(c), str(t), str(m), q) for c, t, m, q in rows]

    async def wait(self, timeout: float) -> bool:  # noqa: ASYNC109 - a bound, not a deadline
        """Wait up to `timeout` s for a `NOTIFY jpd_queue`; True if one came (or the
        listener was (re)connected, when one may have been missed). One task at a time."""
        fresh = self._listener is None or self._listener.closed
        try:
            if fresh:
                conn = await psycopg.AsyncConnection.connect(self._store.url, autocommit=True)
                self._listener = conn
                await conn.execute(f"LISTEN {CHANNEL}")
                return True
            listener = self._listener
            assert listener is not None
            woken = False
            async for _ in listener.notifies(timeout=timeout, stop_after=1):
                woken = True
            async for _ in listener.notifies(timeout=0.001):
                pass  # what came with it: one claim round serves them all
            return woken
        except BaseException:  # an error, or cancelled mid-statement: a new one next time
            await self.close()
            raise

    async def check(self) -> None:
        await self._store.one("SELECT 1", retry_for=self._store.start_wait)

    async def close(self) -> None:
        conn, self._listener = self._listener, None
        if conn is not None:
            with anyio.CancelScope(shield=True):
                await conn.close()
