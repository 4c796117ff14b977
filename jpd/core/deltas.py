"""Merging streamed text on a short tick (protocol.md section 7.2).

A delta after a quiet tick is published at once, so the first token is never held
back; deltas that arrive within a tick of the last publish are merged and published
together when the tick ends (or earlier, before any other event), so a fast stream
costs one notification per tick rather than one per token. Deltas are published as
(kind, text), with no event model: `EventHub.delta_sender` encodes them directly.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import anyio

from jpd.protocol.turn_notes import DeltaKind

TICK = 0.005  # seconds


class DeltaBatcher:
    """Publishes text and reasoning deltas, merged per tick; `run` is its timer task."""

    def __init__(self, publish: Callable[[DeltaKind, str], None], tick: float = TICK) -> None:
        self._publish = publish
        self._tick = tick
        self._kind: DeltaKind = "text_delta"
        self._pending: list[str] = []
        self._last = 0.0
        self._wake = anyio.Event()

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
        if not self._pending:
            self._wake.set()  # once per held batch: the timer is then running
        self._pending.append(text)

    def flush(self) -> None:
        """Publish what is held (before any other event, and at the end of a stream)."""
        if self._pending:
            text, self._pending = "".join(self._pending), []
            self._last = time.monotonic()
            self._publish(self._kind, text)

    async def run(self) -> None:
        """Flush held deltas a tick after they arrive; runs until cancelled."""
        while True:
            await self._wake.wait()
            self._wake = anyio.Event()
            await anyio.sleep(max(0.0, self._last + self._tick - time.monotonic()))
            self.flush()
