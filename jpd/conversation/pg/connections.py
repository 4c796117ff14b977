"""The connections of `store.PgStore`: its pool (psycopg's async API on an
`AsyncConnectionPool`, on the daemon's event loop), opened (and the schema migrated)
by the store's `open`, and its statements retried while the database is unreachable (a
restart). Every part of the store (`appends`, `reads`, `claims`, `fleet`, the queue,
the stream, the question board) runs its statements through `PgConnections.run`."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import anyio
import psycopg
from psycopg_pool import AsyncConnectionPool, PoolClosed, PoolTimeout

from jpd.conversation.paths import validate_id
from jpd.conversation.pg.rows import StoreUnavailable, redacted
from jpd.conversation.pg.schema import migrate
from jpd.conversation.port import StoreUnreachable

log = logging.getLogger(__name__)

T = TypeVar("T")
Conn = psycopg.AsyncConnection[Any]
Work = Callable[[Conn], Awaitable[T]]
Run = Callable[[Work[T]], Awaitable[T]]
"""How a part of the store runs `work` on a pooled connection (`PgConnections.run`)."""
RETRY_FOR = 30.0
"""Seconds an operation without a lease retries a lost connection (a restart)."""
START_WAIT = 5.0
"""Seconds a turn's start waits for an unreachable store before it is refused."""


async def open_pool(url: str, max_connections: int) -> AsyncConnectionPool[Conn]:
    """The store's pool, open and its schema migrated; `StoreUnavailable` when the
    database cannot be reached within `RETRY_FOR` s."""
    pool: AsyncConnectionPool[Conn] = AsyncConnectionPool(
        url,
        min_size=1,
        max_size=max_connections,
        kwargs={"autocommit": True},
        configure=_configure,
        open=False,
        name="jpd-store",
    )
    try:
        await pool.open(wait=True, timeout=RETRY_FOR)
    except PoolTimeout:
        await pool.close()
        raise StoreUnavailable(
            f"cannot reach the conversation store {redacted(url)} "
            f"within {RETRY_FOR:.0f} s (see the log for why)"
        ) from None
    try:
        async with pool.connection() as conn:
            await migrate(conn)
    except BaseException:
        await pool.close()
        raise
    return pool


async def _configure(conn: Conn) -> None:
    # Appends are visible at once but not flushed per commit; `sync` flushes.
    await conn.execute("SET synchronous_commit = off")


class PgConnections:
    """The pool and the local data dir every part of `store.PgStore` shares."""

    url: str
    _pool: AsyncConnectionPool[Conn] | None
    _opening: asyncio.Lock | None
    _root: Path
    _max_connections: int

    @property
    def root(self) -> Path:
        return self._root

    def conversation_dir(self, conversation_id: str) -> Path:
        return self._root / "conversations" / validate_id(conversation_id)

    async def open(self) -> None:
        """Connect the pool and migrate the schema (once; later calls return at once);
        `StoreUnavailable` when the database cannot be reached."""
        if self._pool is not None:
            return
        if self._opening is None:
            self._opening = asyncio.Lock()
        async with self._opening:
            if self._pool is None:
                self._pool = await open_pool(self.url, self._max_connections)
                self._opened()

    def _opened(self) -> None:
        """Start what runs while the store is open (the store's own tasks)."""

    async def pool(self) -> AsyncConnectionPool[Conn]:
        """The open pool (opened by the first call that needs it)."""
        if self._pool is None:
            await self.open()
        assert self._pool is not None
        return self._pool

    async def run(self, work: Work[T], retry_for: float = RETRY_FOR) -> T:
        """`work` on a pooled connection, retried for up to `retry_for` s while the
        database is unreachable; then `StoreUnreachable` when the wait was short (a
        request's)."""
        try:
            return await self._retried(work, retry_for)
        except (psycopg.OperationalError, psycopg.InterfaceError) as exc:
            if retry_for >= RETRY_FOR or isinstance(exc, psycopg.errors.QueryCanceled):
                raise
            raise StoreUnreachable(f"the conversation store cannot be reached: {exc}") from exc

    async def _retried(self, work: Work[T], retry_for: float) -> T:
        pool = await self.pool()
        until = time.monotonic() + retry_for
        pause = 0.05
        while True:
            try:
                async with pool.connection(timeout=max(0.1, until - time.monotonic())) as conn:
                    return await work(conn)
            except (psycopg.OperationalError, psycopg.InterfaceError) as exc:
                if isinstance(exc, psycopg.errors.QueryCanceled | PoolClosed):
                    raise  # canceled, or this store closed (the daemon stops): no retry
                if time.monotonic() >= until:
                    raise
                log.warning("store unreachable (%s); retrying", exc)
            except Exception as exc:
                if type(exc).__name__ != "PoolTimeout" or time.monotonic() >= until:
                    raise
            await anyio.sleep(pause)
            pause = min(pause * 2, 1.0)

    async def one(
        self, sql: str, params: Sequence[Any] | dict[str, Any] = (), retry_for: float = RETRY_FOR
    ) -> tuple[Any, ...] | None:
        """The first row of one statement (None: no row)."""

        async def work(conn: Conn) -> tuple[Any, ...] | None:
            return await (await conn.execute(sql.encode(), params)).fetchone()

        return await self.run(work, retry_for)

    async def all(
        self, sql: str, params: Sequence[Any] | dict[str, Any] = (), retry_for: float = RETRY_FOR
    ) -> list[tuple[Any, ...]]:
        """Every row of one statement."""

        async def work(conn: Conn) -> list[tuple[Any, ...]]:
            return await (await conn.execute(sql.encode(), params)).fetchall()

        return await self.run(work, retry_for)

    async def execute(
        self, sql: str, params: Sequence[Any] | dict[str, Any] = (), retry_for: float = RETRY_FOR
    ) -> None:
        """One statement, its rows (if any) unread."""

        async def work(conn: Conn) -> None:
            await conn.execute(sql.encode(), params)

        await self.run(work, retry_for)

    async def exists(self, conversation_id: str) -> bool:
        cid = validate_id(conversation_id)
        return await self.one("SELECT 1 FROM jpd_conversations WHERE id = %s", (cid,)) is not None
