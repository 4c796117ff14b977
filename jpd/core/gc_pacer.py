"""Young collections paced by a clock while turns run, when the collector's count is
held down.

CPython starts a young collection when its count of new container objects passes the
threshold (`jpd.__main__`), but every freed container counts down, old ones included.
When a thousand turns end together, freeing their state holds the count down while the
objects made for their ends (records, replays, settles) pile up in the young
generation: measured, 40,000-100,000 objects there (10,000 normally), each pass over
them 30-80 ms holding the GIL, and passes over the middle generation of 100 ms. Every
thread waits through them, the control lane's too (protocol.md section 3). So while
turns run, a look every `TICK` seconds collects when no collection came since the last
look, the process worked (used a quarter of a core or more) and the count barely grew
meanwhile: a pass never finds more than a tick's new objects. While the count grows
(turns streaming), or the process does little (a few turns), the collector's own
passes come as they would: each forced pass counts towards the middle and full ones,
and a full pass over a thousand turns' state holds the GIL for 300 ms.

While turns stream, each token's temporaries replace the last token's, so the count
stays flat too, and a pass at every look found no garbage at all: it only walked the
waiting turns' live objects (about 7 µs of CPU per token at a thousand turns). So after
a pass that found nothing the pacer skips `QUIET_LOOKS` looks; the young generation it
then walks is still bounded by what the running turns hold. A pass that finds garbage
(turns ending: their tasks and scopes) brings back a pass at every look.
"""

from __future__ import annotations

import gc
import threading
import time
import weakref
from collections.abc import Callable
from typing import Protocol

TICK = 0.04
"""Seconds between two looks."""
_GROWTH = 20
"""A count that grew by less than the young threshold over this much in a tick is held
down: 500 new objects in 40 ms (streaming a thousand turns, it grows by 2,000 or more).
"""
_WORKED = 0.25
"""The share of a core the process used over a tick for its count to be looked at."""
QUIET_LOOKS = 3
"""Looks skipped after a pass that found no garbage (a pass every 160 ms, not 40)."""


class GcPacer:
    """Collects the young generation (or the middle one, when its count is due, as the
    collector would) when the collector's count is held down."""

    def __init__(self, cpu: Callable[[], float] = time.process_time) -> None:
        self._cpu = cpu
        """The process's CPU seconds (a test's own clock)."""
        self._seen = _collections()
        self._count = gc.get_count()[0]
        self._used = cpu()
        self._skip = 0
        """Looks left to skip (after a pass that found nothing)."""
        self._lock = threading.Lock()
        self._running = False
        self._busy: Callable[[], bool] = _never
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

    def tick(self) -> int | None:
        """One look; the generation collected, or None."""
        seen, count, used = _collections(), gc.get_count()[0], self._cpu()
        grew, worked = count - self._count, used - self._used
        if self._skip:
            self._skip -= 1
            self._seen, self._count, self._used = seen, count, used
            return None
        if (
            seen != self._seen
            or not gc.isenabled()
            or grew >= gc.get_threshold()[0] // _GROWTH
            or worked < TICK * _WORKED
        ):
            self._seen, self._count, self._used = seen, count, used
            return None
        generation = 1 if gc.get_count()[1] >= gc.get_threshold()[1] else 0
        found = gc.collect(generation)
        self._skip = 0 if found else QUIET_LOOKS
        self._seen, self._count, self._used = _collections(), gc.get_count()[0], self._cpu()
        return generation

    def start(self, busy: Callable[[], bool]) -> None:
        """Look every `TICK` seconds while `busy()`, in a thread (the event loop is
        saturated exactly when the young generation piles up: a timer there would come
        late); call it again when `busy()` may have become true (a thread that went
        idle looks again; one looking goes on)."""
        with self._lock:
            if self._running:
                return
            self._running = True
            self._busy = busy
            if self._thread is not None:
                # Woken, not started again: a thread's start waits for it to take the
                # GIL (0.4-2.5 ms measured), on the way of every first turn to its
                # model request.
                self._wake.set()
                return
            self._thread = threading.Thread(target=self._run, name="jpd-gc-pacer", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:
            busy = self._busy
            while busy():
                time.sleep(TICK)
                self.tick()
            with self._lock:  # `start` sees either this thread going on, or it idle
                if busy():
                    continue
                self._running = False
                self._wake.clear()
            self._wake.wait()


def _never() -> bool:
    return False


def _collections() -> int:
    return sum(stats["collections"] for stats in gc.get_stats())


class Counted(Protocol):
    """What runs turns: how many run now (`RunningTurns`)."""

    @property
    def count(self) -> int: ...


_PACER = GcPacer()
"""One per process, as the collector it paces."""
_SOURCES: weakref.WeakSet[Counted] = weakref.WeakSet()
"""Each daemon's running turns (a test process may hold several; one dropped with
turns left in it stops counting)."""


def pace_while_running(turns: Counted) -> None:
    """A turn started in `turns`: pace the collector until no turn runs anywhere."""
    _SOURCES.add(turns)
    _PACER.start(_any_running)


def _any_running() -> bool:
    try:
        return any(turns.count for turns in list(_SOURCES))
    except RuntimeError:  # the set changed meanwhile (a daemon started): look again
        return True
