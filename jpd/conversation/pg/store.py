"""`PgStore`: the storage port (`port.ConversationStorage`) on Postgres.

A conversation is a row of `jpd_conversations` (its summary, its seq counter, its last
turn and its turn lease) and its events are rows of `jpd_events` keyed by
(conversation, seq), each stored as the line the JSONL store would write. An append is
one statement that takes the next seq, updates the summary and inserts the event, and
only if the caller's lease epoch is still the row's (fencing) and the event id is new
(a retry after a lost reply appends nothing twice). Appends are queued and written in
order by a thread per conversation (`writer`), so the event loop never waits for the
database; they commit without waiting for the WAL flush (like the JSONL store's
flushed, unsynced write); `sync` waits for both.
Blobs (file snapshots, images) stay in the local data dir, shared through `jpd_blobs`;
a conversation's attributes (title, labels, ...) are rows of `jpd_attributes`.
"""

from __future__ import annotations

import builtins
import functools
import logging
import os
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

import psycopg
from psycopg_pool import ConnectionPool, PoolClosed, PoolTimeout

from jpd.conversation import events as ev
from jpd.conversation.attributes import Attributes
from jpd.conversation.logfile import encode_sanitized, parse_log
from jpd.conversation.metadata import ConversationMeta, aware, make_title
from jpd.conversation.paths import validate_id
from jpd.conversation.pg import attributes, blobs
from jpd.conversation.pg.lease import CLAIM_SQL, SEQ_BLOCK, PgLease
from jpd.conversation.pg.questions import PgQuestionBoard
from jpd.conversation.pg.queue import PgTurnQueue
from jpd.conversation.pg.rows import (
    APPEND_SQL,
    META_COLUMNS,
    StoreUnavailable,
    meta_of,
    redacted,
    start_of,
    turn_mark,
)
from jpd.conversation.pg.schema import migrate
from jpd.conversation.pg.slots import ModelSlots
from jpd.conversation.pg.stream import PgTurnStream
from jpd.conversation.pg.writer import OrderedWriter
from jpd.conversation.port import (
    ConversationBusy,
    ConversationExists,
    ConversationNotFound,
    LeaseLost,
    StoreUnreachable,
)
from jpd.conversation.sanitize import sanitize

log = logging.getLogger(__name__)

T = TypeVar("T")
RETRY_FOR = 30.0
"""Seconds an operation without a lease retries a lost connection (a restart)."""
PIN_GRACE = 3
"""Lease TTLs during which an expired turn with a workspace is left to its own host."""
START_WAIT = 5.0
"""Seconds a turn's start waits for an unreachable store before it is refused."""


class PgStore:
    """Conversations in Postgres; see the module docstring."""

    def __init__(
        self,
        url: str,
        root: Path,
        *,
        host: str,
        lease_ttl: float = 15.0,
        max_connections: int = 8,
        queued_appends: bool = False,
        provider_limits: Mapping[str, int] | None = None,
    ) -> None:
        self._root = Path(root)
        self.url = url
        self.host = host
        self.holder = f"{host}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.lease_ttl = lease_ttl
        self._leases: dict[str, PgLease] = {}
        self._released: dict[str, int] = {}  # conversation -> epoch of our last lease
        self._leases_lock = threading.Lock()
        self._pool: ConnectionPool = ConnectionPool(
            url,
            min_size=1,
            max_size=max_connections,
            kwargs={"autocommit": True},
            configure=self._configure,
            open=False,
            name="jpd-store",
        )
        try:
            self._pool.open(wait=True, timeout=RETRY_FOR)
        except PoolTimeout:
            self._pool.close()
            raise StoreUnavailable(
                f"cannot reach the conversation store {redacted(url)} "
                f"within {RETRY_FOR:.0f} s (see the log for why)"
            ) from None
        try:
            with self._pool.connection() as conn:
                migrate(conn)
        except BaseException:
            self._pool.close()
            raise
        self._stream = PgTurnStream(self._run, url, self.holder)
        self._writer = OrderedWriter(self._write)
        self._slots = ModelSlots(url, provider_limits or {})
        self._queued = queued_appends
        self.start_wait = START_WAIT
        self._queue = PgTurnQueue(self, PIN_GRACE * lease_ttl)
        """The daemon's appends (from its event loop) return once queued; else each
        append returns once written, raising what failed."""

    @staticmethod
    def _configure(conn: psycopg.Connection[Any]) -> None:
        # Appends are visible at once but not flushed per commit; `sync` flushes.
        conn.execute("SET synchronous_commit = off")

    @property
    def root(self) -> Path:
        return self._root

    @property
    def takeover_interval(self) -> float | None:
        """Often enough that a turn is taken over within a second or so of its expiry."""
        return min(1.0, self.lease_ttl / 3)

    def run(self, work: Callable[[psycopg.Connection[Any]], T], retry_for: float = RETRY_FOR) -> T:
        """`work` on a pooled connection, retried for up to `retry_for` s while the
        database is unreachable (for the store's parts: the queue)."""
        return self._run(work, retry_for)

    def _run(self, work: Callable[[psycopg.Connection[Any]], T], retry_for: float = RETRY_FOR) -> T:
        """`work` on a pooled connection, retried while the database is unreachable; then
        `StoreUnreachable` when the wait was short (a request's)."""
        try:
            return self._retried(work, retry_for)
        except (psycopg.OperationalError, psycopg.InterfaceError) as exc:
            if retry_for >= RETRY_FOR or isinstance(exc, psycopg.errors.QueryCanceled):
                raise
            raise StoreUnreachable(f"the conversation store cannot be reached: {exc}") from exc

    def _retried(self, work: Callable[[psycopg.Connection[Any]], T], retry_for: float) -> T:
        until = time.monotonic() + retry_for
        pause = 0.05
        while True:
            try:
                with self._pool.connection(timeout=max(0.1, until - time.monotonic())) as conn:
                    return work(conn)
            except (psycopg.OperationalError, psycopg.InterfaceError) as exc:
                if isinstance(exc, psycopg.errors.QueryCanceled | PoolClosed):
                    raise  # canceled, or this store closed (the daemon stops): no retry
                if time.monotonic() >= until:
                    raise
                log.warning("store unreachable (%s); retrying", exc)
            except Exception as exc:
                if type(exc).__name__ != "PoolTimeout" or time.monotonic() >= until:
                    raise
            time.sleep(pause)
            pause = min(pause * 2, 1.0)

    # --- conversations ---------------------------------------------------------------

    def create(self, conversation_id: str) -> None:
        cid = validate_id(conversation_id)
        stamp = ev.now()
        row = self._run(
            lambda conn: conn.execute(
                "INSERT INTO jpd_conversations (id, created_at, updated_at) VALUES (%s, %s, %s) "
                "ON CONFLICT DO NOTHING RETURNING id",
                (cid, stamp, stamp),
            ).fetchone(),
            retry_for=START_WAIT,
        )
        if row is None:
            raise ConversationExists(f"conversation already exists: {cid}")

    def exists(self, conversation_id: str) -> bool:
        cid = validate_id(conversation_id)
        return self._one("SELECT 1 FROM jpd_conversations WHERE id = %s", (cid,)) is not None

    def _one(self, sql: str, params: tuple[Any, ...]) -> tuple[Any, ...] | None:
        return self._run(lambda conn: conn.execute(sql.encode(), params).fetchone())

    def append(self, conversation_id: str, event: ev.Event) -> None:
        cid = validate_id(conversation_id)
        unknown = ev.unknown_value(event)
        if unknown is not None:
            raise ValueError(f"refusing to write unknown {unknown}")
        lease = self._leases.get(cid)
        if lease is not None and not lease.check():
            raise LeaseLost(cid, "not renewed in time")
        body = ev.dump_event(event)
        params = {
            "cid": cid,
            "eid": uuid.uuid4(),  # the same id on every retry: appended at most once
            "epoch": lease.epoch if lease is not None else None,
            "holder": self.holder,
            "ts": aware(event.timestamp),
            "title": make_title(event.content) if isinstance(event, ev.ChatRequest) else None,
            "workspace": event.workspace if isinstance(event, ev.TurnStart) else None,
            "turn": turn_mark(event),
            "interrupted": isinstance(event, ev.TurnEnd) and event.stop_reason == "interrupted",
            "type": event.type,
            "body": body,
        }

        if not self._queued and not self._writer.pending(cid):
            self._write(lease, [params])  # nothing queued before it: written here
            return
        self._writer.submit(cid, lease, params)
        if not self._queued:
            self._writer.written(cid)

    def _write(self, lease: PgLease | None, batch: builtins.list[dict[str, Any]]) -> None:
        """Appends of one conversation in one transaction, on its writer thread
        (`writer.OrderedWriter`); retried whole (each is appended at most once)."""
        cid = batch[0]["cid"]

        def append(conn: psycopg.Connection[Any]) -> None:
            for params in batch:
                if conn.execute(APPEND_SQL.encode(), params).fetchone() is None:
                    self._refused(conn, cid, params)

        def write(conn: psycopg.Connection[Any]) -> None:
            if len(batch) == 1:  # one statement: its own transaction, no BEGIN/COMMIT trips
                append(conn)
                return
            with conn.transaction():
                append(conn)

        # With a lease, retry only while it is held: past its deadline another daemon may
        # take the turn over, and this one must stop writing.
        budget = RETRY_FOR if lease is None else max(0.1, lease.deadline - time.monotonic())
        try:
            self._retried(write, budget)
        except (psycopg.OperationalError, psycopg.InterfaceError) as exc:
            if lease is not None and not lease.check():
                raise LeaseLost(cid, str(exc)) from exc
            raise

    def appends_pending(self, conversation_id: str) -> bool:
        """Whether appends of the conversation are queued, not yet written (or failed)."""
        return self._writer.pending(conversation_id)

    def written(self, conversation_id: str) -> None:
        """Wait until the conversation's appends are written (raise what failed), and
        share its new blobs: a turn's tools run only once what it did so far, the file
        snapshots of its earlier tools included, is in the store (a member taking the
        turn over undoes them)."""
        cid = validate_id(conversation_id)
        self._writer.written(cid)
        try:
            self.share_blobs(cid)
        except (psycopg.Error, OSError) as exc:  # shared again when the turn ends
            log.warning("could not share the files of %s: %s", cid, exc)

    def unwritten(self, conversation_id: str) -> int | None:
        """The mark of the conversation's newest append not yet committed (None: all
        are, or none will be); see `writer.OrderedWriter`."""
        return self._writer.unwritten(conversation_id)

    def when_written(
        self, conversation_id: str, mark: int, callback: Callable[[int, bool], None]
    ) -> None:
        """`callback(done, ok)` once the appends up to `mark` are committed (from any
        thread)."""
        self._writer.when_written(conversation_id, mark, callback)

    def _refused(self, conn: psycopg.Connection[Any], cid: str, params: dict[str, Any]) -> None:
        """Why an append inserted nothing: a retry of one that did (fine), a missing
        conversation, or a lease this store does not hold (fenced off)."""
        done = conn.execute(
            "SELECT 1 FROM jpd_events WHERE conversation_id = %s AND event_id = %s",
            (cid, params["eid"]),
        ).fetchone()
        if done is not None:
            return
        row = conn.execute(
            "SELECT lease_holder, lease_epoch FROM jpd_conversations WHERE id = %s", (cid,)
        ).fetchone()
        if row is None:
            raise ConversationNotFound(cid)
        lease = self._leases.get(cid)
        if lease is not None:
            lease._lose(f"epoch {params['epoch']} is stale (now {row[1]} of {row[0]})")
        raise LeaseLost(cid, f"the turn lease is held by {row[0]} (epoch {row[1]})")

    def sync(self, conversation_id: str) -> None:
        cid = validate_id(conversation_id)

        def flush(conn: psycopg.Connection[Any]) -> None:
            with conn.transaction():
                # A commit that waits for the WAL flush covers every earlier commit.
                conn.execute("SET LOCAL synchronous_commit = on")
                conn.execute("SELECT pg_current_xact_id()")

        self._writer.written(cid)
        if not self.exists(cid):
            raise ConversationNotFound(cid)
        self._run(flush)

    def sync_entries(self, conversation_id: str) -> None:
        """Nothing to do: a created row is as durable as the next `sync` makes it."""
        validate_id(conversation_id)

    def _lines(self, cid: str) -> bytes:
        self._writer.written(cid, check=False)  # read what was appended

        def read(conn: psycopg.Connection[Any]) -> bytes:
            with conn.transaction():
                if (
                    conn.execute("SELECT 1 FROM jpd_conversations WHERE id = %s", (cid,)).fetchone()
                    is None
                ):
                    raise ConversationNotFound(cid)
                cur = conn.execute(
                    "SELECT body FROM jpd_events WHERE conversation_id = %s ORDER BY seq", (cid,)
                )
                return "".join(f"{row[0]}\n" for row in cur).encode()

        return self._run(read)

    def load(self, conversation_id: str, *, sanitized: bool = True) -> builtins.list[ev.Event]:
        cid = validate_id(conversation_id)
        events = parse_log(self._lines(cid), f"store:{cid}")
        return sanitize(events) if sanitized else events

    def load_encoded(self, conversation_id: str) -> bytes:
        cid = validate_id(conversation_id)
        return encode_sanitized(self._lines(cid), f"store:{cid}")

    def delete(self, conversation_id: str) -> None:
        cid = validate_id(conversation_id)
        self._writer.forget(cid)
        row = self._one(
            "DELETE FROM jpd_conversations WHERE id = %s AND (lease_holder IS NULL "
            "OR lease_expires < now() OR lease_holder = %s) RETURNING id",
            (cid, self.holder),
        )
        if row is None:
            if self.exists(cid):
                raise ConversationBusy(f"conversation {cid} has a turn running in another jpd")
            raise ConversationNotFound(cid)

    def metadata(self, conversation_id: str) -> ConversationMeta:
        cid = validate_id(conversation_id)
        row = self._one(f"SELECT {META_COLUMNS} FROM jpd_conversations WHERE id = %s", (cid,))
        if row is None:
            raise ConversationNotFound(cid)
        return meta_of(row)

    def release(self, conversation_id: str) -> None:
        """Nothing is kept in memory per conversation."""
        validate_id(conversation_id)

    def close(self) -> None:
        """Write what is queued, give back every lease still held and close the
        connections."""
        self._writer.settle()
        for lease in builtins.list(self._leases.values()):
            lease.release()
        self._stream.close()
        self._queue.close()
        self._pool.close()

    def conversation_dir(self, conversation_id: str) -> Path:
        return self._root / "conversations" / validate_id(conversation_id)

    # --- turns ---------------------------------------------------------------------

    def lock_turn(self, conversation_id: str) -> PgLease | None:
        cid = validate_id(conversation_id)
        started = time.monotonic()
        params = self.claim_params(cid, queued=False)
        # A bounded wait: `turn/start` during an outage answers within seconds.
        row = self._run(
            lambda conn: conn.execute(CLAIM_SQL.encode(), params).fetchone(), retry_for=START_WAIT
        )
        if row is None:
            if not self.exists(cid):
                raise ConversationNotFound(cid)
            return None
        return self.hold(cid, row, started)

    def claim_params(self, cid: str, *, queued: bool) -> dict[str, Any]:
        """The parameters of `lease.CLAIM_SQL` for this member."""
        return {
            "cid": cid,
            "holder": self.holder,
            "ttl": self.lease_ttl,
            "block": SEQ_BLOCK,
            "queued": queued,
        }

    def hold(self, cid: str, row: tuple[Any, ...], started: float) -> PgLease:
        """The lease `CLAIM_SQL` returned `row` for (claimed at `started`, monotonic),
        renewed from now on and fencing this member's appends."""
        self._writer.forget(cid)  # a new holder: an earlier holder's write error is not its
        lease = PgLease(
            self._pool,
            cid,
            self.holder,
            int(row[0]),
            self.lease_ttl,
            started,
            self._forget,
            seq_floor=int(row[1]),
        )
        with self._leases_lock:
            self._leases[cid] = lease
        return lease

    def _forget(self, lease: PgLease) -> None:
        with self._leases_lock:
            if self._leases.get(lease.conversation_id) is lease:
                del self._leases[lease.conversation_id]
            if not lease.lost:
                self._released[lease.conversation_id] = lease.epoch

    def unchanged_since_mine(self, conversation_id: str) -> bool:
        """Whether the lease's epoch is still that of this member's last lease there,
        released: every claim raises it, so nobody else wrote a turn since."""
        cid = validate_id(conversation_id)
        mine = self._released.get(cid)
        if mine is None:
            return False
        row = self._one("SELECT lease_epoch FROM jpd_conversations WHERE id = %s", (cid,))
        return row is not None and int(row[0]) == mine

    def last_turn(self, conversation_id: str) -> tuple[bool, ev.TurnStart | None]:
        cid = validate_id(conversation_id)
        row = self._one(
            "SELECT turn_open, resumable_start FROM jpd_conversations WHERE id = %s", (cid,)
        )
        if row is None:
            return False, None
        return bool(row[0]), None if row[0] else start_of(row[1])

    def attributes(self, conversation_id: str) -> Attributes:
        return attributes.read(self._run, validate_id(conversation_id))

    def update_attributes(
        self, conversation_id: str, change: Callable[[Attributes], Attributes]
    ) -> Attributes:
        return attributes.update(self._run, validate_id(conversation_id), change)

    def all_attributes(self) -> dict[str, Attributes]:
        return attributes.read_all(self._run)

    def share_blobs(self, conversation_id: str) -> None:
        blobs.share(self._run, conversation_id, self.conversation_dir(conversation_id))

    def fetch_blobs(self, conversation_id: str) -> None:
        blobs.fetch(self._run, conversation_id, self.conversation_dir(conversation_id))

    def turns_elsewhere(self) -> builtins.list[tuple[str, ev.TurnStart]]:
        # A short retry: `turn/list` answers with this member's turns during an outage.
        rows = self._run(
            lambda conn: conn.execute(
                "SELECT id, last_start FROM jpd_conversations WHERE turn_open "
                "AND lease_holder <> %s AND lease_expires > now()",
                (self.holder,),
            ).fetchall(),
            retry_for=1.0,
        )
        found = [(str(cid), start_of(line)) for cid, line in rows]
        return [(cid, start) for cid, start in found if start is not None]

    def limits_model_calls(self, provider: str) -> bool:
        return self._slots.limited(provider)

    def model_slot(self, provider: str, stop: threading.Event) -> Callable[[], None] | None:
        return self._slots.acquire(provider, stop)

    def turn_queue(self) -> PgTurnQueue:
        return self._queue

    def turn_stream(self) -> PgTurnStream:
        return self._stream

    def question_board(self) -> PgQuestionBoard:
        return PgQuestionBoard(self._run, self.holder, functools.partial(self._run, retry_for=1.0))

    def scan_turns(self) -> Iterator[tuple[str, bool, ev.TurnStart | None]]:
        rows = self._run(
            lambda conn: conn.execute(
                "SELECT id, turn_open, resumable_start FROM jpd_conversations "
                "WHERE turn_open OR resumable_start IS NOT NULL"
            ).fetchall()
        )
        for cid, is_open, start in rows:
            yield cid, bool(is_open), None if is_open else start_of(start)

    def lease_expiry(self, conversation_id: str) -> datetime | None:
        """When the conversation's turn lease expires (None: free); for tests and tools."""
        row = self._one(
            "SELECT lease_expires FROM jpd_conversations WHERE id = %s", (conversation_id,)
        )
        return None if row is None else row[0]

    # Defined last: inside the class body this name shadows the builtin `list`.
    def list(self) -> builtins.list[ConversationMeta]:
        rows = self._run(
            lambda conn: conn.execute(
                f"SELECT {META_COLUMNS} FROM jpd_conversations ORDER BY updated_at DESC, id DESC"
            ).fetchall()
        )
        return [meta_of(row) for row in rows]
