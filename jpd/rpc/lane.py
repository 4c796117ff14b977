"""The control lane of a connection on file descriptors (stdio): a reader thread that
answers control requests itself, and a writer thread that puts those answers ahead of
the queued events.

While a thousand turns stream, the event loop is saturated: anything that waits for a
loop round waits hundreds of milliseconds. So a thread reads the input, cuts frames
(`FrameSplitter`, the same rules as on the loop), and offers each to `answer` (the rpc
boundary's control requests, protocol.md section 3); an answer goes to the writer
thread, which writes it before its next batch of events. Only the writer thread writes,
so frames never interleave; a thread gets the GIL within the interpreter's switch
interval even when the loop is busy. Every other frame goes to the loop, in order,
through a bounded queue.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import select
import threading
from collections import deque
from collections.abc import AsyncIterator, Callable

import anyio

from jpd.rpc.framing import Frame, FrameSplitter

log = logging.getLogger(__name__)

Answer = Callable[[bytes], bytes | None]
"""Called in the reader thread with each message body: the frame answering it, b"" if
it is answered later (on the loop), or None to hand the message to the event loop."""

Action = Callable[[], object]
"""Run on the loop in the order of the frames (`ThreadedInput.in_order`)."""

_POLL_MS = 500
"""How often a reader waiting for input looks whether its connection ended."""
_QUEUE_BYTES = 1 << 20
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
    at once, `PIPE_BUF` bytes a time (such a write never blocks), when nothing is queued
    or being written: a client that keeps up costs no thread hand-over (which may wait
    the interpreter's switch interval for the GIL). The thread writes the rest of a frame
    cut short before anything else."""

    def __init__(
        self,
        fd: int,
        limit: int = _QUEUE_BYTES,
        *,
        direct: bool = False,
        shared: SharedFd | None = None,
    ) -> None:
        self.fd = fd
        self._shared = shared
        """Held while the thread runs (a socket's duplicate, closed by its last user)."""
        self._limit = limit
        self._direct = direct
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
        self.broken = False
        """A write failed: the client is gone."""
        self._loop: asyncio.AbstractEventLoop | None = None

    def start(self, loop: asyncio.AbstractEventLoop | None = None) -> None:
        """Start the writer thread (on, or for, the event loop that calls `send`)."""
        self._loop = loop if loop is not None else asyncio.get_running_loop()
        name = f"jpd-write-{self.fd}"
        if self._shared is not None:
            self._shared.hold()
        threading.Thread(target=self._held, name=name, daemon=True).start()

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
            self._cond.notify()
        await self._wait(self._limit)

    def _write_direct(self, data: bytes) -> bool:
        """Write what the fd takes now, queueing the rest for the thread; False if
        something else is queued or being written (then `data` must queue behind it)."""
        with self._cond:
            if self._writing or self._rest or self._first or self._pending or self.broken:
                return False
            self._writing = True
        view = memoryview(data)
        try:
            while view and _writable(self.fd):
                view = view[os.write(self.fd, view[: select.PIPE_BUF]) :]
        except OSError as exc:
            log.warning("client connection lost while writing: %s", exc)
            self.broken = True
        with self._cond:
            self._writing = False
            if view and not self.broken:
                self._rest = bytes(view)
                self._bytes += len(self._rest)
            self._cond.notify()
        if self.broken:
            raise BrokenPipeError("the client's output broke")
        return True

    def send_first(self, frame: bytes) -> None:
        """Queue `frame` ahead of the batches (from the reader thread)."""
        with self._cond:
            self._first.append(frame)
            self._cond.notify()

    async def drain(self) -> None:
        """Wait until every batch queued is written (or the output broke)."""
        with contextlib.suppress(BrokenPipeError):
            await self._wait(0)

    def close(self) -> None:
        """End the thread once what is queued is written."""
        with self._cond:
            self._closed = True
            self._cond.notify()

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
                while self._writing or not (
                    self._rest or self._first or self._pending or self._closed
                ):
                    self._cond.wait()
                if self._rest:  # a frame the loop began: nothing may come in between
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


class ThreadedInput:
    """A connection's input read by a daemon thread (a blocked read never holds up the
    process's exit). `start` it on the event loop; the loop reads what the thread did
    not answer from `frames`, in order; `stop` ends the thread's work."""

    def __init__(self, fd: int, output: ThreadedOutput, shared: SharedFd | None = None) -> None:
        self.fd = fd
        self._output = output
        self._shared = shared
        self._items: deque[Frame | Action | None] = deque()
        self._bytes = 0
        self._cond = threading.Condition()
        self._wake: anyio.Event | None = None
        self._stopped = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self.answer: Answer | None = None
        """What the thread asks about each message, once started."""

    def start(
        self, max_body: int, answer: Answer, loop: asyncio.AbstractEventLoop | None = None
    ) -> None:
        """Start reading (on, or for, the event loop that will read `frames`)."""
        self.answer = answer
        self._loop = loop if loop is not None else asyncio.get_running_loop()
        if self._shared is not None:
            self._shared.hold()
        thread = threading.Thread(
            target=self._held, args=(max_body, answer), name=f"jpd-read-{self.fd}", daemon=True
        )
        thread.start()

    def _held(self, max_body: int, answer: Answer) -> None:
        try:
            self._run(max_body, answer)
        finally:
            if self._shared is not None:
                self._shared.release()

    def in_order(self, action: Action) -> None:
        """From the reader thread: run `action` on the loop after the frames handed over
        so far and before the next (the effects of a request the thread answered, for
        the requests after it)."""
        self._hand_over(action)

    def end(self) -> None:
        """On the loop: end the input now (the daemon hangs up); the thread stops."""
        with self._cond:
            self._items.append(None)
            wake, self._wake = self._wake, None
            self._stopped = True
            self._cond.notify_all()
        if wake is not None:
            wake.set()

    def stop(self) -> None:
        """No more answers or frames (the connection ended)."""
        with self._cond:
            self._stopped = True
            self._cond.notify_all()

    async def frames(self) -> AsyncIterator[Frame]:
        """The frames the thread handed to the loop, until the input ends."""
        while True:
            with self._cond:
                if self._items:
                    item = self._items.popleft()
                    self._bytes -= _size(item)
                    self._cond.notify_all()
                    wake = None
                else:
                    wake = self._wake = anyio.Event()
            if wake is not None:
                await wake.wait()
                continue
            if item is None:
                return
            if callable(item):
                item()
                continue
            yield item

    def _run(self, max_body: int, answer: Answer) -> None:
        splitter = FrameSplitter(max_body)
        poller = select.poll()
        poller.register(self.fd, select.POLLIN)
        while not self._stopped:
            chunk = self._read(poller)
            if chunk is None:
                continue
            for frame in splitter.feed(chunk) if chunk else splitter.end():
                if self._stopped:
                    return
                if isinstance(frame, bytes) and self._answer(answer, frame):
                    continue
                if not self._hand_over(frame):
                    return
            if not chunk:
                self._hand_over(None)
                return

    def _read(self, poller: select.poll) -> bytes | None:
        """The next chunk, b"" at the end of input, None if nothing came yet."""
        try:
            if not poller.poll(_POLL_MS):
                return None
            return os.read(self.fd, 65536)
        except BlockingIOError:
            return None
        except OSError:
            return b""

    def _answer(self, answer: Answer, body: bytes) -> bool:
        try:
            frame = answer(body)
        except Exception:  # answering must never kill the reader: the loop answers it
            log.exception("control request answered on the loop instead")
            return False
        if frame is None:
            return False
        if frame:  # b"": the loop answers it later
            self._output.send_first(frame)
        return True

    def _hand_over(self, item: Frame | Action | None) -> bool:
        """Queue `item` for the loop (waiting while the queue is full); False once the
        connection ended."""
        with self._cond:
            while self._bytes > _QUEUE_BYTES and self._items and not self._stopped:
                self._cond.wait()
            if self._stopped:
                return False
            self._items.append(item)
            self._bytes += _size(item)
            wake, self._wake = self._wake, None
        if wake is not None:
            assert self._loop is not None
            try:
                self._loop.call_soon_threadsafe(wake.set)
            except RuntimeError:  # the loop is closed: the connection is gone
                return False
        return True


def _size(item: Frame | Action | None) -> int:
    return len(item) if isinstance(item, bytes) else 0
