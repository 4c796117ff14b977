"""Young collections on a clock while turns run, besides the collector's own.

CPython starts a young collection when its count of new container objects passes the
threshold (`jpd.__main__`), but every freed container counts down, old ones included.
When a thousand turns end together, freeing their state holds the count down while the
objects made for their ends (records, replays, settles) pile up in the young
generation: measured, 40,000-100,000 objects there (10,000 normally), each pass over
them 30-80 ms holding the GIL, and passes over the middle generation of 100 ms. Every
thread waits through them, the control lane's too (protocol.md section 3). So while
turns run, a generation that went `TICK` seconds without a collection is collected
then: a pass never finds more than that tick's objects.
"""

from __future__ import annotations

import gc
from collections.abc import Callable

import threading
import time

TICK = 0.05
"""Seconds between two looks. At 20,000 streamed tokens a second the collector's own
passes come every ~200 ms, so most ticks find one happened; a forced pass then covers
at most 50 ms of new objects (a few milliseconds)."""


class GcPacer:
    """Collects the young generation (or the middle one, when its count is due, as the
    collector would) if no collection happened since the last look."""

    def __init__(self) -> None:
        self._seen = _collections()
        self._lock = threading.Lock()
        self._running = False

    def tick(self) -> int | None:
        """One look; the generation collected, or None."""
        seen = _collections()
        if seen != self._seen or not gc.isenabled():
            self._seen = seen
            return None
        generation = 1 if gc.get_count()[1] >= gc.get_threshold()[1] else 0
        gc.collect(generation)
        self._seen = _collections()
        return generation

    def start(self, busy: Callable[[], bool]) -> None:
        """Look every `TICK` seconds while `busy()`, in a thread (the event loop is
        saturated exactly when the young generation piles up: a timer there would come
        late); call it again when `busy()` may have become true (a thread that ended
        is started again; one running goes on)."""
        with self._lock:
            if self._running:
                return
            self._running = True
        threading.Thread(target=self._run, args=(busy,), name="jpd-gc-pacer", daemon=True).start()

    def _run(self, busy: Callable[[], bool]) -> None:
        while True:
            while busy():
                time.sleep(TICK)
                self.tick()
            with self._lock:  # `start` sees either this thread going on, or it ended
                if not busy():
                    self._running = False
                    return


def _collections() -> int:
    return sum(stats["collections"] for stats in gc.get_stats())
