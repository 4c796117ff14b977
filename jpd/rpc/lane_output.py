"""The writer thread of a connection's control lane (jpd.rpc.lane): it writes the queued
events as soon as the client reads them, and the control requests' answers ahead of
them; an answer finds an idle output written at once by the thread that made it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import select
import threading
from collections import deque

import anyio

log = logging.getLogger(__name__)

QUEUE_BYTES = 1 << 20
"""Bytes of frames queued between the loop and a thread before the producer waits."""
_WRITE_BYTES = 32 * 1024
"""Bytes of queued batches joined into one write: an answer waits for one such write
(while the client reads it), not for everything queued."""


def _write_all(fd: int, data: bytes) -> None:
    """One `write` for all of `data` on a blocking fd (one GIL hand-over per write); on a
    non-blocking one, the rest once it has room."""
    view = memoryview(data)
    poller: select.poll | None = None
    while view:
        with contextlib.suppress(BlockingIOError):
            view = view[os.write(fd, view) :]
        if view:
            if poller is None:
                poller = select.poll()
                poller.register(fd, select.POLLOUT)
            poller.poll()


class SharedFd:
    """A file descriptor closed once its last holder let go: a thread may still poll or
    write it after its connection ended, and a number closed under it could be reused
    by the next client's socket (its bytes would go to, or come from, the wrong client).
    Its creator holds it once; each thread holds it while it runs."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self._holders = 1
        self._lock = threading.Lock()

    def hold(self) -> None:
        with self._lock:
            self._holders += 1

    def release(self) -> None:
        with self._lock:
            self._holders -= 1
            last = self._holders == 0
        if last:
            os.close(self.fd)


def _writable(fd: int) -> bool:
    try:
        return bool(select.select([], [fd], [], 0)[1])
    except (OSError, ValueError):
        return False


class ThreadedOutput:
    """A connection's output written by a daemon thread (a blocked write never holds up
    the process's exit). `send` queues a batch of whole frames and returns, waiting only
    while `limit` bytes are queued (the caller's stall timeout then runs); the thread
    writes it as soon as the client reads, with no event-loop round in between.
    `send_first` (from any thread) puts an answer ahead of every queued batch.

    With `direct` (a pipe or socket), `send` first writes on the loop what the fd takes
    at once (`PIPE_BUF` bytes a time on a blocking pipe, where such a write never
    blocks), when nothing is queued or being written, and on a socket `send_first` does
    so in the calling thread: a client that keeps up costs no thread hand-over (which
    may wait for the GIL, or for a core of a busy machine). The thread writes the rest
    of a frame cut short before anything else. It starts the first time something
    waits for it (a new socket client's `initialize` is answered before it exists)."""

    def __init__(
        self,
        fd: int,
        limit: int = QUEUE_BYTES,
        *,
        direct: bool = False,
        shared: SharedFd | None = None,
    ) -> None:
        self.fd = fd
        self._shared = shared
        """Held while the thread runs (a socket's duplicate, closed by its last user)."""
        self._limit = limit
        self._direct = direct
        self._blocking = os.get_blocking(fd)
        self._rest = b""
        """The end of a batch the loop began writing: written before anything else."""
        self._writing = False
        """The loop or the thread is writing."""
        self._first: deque[bytes] = deque()
        self._pending: deque[bytes] = deque()
        self._bytes = 0
        """Bytes in `_pending` and `_rest`."""
        self._cond = threading.Condition()
        self._room: anyio.Event | None = None
        self._closed = False
        self._started = False
        """`start` was called: the thread runs, or starts when something is queued."""
        self._running = False
        self.broken = False
        """A write failed: the client is gone."""
        self._loop: asyncio.AbstractEventLoop | None = None

    def start(self, loop: asyncio.AbstractEventLoop | None = None) -> None:
        """Serve the event loop that calls `send` (from, or for, it); the thread itself
        starts once something is queued."""
        self._loop = loop if loop is not None else asyncio.get_running_loop()
        if self._shared is not None:
            self._shared.hold()  # the thread's, taken now: the fd must outlive its start
        with self._cond:
            self._started = True
            if self._queued() or self._closed:
                self._run_thread()

    def _run_thread(self) -> None:
        """Start the thread, once (under `_cond`)."""
        if self._running or not self._started:
            return
        self._running = True
        name = f"jpd-write-{self.fd}"
        threading.Thread(target=self._held, name=name, daemon=True).start()

    def _queued(self) -> bool:
        return bool(self._rest or self._first or self._pending)

    def _held(self) -> None:
        try:
            self._run()
        finally:
            if self._shared is not None:
                self._shared.release()

    async def send(self, data: bytes) -> None:
        """Write or queue `data`; BrokenPipeError once a write failed."""
        if self._direct and self._write_direct(data):
            await self._wait(self._limit)  # the end of `data` may be queued
            return
        with self._cond:
            self._pending.append(data)
            self._bytes += len(data)
            self._run_thread()
            self._cond.notify()
        await self._wait(self._limit)

    def _write_direct(self, data: bytes) -> bool:
        """Write what the fd takes now, queueing the rest for the thread; False if
        something else is queued or being written (then `data` must queue behind it)."""
        with self._cond:
            if self._writing or self._queued() or self.broken:
                return False
            self._writing = True
        view = memoryview(data)
        try:
            if not self._blocking:  # one write: it takes what fits
                with contextlib.suppress(BlockingIOError):
                    view = view[os.write(self.fd, view) :]
            while self._blocking and view and _writable(self.fd):
                view = view[os.write(self.fd, view[: select.PIPE_BUF]) :]
        except OSError as exc:
            log.warning("client connection lost while writing: %s", exc)
            self.broken = True
        with self._cond:
            self._writing = False
            if view and not self.broken:
                self._rest = bytes(view)
                self._bytes += len(self._rest)
            if self._queued():
                self._run_thread()
                self._cond.notify()
            elif self._closed:
                self._cond.notify()  # it waited for this write to end: it ends now
            # Else the thread has nothing to do: no wake-up (and GIL hand-over) per write.
        if self.broken:
            raise BrokenPipeError("the client's output broke")
        return True

    def send_first(self, frame: bytes) -> None:
        """Write `frame` now if the output is idle, else queue it ahead of the batches
        (from any thread: the reader's answers). Only on a non-blocking fd (a socket):
        there one write takes what fits; on a blocking pipe a large answer would take
        a write per `PIPE_BUF`, each waiting for the GIL, where the thread takes one."""
        if self._direct and not self._blocking:
            with contextlib.suppress(BrokenPipeError):
                if self._write_direct(frame):
                    return
        with self._cond:
            self._first.append(frame)
            self._run_thread()
            self._cond.notify()

    async def drain(self) -> None:
        """Wait until every batch queued is written (or the output broke)."""
        with contextlib.suppress(BrokenPipeError):
            await self._wait(0)

    def close(self) -> None:
        """End the thread once what is queued is written."""
        with self._cond:
            self._closed = True
            if self._started and not self._running and not self._queued():
                self._started = False  # no thread will: its hold on the fd goes now
                release = True
            else:
                self._run_thread()
                release = False
            self._cond.notify()
        if release and self._shared is not None:
            self._shared.release()

    async def _wait(self, limit: int) -> None:
        while True:
            with self._cond:
                if self.broken:
                    raise BrokenPipeError("the client's output broke")
                if self._bytes <= limit:
                    return
                room = self._room = anyio.Event()
            await room.wait()

    def _run(self) -> None:
        while True:
            with self._cond:
                while self._writing or not (self._queued() or self._closed):
                    self._cond.wait()
                if self._rest:  # a frame begun elsewhere: nothing may come in between
                    data, self._rest = self._rest, b""
                    taken = len(data)
                elif self._first:
                    data, taken = b"".join(self._first), 0
                    self._first.clear()
                elif self._pending:
                    data = self._take()
                    taken = len(data)
                else:
                    return
                self._writing = True
            try:
                _write_all(self.fd, data)
            except OSError as exc:
                log.warning("client connection lost while writing: %s", exc)
                self.broken = True
            with self._cond:
                self._writing = False
                self._bytes -= taken
                room, self._room = self._room, None
            if room is not None:
                self._wake(room)
            if self.broken:
                return

    def _take(self) -> bytes:
        """Queued batches (whole frames), up to `_WRITE_BYTES` unless one is larger."""
        pending = self._pending
        parts = [pending.popleft()]
        size = len(parts[0])
        while pending and size + len(pending[0]) <= _WRITE_BYTES:
            size += len(pending[0])
            parts.append(pending.popleft())
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def _wake(self, event: anyio.Event) -> None:
        assert self._loop is not None
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits
            self._loop.call_soon_threadsafe(event.set)
