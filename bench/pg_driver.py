"""Which psycopg driver for the fleet store (docs/scale.md, section 4): the synchronous
pool on worker threads (the store before) against `AsyncConnectionPool` on the event
loop (built), on a throwaway Postgres 15. `python -m bench.pg_driver`; not in the default run.

Measured, each alone and with the event loop half busy (25 tasks each doing 0.1 ms of
work every 5 ms, as streaming turns do): the round trip of an append statement awaited from
the loop, and an event loop's stall (the lateness of a 1 ms timer) while 20 tasks append.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio

ROOT = Path(__file__).resolve().parents[1]
SQL = "INSERT INTO bench (id, body) VALUES (%s, %s)"
ROUNDS = 2000


async def _busy(stop: asyncio.Event) -> None:
    async def one() -> None:
        while not stop.is_set():
            end = time.perf_counter() + 0.0001
            while time.perf_counter() < end:
                pass
            await asyncio.sleep(0.005)

    await asyncio.gather(*(one() for _ in range(25)))


async def _lateness(stop: asyncio.Event, out: list[float]) -> None:
    while not stop.is_set():
        start = time.perf_counter()
        await asyncio.sleep(0.001)
        out.append(time.perf_counter() - start - 0.001)


async def _measure(append: Callable[[], Awaitable[Any]], busy: bool) -> tuple[float, float]:
    """(median append round trip, p99 loop lateness while 20 tasks append), seconds."""
    stop = asyncio.Event()
    load = asyncio.create_task(_busy(stop)) if busy else None
    trips: list[float] = []
    for _ in range(ROUNDS // 4):
        start = time.perf_counter()
        await append()
        trips.append(time.perf_counter() - start)
    late: list[float] = []
    watch = asyncio.create_task(_lateness(stop, late))

    async def writer() -> None:
        for _ in range(ROUNDS // 20):
            await append()

    await asyncio.gather(*(writer() for _ in range(20)))
    stop.set()
    await watch
    if load is not None:
        await load
    late.sort()
    return statistics.median(trips), late[int(len(late) * 0.99)]


async def _run(url: str) -> list[str]:
    import psycopg
    from psycopg_pool import AsyncConnectionPool, ConnectionPool

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE TABLE bench (id uuid PRIMARY KEY, body text)")
    sync_pool = ConnectionPool(url, min_size=8, max_size=8, kwargs={"autocommit": True})
    async_pool = AsyncConnectionPool(
        url, min_size=8, max_size=8, kwargs={"autocommit": True}, open=False
    )
    await async_pool.open()
    body = "x" * 200

    def sync_append() -> None:
        with sync_pool.connection() as conn:
            conn.execute(SQL, (uuid.uuid4(), body))

    async def threaded() -> None:
        await anyio.to_thread.run_sync(sync_append)

    async def on_loop() -> None:
        async with async_pool.connection() as conn:
            await conn.execute(SQL, (uuid.uuid4(), body))

    lines = []
    try:
        for busy in (False, True):
            for name, append in (("sync pool, worker thread", threaded), ("async pool", on_loop)):
                trip, late = await _measure(append, busy)
                lines.append(
                    f"| {name} | {'busy' if busy else 'idle'} loop | "
                    f"{trip * 1000:.2f} ms | {late * 1000:.2f} ms |"
                )
    finally:
        sync_pool.close()
        await async_pool.close()
    return lines


def main() -> None:
    sys.path.insert(0, str(ROOT))
    from tests.fleet.pgserver import running_server

    with running_server() as server, tempfile.TemporaryDirectory():
        if isinstance(server, str):
            print(f"skipped: {server}")
            return
        url = server.create_database("driver")
        print("| driver | event loop | append round trip, p50 | loop lateness p99 (20 appending) |")
        print("|---|---|---|---|")
        for line in asyncio.run(_run(url)):
            print(line)


if __name__ == "__main__":
    main()
