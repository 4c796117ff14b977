"""The event loop's thread steps aside for a control thread that has input (Linux).

The control lane's threads (jpd.rpc.socket_lane: the accept thread, each client's
reader) answer control requests while the loop streams a thousand turns, but each needs
the GIL to do it, and the loop's thread holds it. The interpreter's hand-over does not
help them: the loop lets go of the GIL at every system call and takes it back a few
microseconds later, and each time it wakes the waiting thread, which finds the GIL
taken again and waits anew (its switch interval starts again, so it never asks the loop
to let go). Measured on 2 cores: a reader woke 20-400 times, over 5-40 ms, before it won
the GIL.

So the kernel tells the loop's thread when a watched descriptor gets input: `O_ASYNC`
with the owner set to that thread (`F_SETOWN_EX`) and `SIGNAL` as the signal
(`F_SETSIG`). Its handler runs on that thread between two bytecodes and waits, the GIL
let go, until every watched thread that has input took its turn (`Watched.busy`, or
unread bytes), for at most `MAX_WAIT` seconds (a thread blocked on a lock the loop
holds, say: the loop then goes on). The handler waits for nothing when the thread came
first; a thread that waits for the loop (its queue to the loop is full) is skipped.
Where this cannot be set up (another system, the loop not on the main thread), threads
contend for the GIL as before.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import select
import signal
import struct
import sys
import threading
import time
from types import FrameType

log = logging.getLogger(__name__)

SIGNAL = signal.SIGURG
"""Ignored by default: one that comes after the handler is gone does nothing."""
MAX_WAIT = 0.005
"""Seconds the loop's thread gives the control threads at most, per signal."""
_F_SETSIG = 10
_F_SETOWN_EX = 15
_F_OWNER_TID = 0


class Watched:
    """A descriptor a control thread reads. The thread sets `busy` (holding the GIL)
    from when it woke for input until it handled it (`done`), and `waits_for_loop`
    while it waits for the loop (a full queue): then the loop must not wait for it."""

    def __init__(self, fd: int, yielding: Yielding) -> None:
        self.fd = fd
        self.busy = False
        self.waits_for_loop = False
        self._yielding = yielding

    def woke(self) -> None:
        """The thread has input to handle (it holds the GIL)."""
        self.busy = True

    def done(self) -> None:
        """The thread handled its input and goes back to waiting for more."""
        self.busy = False
        self._yielding.progressed()

    def forget(self) -> None:
        """The thread ends: no more waiting for it."""
        self._yielding.forget(self)


class Yielding:
    """The descriptors watched for the loop's thread; `install` on that thread first."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._watched: set[Watched] = set()
        self._owner: int | None = None
        """The native id of the thread the signal goes to (None: not installed)."""
        self._waiting = 0
        """Handlers waiting now (0 or 1)."""

    def install(self) -> bool:
        """Handle `SIGNAL` on this thread (the main thread, where Python runs signal
        handlers, and the loop's); whether descriptors can be watched."""
        if sys.platform != "linux" or threading.current_thread() is not threading.main_thread():
            return False
        if self._owner is None:
            signal.signal(SIGNAL, self._on_signal)
            self._owner = threading.get_native_id()
        return True

    def watch(self, fd: int) -> Watched:
        """Have the kernel signal the loop's thread when `fd` gets input (from any
        thread). A `Watched` is returned even where nothing can be set up."""
        watched = Watched(fd, self)
        if self._owner is None:
            return watched
        try:
            fcntl.fcntl(fd, _F_SETOWN_EX, struct.pack("ii", _F_OWNER_TID, self._owner))
            fcntl.fcntl(fd, _F_SETSIG, SIGNAL)
            fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) | os.O_ASYNC)
        except OSError as exc:  # not a socket or pipe, say: it works as before
            log.debug("cannot watch fd %d: %s", fd, exc)
            return watched
        self._watched.add(watched)  # one call under the GIL: the handler may run anywhere
        return watched

    def forget(self, watched: Watched) -> None:
        self._watched.discard(watched)
        self.progressed()

    def progressed(self) -> None:
        if self._waiting:  # read without the lock: a late notify costs nothing
            with self._cond:
                self._cond.notify_all()

    def _pending(self) -> bool:
        """A watched thread has input it did not handle yet."""
        idle = []
        for watched in tuple(self._watched):  # copied in one call: threads add and drop
            if watched.waits_for_loop:
                continue
            if watched.busy:
                return True
            idle.append(watched.fd)
        if not idle:
            return False
        poller = select.poll()
        for fd in idle:
            poller.register(fd, select.POLLIN)
        with contextlib.suppress(OSError):
            return any(events & select.POLLIN for _fd, events in poller.poll(0))
        return False

    def _on_signal(self, _signum: int, _frame: FrameType | None) -> None:
        # It runs between two bytecodes of whatever the loop's thread was doing: an
        # exception would be raised there (in a turn's stream, say), so none escapes.
        # Another signal while it waits runs it again inside that wait: that one has
        # nothing to add.
        if self._waiting:
            return
        try:
            self._wait_for_threads(time.monotonic() + MAX_WAIT)
        except Exception:
            log.exception("the loop's thread did not step aside for the control threads")

    def _wait_for_threads(self, deadline: float) -> None:
        with self._cond:
            self._waiting += 1
            try:
                while self._pending():
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        return
                    self._cond.wait(remaining)
            finally:
                self._waiting -= 1


YIELDING = Yielding()
"""One per process, as the signal handler and the thread it runs on."""
