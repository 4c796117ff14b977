"""Merging streamed text on a short tick (protocol.md section 7.2).

A delta after a quiet tick is published at once, so the first token is never held
back; deltas that arrive within a tick of the last publish are merged and published
together when the tick ends (or earlier, before any other event), so a fast stream
costs one notification per tick rather than one per token. Deltas are published as
(kind, text), with no event model: `EventHub.delta_sender` encodes them directly.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from jpd.protocol.turn_notes import DeltaKind

TICK = 0.005  # seconds


class DeltaBatcher:
    """Publishes text and reasoning deltas, merged per tick. The tick is a timer of the
    event loop, set when a batch is first held: a model call starts no task for it."""

    def __init__(self, publish: Callable[[DeltaKind, str], None], tick: float = TICK) -> None:
        self._publish = publish
        self._tick = tick
        self._kind: DeltaKind = "text_delta"
        self._pending: list[str] = []
        self._last = 0.0
        self._timer: asyncio.TimerHandle | None = None

    def add(self, kind: DeltaKind, text: str) -> None:
        """A delta arrived: publish it now after a quiet tick, else hold it for the tick."""
        if self._pending and kind != self._kind:
            self.flush()
        now = time.monotonic()
        if not self._pending and now - self._last >= self._tick:
            self._last = now
            self._publish(kind, text)
            return
        self._kind = kind
        if not self._pending:  # once per held batch
            delay = max(0.0, self._last + self._tick - now)
            self._timer = asyncio.get_running_loop().call_later(delay, self.flush)
        self._pending.append(text)

    def flush(self) -> None:
        """Publish what is held (before any other event, at the tick, and at the end of
        a stream)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._pending:
            text, self._pending = "".join(self._pending), []
            self._last = time.monotonic()
            self._publish(self._kind, text)
