"""Keep the cycle collector out of a large log load.

Parsing a long `events.jsonl` allocates hundreds of thousands of objects. With the
collector on, the growing heap triggers full collections whose pauses grow with it
(100-400 ms each for 100,000 events); they hold the GIL, so every other client of the
daemon waits through them although the load runs in a worker thread. Paused
instead, and the loaded objects then frozen (`gc.freeze`: never scanned again), a load
costs no pause at all. The price: objects that were already cyclic garbage when a large
load ends are never collected; only large loads pay it (see `LARGE_LOG_LINES`).
"""

from __future__ import annotations

import contextlib
import gc
import threading
from collections.abc import Iterator

# Below this many lines a load is short and its collections are cheap: leave gc alone.
LARGE_LOG_LINES = 20_000


class _Pause:
    """Nested and concurrent pauses: the first disables collection, the last one out
    freezes what was loaded and enables it again (only if it was enabled)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._depth = 0
        self._was_enabled = False

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        with self._lock:
            if self._depth == 0:
                self._was_enabled = gc.isenabled()
                gc.disable()
            self._depth += 1
        try:
            yield
        finally:
            with self._lock:
                self._depth -= 1
                if self._depth == 0 and self._was_enabled:
                    gc.freeze()
                    gc.enable()


# One per process, as the collector it guards is.
_PAUSE = _Pause()


def gc_paused(lines: int) -> contextlib.AbstractContextManager[None]:
    """Pause the cycle collector while loading a log of `lines` lines, if it is large."""
    if lines < LARGE_LOG_LINES:
        return contextlib.nullcontext()
    return _PAUSE.paused()
