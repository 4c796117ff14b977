"""A stalled response body, found by one timer per event loop instead of one per chunk.

aiohttp (httpx's transport for model calls, `http_client.http_client`) re-arms its read
timeout on every chunk it receives: a timer cancelled, made and scheduled again, which
with a thousand streams of a token per chunk was a twentieth of the daemon's time. So a
model call is sent without a read timeout once its headers are in (they have one
deadline of their own), each streamed body counts its reads (`BodyWatch.reads`, one
increment per chunk), and one timer per loop looks at every body each `PERIOD` seconds
(at most): a body whose count has not moved for its timeout is closed, which fails its
reader, and the caller reports the timeout as before (`BodyWatch.expired`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from anyio.lowlevel import RunVar

log = logging.getLogger(__name__)

PERIOD = 1.0
"""Longest time (seconds) between two looks; a shorter timeout looks more often."""


class BodyWatch:
    """One streamed body: its reader counts `reads`; `expired` once it was closed for
    staying silent `limit` seconds."""

    __slots__ = ("_close", "_seen", "_since", "expired", "limit", "reads")

    def __init__(self, limit: float, close: Callable[[], Awaitable[object]]) -> None:
        self.reads = 0
        self.limit = limit
        self.expired = False
        self._close = close
        self._seen = -1
        self._since = 0.0


class _Watchdog:
    """The timer of every watched body on one event loop; it runs only while some are."""

    _current: RunVar[_Watchdog | None] = RunVar("jpd_read_watchdog", default=None)

    def __init__(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._bodies: set[BodyWatch] = set()
        self._period = PERIOD
        self._timer: asyncio.TimerHandle | None = None
        self._closing: set[asyncio.Task[object]] = set()

    @classmethod
    def current(cls) -> _Watchdog:
        dog = cls._current.get()
        if dog is None:
            dog = _Watchdog()
            cls._current.set(dog)
        return dog

    def add(self, body: BodyWatch) -> None:
        body._since = self._loop.time()
        self._bodies.add(body)
        period = min(PERIOD, body.limit / 4)
        if self._timer is None or period < self._period:
            if self._timer is not None:
                self._timer.cancel()
            self._period = min(self._period, period)
            self._timer = self._loop.call_later(self._period, self._look)

    def remove(self, body: BodyWatch) -> None:
        self._bodies.discard(body)

    def _look(self) -> None:
        now = self._loop.time()
        for body in list(self._bodies):
            if body.reads != body._seen:
                body._seen, body._since = body.reads, now
            elif now - body._since >= body.limit:
                self._bodies.discard(body)
                body.expired = True
                task: asyncio.Task[object] = self._loop.create_task(_close(body))
                self._closing.add(task)
                task.add_done_callback(self._closing.discard)
        if self._bodies:
            self._timer = self._loop.call_later(self._period, self._look)
        else:
            self._timer, self._period = None, PERIOD


async def _close(body: BodyWatch) -> object:
    try:
        return await body._close()
    except Exception:  # the body is abandoned: its reader fails either way
        log.debug("closing a stalled body failed", exc_info=True)
        return None


def watch(limit: float, close: Callable[[], Awaitable[object]]) -> BodyWatch:
    """Watch a body from now: `close` is awaited (in a task of its own) once it has been
    silent for `limit` seconds. `unwatch` it when it is done."""
    body = BodyWatch(limit, close)
    _Watchdog.current().add(body)
    return body


def unwatch(body: BodyWatch) -> None:
    """Stop watching `body` (read to its end, or abandoned)."""
    _Watchdog.current().remove(body)
