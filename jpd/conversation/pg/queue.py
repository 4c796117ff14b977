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
import threading
import time
from datetime import datetime
from typing import TYPE_CHECKING, Any

import psycopg

from jpd.conversation.pg.lease import CLAIM_SQL
from jpd.conversation.pg.rows import start_of
from jpd.conversation.port import QueueClaim

if TYPE_CHECKING:
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
        self._listener: psycopg.Connection[Any] | None = None
        self._lock = threading.Lock()

    def enqueue(
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

        def work(conn: psycopg.Connection[Any]) -> bool:
            with conn.transaction():
                if conn.execute(_HOLD_FOR_QUEUE.encode(), params).fetchone() is None:
                    return False
                # A claimed row whose lease ended without its release (an outage): done.
                conn.execute(
                    "DELETE FROM jpd_turn_queue WHERE conversation_id = %s", (conversation_id,)
                )
                conn.execute(_ENQUEUE.encode(), params)
                conn.execute(f"NOTIFY {CHANNEL}")
            return True

        return store.run(work, retry_for=store.start_wait)

    def claim(self, turn_id: str | None = None, *, takeover: bool = True) -> QueueClaim | None:
        store = self._store
        started = time.monotonic()
        pick = {"turn": turn_id, "host": store.host}

        def work(conn: psycopg.Connection[Any]) -> QueueClaim | None:
            with conn.transaction():
                row = conn.execute(_PICK_QUEUED.encode(), pick).fetchone()
                if row is not None:
                    cid, turn, request, model, workspace, claimed_by = row
                    # A row claimed before: its claimer's lease expired (the one claim).
                    claim = store.claim_params(cid, queued=claimed_by is None)
                    held = conn.execute(CLAIM_SQL.encode(), claim).fetchone()
                    if held is None:  # the queue lost its lease: a stale row, dropped
                        conn.execute(
                            "DELETE FROM jpd_turn_queue WHERE conversation_id = %s", (cid,)
                        )
                        return None
                    conn.execute(
                        "UPDATE jpd_turn_queue SET claimed_by = %s WHERE conversation_id = %s",
                        (store.holder, cid),
                    )
                    lease = store.hold(cid, held, started)
                    return QueueClaim(cid, turn, lease, model, workspace, request)
                if turn_id is not None or not takeover:
                    return None
                expired = {"host": store.host, "grace": self._grace}
                row = conn.execute(_PICK_EXPIRED.encode(), expired).fetchone()
                if row is None:
                    return None
                start = start_of(row[1])
                held = conn.execute(
                    CLAIM_SQL.encode(), store.claim_params(row[0], queued=False)
                ).fetchone()
                if held is None or start is None:
                    return None
                lease = store.hold(row[0], held, started)
                return QueueClaim(row[0], start.turn_id, lease, start.model or "", start.workspace)

        return store.run(work, retry_for=1.0)

    def ask_cancel(self, turn_id: str) -> bool:
        def work(conn: psycopg.Connection[Any]) -> bool:
            with conn.transaction():
                row = conn.execute(_ASK_CANCEL.encode(), {"turn": turn_id}).fetchone()
                conn.execute(f"NOTIFY {CHANNEL}")
            return row is not None

        return self._store.run(work, retry_for=self._store.start_wait)

    def cancels(self) -> list[str]:
        # A cancellation nobody acted on within a minute is moot (the turn ended, or its
        # member is gone): dropped, so that stale rows cost no claims.
        rows = self._store.run(
            lambda conn: conn.execute(_CANCELS.encode()).fetchall(), retry_for=1.0
        )
        return [str(row[0]) for row in rows]

    def cancelled(self, turn_id: str) -> None:
        self._store.run(
            lambda conn: conn.execute(
                "DELETE FROM jpd_turn_cancels WHERE turn_id = %s", (turn_id,)
            ),
            retry_for=1.0,
        )

    def queued(self) -> list[tuple[str, str, str, datetime]]:
        rows = self._store.run(
            lambda conn: conn.execute(
                "SELECT conversation_id, turn_id, model, queued_at FROM jpd_turn_queue "
                "WHERE claimed_by IS NULL ORDER BY queued_at"
            ).fetchall(),
            retry_for=1.0,
        )
        return [(str(c), str(t), str(m), q) for c, t, m, q in rows]

    def wait(self, timeout: float) -> bool:
        """Block up to `timeout` s for a `NOTIFY jpd_queue`; True if one came (or the
        listener was (re)connected, when one may have been missed). One thread at a time."""
        with self._lock:
            fresh = self._listener is None or self._listener.closed
            try:
                if fresh:
                    self._listener = psycopg.connect(self._store.url, autocommit=True)
                    self._listener.execute(f"LISTEN {CHANNEL}")
                    return True
                conn = self._listener
                assert conn is not None
                woken = any(True for _ in conn.notifies(timeout=timeout, stop_after=1))
                for _ in conn.notifies(timeout=0.001):
                    pass  # what came with it: one claim round serves them all
                return woken
            except psycopg.Error:
                if self._listener is not None:
                    self._listener.close()
                self._listener = None
                raise

    def check(self) -> None:
        self._store.run(lambda conn: conn.execute("SELECT 1"), retry_for=self._store.start_wait)

    def close(self) -> None:
        with self._lock:
            if self._listener is not None:
                self._listener.close()
                self._listener = None
