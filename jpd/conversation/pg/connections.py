"""The connections of `store.PgStore`: its pool, opened (and the schema migrated) with
the store, and its statements retried while the database is unreachable (a restart).
Every part of the store (`appends`, `reads`, `claims`, `fleet`, the queue, the stream,
the question board) runs its statements through `PgConnections.run`."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import psycopg
from psycopg_pool import ConnectionPool, PoolClosed, PoolTimeout

from jpd.conversation.paths import validate_id
from jpd.conversation.pg.rows import StoreUnavailable, redacted
from jpd.conversation.pg.schema import migrate
from jpd.conversation.port import StoreUnreachable

log = logging.getLogger(__name__)

T = TypeVar("T")
RETRY_FOR = 30.0
"""Seconds an operation without a lease retries a lost connection (a restart)."""
START_WAIT = 5.0
"""Seconds a turn's start waits for an unreachable store before it is refused."""


def open_pool(url: str, max_connections: int) -> ConnectionPool:
    """The store's pool, open and its schema migrated; `StoreUnavailable` when the
    database cannot be reached within `RETRY_FOR` s."""
    pool: ConnectionPool = ConnectionPool(
        url,
        min_size=1,
        max_size=max_connections,
        kwargs={"autocommit": True},
        configure=_configure,
        open=False,
        name="jpd-store",
    )
    try:
        pool.open(wait=True, timeout=RETRY_FOR)
    except PoolTimeout:
        pool.close()
        raise StoreUnavailable(
            f"cannot reach the conversation store {redacted(url)} "
            f"within {RETRY_FOR:.0f} s (see the log for why)"
        ) from None
    try:
        with pool.connection() as conn:
            migrate(conn)
    except BaseException:
        pool.close()
        raise
    return pool


def _configure(conn: psycopg.Connection[Any]) -> None:
    # Appends are visible at once but not flushed per commit; `sync` flushes.
    conn.execute("SET synchronous_commit = off")


class PgConnections:
    """The pool and the local data dir every part of `store.PgStore` shares."""

    _pool: ConnectionPool
    _root: Path

    @property
    def root(self) -> Path:
        return self._root

    def conversation_dir(self, conversation_id: str) -> Path:
        return self._root / "conversations" / validate_id(conversation_id)

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

    def _one(self, sql: str, params: tuple[Any, ...]) -> tuple[Any, ...] | None:
        return self._run(lambda conn: conn.execute(sql.encode(), params).fetchone())

    def exists(self, conversation_id: str) -> bool:
        cid = validate_id(conversation_id)
        return self._one("SELECT 1 FROM jpd_conversations WHERE id = %s", (cid,)) is not None
