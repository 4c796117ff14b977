"""Reading a streamed response body ahead of its parser (protocol.md section 7.2).

An SSE body arrives one HTTP chunk per event, and the HTTP client hands chunks over one
at a time. Parsed one at a time, every layer above the HTTP client (SSE framing, JSON,
the provider's handler, retries, the turn loop) would run once per token, and a fast
stream would cost the daemon several times what reading it costs. So a task reads the
body into a buffer while the parser works, and the parser takes everything that
arrived since its last look as one piece: a fast stream is parsed in a few large
pieces, a slow one chunk by chunk as before.

Most streams never need that task: a token every few milliseconds arrives one chunk at
a time, each read waits for the network, and a task between the body and its parser
would only add a hand-over per token (a tenth of the daemon's time with a thousand
streams). So the parser reads the body itself while its reads wait, and the task starts
only once `OPENING` reads in a row found their bytes already there (a fast stream).

Nothing waits to be batched: the reader lets the parser run whenever it waits for the
network, and, while bytes keep coming without a wait, at least every `HANDOVER`
seconds. The first chunk after a quiet spell is handed over at once, and so are the
first `OPENING` chunks of a body: the response's opening events and its first text
(or reasoning) are among them, and a reader would otherwise hold that text while it
reads on through whatever else the same network read brought.

The reader's lifetime is bound to a `read_ahead` block, which the stream's consumer
enters (`async with provider.stream(request) as events`): leaving the block stops every
reader and waits until it has. A task group must not stay open across an async
generator's `yield` (PEP 789), so none lives inside the provider's generators; and since
most model calls never start a reader, the block opens no task group either (one costs
tens of microseconds per model call, and a thousand turns make several calls each): a
reader is a task of its own, started only when needed, which the generator reading it
stops (cancels) and waits for whenever it ends, however it ends.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import AsyncGenerator, AsyncIterable, Callable
from contextlib import suppress
from types import TracebackType

import anyio
import anyio.lowlevel

from jpd.llm.base import StreamEvent
from jpd.llm.read_watch import BodyWatch

HANDOVER = 0.001
"""Longest stretch (seconds) the reader keeps read bytes from the parser."""
OPENING = 4
"""The first chunks of a body, handed over one by one; also the reads in a row that found
their bytes waiting after which a task reads ahead."""
WAITED = 0.0002
"""A read that took this long (seconds) waited for the network."""


class Readahead:
    """Starts the body readers of one `read_ahead` block."""

    def __init__(self) -> None:
        self.opened: list[AsyncGenerator[bytes, None]] = []
        """Every `batches` generator: `read_ahead` closes them as it ends, as it stops
        their reader tasks (a body read directly has no task to stop)."""

    def batches(
        self, chunks: AsyncIterable[bytes], reads: BodyWatch | None = None
    ) -> AsyncGenerator[bytes, None]:
        """Yield the bytes of `chunks` (e.g. `httpx.Response.aiter_raw()`): chunk by chunk
        while reads wait for the network, then (a fast stream) read by a task of their
        own, each time everything read since the last yield, joined.

        An error of the reader is raised here after the bytes it read before it. Closing
        this generator stops the reader, and returns once it has stopped: the body can
        then be closed safely.
        """
        pieces = self._batches(chunks, reads or BodyWatch(0.0, _nothing))
        self.opened.append(pieces)
        return pieces

    async def _batches(
        self, chunks: AsyncIterable[bytes], reads: BodyWatch
    ) -> AsyncGenerator[bytes, None]:
        reader = aiter(chunks)
        clock = time.perf_counter
        ready = 0
        """Reads in a row that found their bytes already there."""
        try:
            while ready < OPENING:
                asked = clock()
                try:
                    chunk = await anext(reader)
                except StopAsyncIteration:
                    return
                reads.reads += 1
                ready = ready + 1 if clock() - asked < WAITED else 0
                if chunk:
                    yield chunk
        except BaseException:
            await _close(reader)  # as the reader task does when it stops
            raise
        inbox = _Inbox()
        # A task of its own, not a task group's: `inbox.stop` (below, however this
        # generator ends) cancels it and waits for it, as leaving a group would.
        inbox.task = asyncio.get_running_loop().create_task(_read(reader, inbox, reads, OPENING))
        try:
            while data := await inbox.take():
                yield data
        finally:
            await inbox.stop()


class read_ahead:  # lower case: used as a function, `async with read_ahead(...)`
    """The events of `events(readahead)`, whose body readers stop when this block ends.

    A class, not `asynccontextmanager`: entered once per model call, it costs no
    generator of its own. Errors come out as they are.
    """

    __slots__ = ("_events", "_readahead", "_stream")

    def __init__(self, events: Callable[[Readahead], AsyncGenerator[StreamEvent, None]]) -> None:
        self._events = events
        self._readahead = Readahead()
        self._stream: AsyncGenerator[StreamEvent, None] | None = None

    async def __aenter__(self) -> AsyncGenerator[StreamEvent, None]:
        self._stream = self._events(self._readahead)
        return self._stream

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        try:
            if self._stream is not None:
                await self._stream.aclose()
        finally:
            for pieces in self._readahead.opened:
                with anyio.CancelScope(shield=True):
                    await pieces.aclose()


class _Inbox:
    """What the reader read and the parser has not taken yet."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []
        self.since = -math.inf
        """When the parser last took bytes, or the reader last let it run (never, yet)."""
        self.ended = False
        self.error: Exception | None = None
        self.scope = anyio.CancelScope()
        self.done = anyio.Event()
        self.waiting: anyio.Event | None = None
        self.task: asyncio.Task[None] | None = None
        """The reader (kept here too: the event loop holds its tasks weakly)."""

    def end(self, error: Exception | None) -> None:
        self.ended, self.error = True, error
        self.wake()
        self.done.set()

    async def take(self) -> bytes:
        """Everything read so far; b"" once the body ended (or the reader's error)."""
        while not self.parts:
            if self.ended:
                if self.error is not None:
                    raise self.error
                return b""
            self.waiting = anyio.Event()
            await self.waiting.wait()
        parts = self.parts
        data = parts[0] if len(parts) == 1 else b"".join(parts)
        parts.clear()  # the same list: the reader appends to it directly
        self.since = time.perf_counter()
        return data

    async def stop(self) -> None:
        """Stop the reader and wait until it has (at once if it already ended)."""
        self.scope.cancel()
        task = self.task
        with anyio.CancelScope(shield=True):
            await self.done.wait()
            if task is not None:
                await asyncio.wait((task,))  # it returns right after `end`
        if task is not None and not task.cancelled():
            # What `_read` does not hand over (not an `Exception`: a `KeyboardInterrupt`,
            # say) is raised here, as leaving a task group would have raised it.
            error = task.exception()
            if error is not None:
                raise error

    def wake(self) -> None:
        """Let the parser waiting in `take` go on."""
        if self.waiting is not None:
            self.waiting.set()
            self.waiting = None


async def _read(
    chunks: AsyncIterable[bytes], inbox: _Inbox, reads: BodyWatch, count: int = 0
) -> None:
    """Read `chunks` into `inbox`, counting them in `reads`; `count` chunks were handed
    over before."""
    error: Exception | None = None
    append, clock = inbox.parts.append, time.perf_counter
    try:
        with inbox.scope:
            async for chunk in chunks:
                if not chunk:
                    continue  # b"" is how `take` says the body ended
                append(chunk)  # once per token: no method call
                count += 1
                reads.reads += 1
                if inbox.waiting is not None:
                    inbox.wake()
                    if count > OPENING:
                        # The parser runs as soon as this task next waits, normally for
                        # the network at once (a slow stream): no extra step per chunk.
                        # Bytes the HTTP client already holds are read on until then,
                        # for HANDOVER seconds at most (below).
                        inbox.since = clock()
                        continue
                # Reading bytes the HTTP client already holds never suspends: let the
                # parser (and every other task) run at least every HANDOVER seconds.
                if count <= OPENING or clock() - inbox.since >= HANDOVER:
                    await anyio.lowlevel.checkpoint()
                    inbox.since = clock()
    except Exception as exc:  # raised to the parser, after the bytes before it
        error = exc
    finally:
        try:
            await _close(chunks)
        finally:
            inbox.end(error)


async def _close(chunks: AsyncIterable[bytes]) -> None:
    """Stopped between chunks, the body's iterator waits at a `yield`: close it now
    rather than whenever the garbage collector finds it. The body is being abandoned:
    an error while closing it changes nothing."""
    aclose = getattr(chunks, "aclose", None)
    if aclose is not None:
        with anyio.CancelScope(shield=True), suppress(Exception):
            await aclose()


async def _nothing() -> None:
    """What an unwatched body's watch would close (it is never looked at)."""
