"""The control lane of a connection on file descriptors (stdio, and the Unix socket's
clients, jpd.rpc.socket_lane): a reader thread that answers control requests itself,
and a writer thread (jpd.rpc.lane_output) that puts those answers ahead of the queued
events.

While a thousand turns stream, the event loop is saturated: anything that waits for a
loop round waits hundreds of milliseconds. So a thread reads the input, cuts frames
(`FrameSplitter`, the same rules as on the loop), and offers each to `answer` (the rpc
boundary's control requests, protocol.md section 3); an answer is written at once if
the output is idle, else by the writer thread before its next batch of events. One
writer at a time (`ThreadedOutput`), so frames never interleave; a thread gets the GIL
within the interpreter's switch interval even when the loop is busy. Every other frame
goes to the loop, in order, through a bounded queue.
"""

from __future__ import annotations

import asyncio
import logging
import os
import select
import threading
from collections import deque
from collections.abc import AsyncIterator, Callable

import anyio

from jpd.rpc.framing import Frame, FrameSplitter
from jpd.rpc.lane_output import QUEUE_BYTES, SharedFd, ThreadedOutput
from jpd.rpc.loop_yield import Watched

log = logging.getLogger(__name__)

Answer = Callable[[bytes], bytes | None]
"""Called in the reader thread with each message body: the frame answering it, b"" if
it is answered later (on the loop), or None to hand the message to the event loop."""

Action = Callable[[], object]
"""Run on the loop in the order of the frames (`ThreadedInput.in_order`)."""

_POLL_MS = 500
"""How often a reader waiting for input looks whether its connection ended."""


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
        self._splitter = FrameSplitter(0)
        """Cuts the input into frames (`start` sizes it)."""
        self.hung_up = False
        """The thread read the end of the input: the client is gone (the loop may not
        have seen it yet)."""
        self.watched: Watched | None = None
        """The loop's thread steps aside while this thread has input (jpd.rpc.loop_yield)."""

    def start(
        self,
        max_body: int,
        answer: Answer,
        loop: asyncio.AbstractEventLoop | None = None,
        *,
        ready: bool = False,
    ) -> None:
        """Start reading (on, or for, the event loop that will read `frames`). With
        `ready` (a non-blocking fd), first take in this thread what has come already: a
        new client's `initialize`, answered without waiting for the thread to start."""
        self.answer = answer
        self._loop = loop if loop is not None else asyncio.get_running_loop()
        self._splitter = FrameSplitter(max_body)
        if ready:
            self._take_ready(answer)
        if self._shared is not None:
            self._shared.hold()
        thread = threading.Thread(
            target=self._held, args=(answer,), name=f"jpd-read-{self.fd}", daemon=True
        )
        thread.start()

    def _take_ready(self, answer: Answer) -> None:
        try:
            chunk = os.read(self.fd, 65536)
        except OSError:  # nothing yet (or a broken fd): the thread reads, or sees why
            return
        if chunk:  # an end of input is seen again by the thread
            self._feed(chunk, answer)

    def _held(self, answer: Answer) -> None:
        try:
            self._run(answer)
        finally:
            if self.watched is not None:
                self.watched.forget()
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

    def _run(self, answer: Answer) -> None:
        poller = select.poll()
        poller.register(self.fd, select.POLLIN)
        watched = self.watched
        while not self._stopped:
            if watched is not None:
                watched.done()
            chunk = self._read(poller)
            if chunk is None:
                continue
            if not self._feed(chunk, answer):
                return
            if not chunk:
                self.hung_up = True
                self._hand_over(None)
                return

    def _feed(self, chunk: bytes, answer: Answer) -> bool:
        """Answer or hand over the frames `chunk` completes (b"": the end of input);
        False once the connection ended."""
        splitter = self._splitter
        for frame in splitter.feed(chunk) if chunk else splitter.end():
            if self._stopped:
                return False
            if isinstance(frame, bytes) and self._answer(answer, frame):
                continue
            if not self._hand_over(frame):
                return False
        return True

    def _read(self, poller: select.poll) -> bytes | None:
        """The next chunk, b"" at the end of input, None if nothing came yet."""
        try:
            if not poller.poll(_POLL_MS):
                return None
            if self.watched is not None:
                self.watched.woke()
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
            while self._bytes > QUEUE_BYTES and self._items and not self._stopped:
                if self.watched is not None:
                    self.watched.waits_for_loop = True
                self._cond.wait()
            if self.watched is not None:
                self.watched.waits_for_loop = False
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
