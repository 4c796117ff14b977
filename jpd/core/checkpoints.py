"""Saving a model call's output while it streams (protocol.md section 12.4).

The turn writes the whole output as `chat_response` events when the call ends. Until
then, what streamed is saved as `chat_checkpoint` events every `INTERVAL` seconds or
`SIZE` bytes, whichever comes first, so a daemon killed mid-stream loses at most that
much: recovery rebuilds the interrupted output from the checkpoints.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from anyio.lowlevel import RunVar

from jpd.conversation import events as ev

log = logging.getLogger(__name__)

INTERVAL = 0.5
"""Seconds between checkpoints while text streams."""
SIZE = 4096
"""Characters of new text that trigger a checkpoint at once."""


class Checkpointer:
    """Checkpoints of one turn's model calls (`join`: on the interval ticker)."""

    def __init__(
        self,
        turn_id: str,
        append: Callable[[ev.Event], None],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.turn_id = turn_id
        self._append = append
        self._clock = clock
        self._text: list[str] = []
        self._reasoning: list[str] = []
        self._pending = 0
        self._written = False
        self._since = clock()
        self._ticker: _Ticker | None = None
        """The ticker joined (`join`), kept for `leave`: a run variable costs a lookup."""

    def start_call(self) -> None:
        """A model call begins: nothing of it is saved yet."""
        self._text.clear()
        self._reasoning.clear()
        self._pending = 0
        self._written = False
        self._since = self._clock()

    def text(self, piece: str) -> None:
        """A piece of the answer streamed."""
        self._text.append(piece)
        self._pending += len(piece)  # `_grow`, inlined: once per token
        if self._pending >= SIZE:
            self.save()

    def reasoning(self, piece: str) -> None:
        """A piece of reasoning streamed."""
        self._reasoning.append(piece)
        self._grow(len(piece))

    def retry(self) -> None:
        """The call starts over: what was saved of it is void."""
        if self._written:
            self._write(ev.ChatCheckpoint(turn_id=self.turn_id, discard=True))
        self.start_call()

    def save(self) -> None:
        """Write what streamed since the last checkpoint, if anything."""
        if not self._pending:
            return
        text, reasoning = "".join(self._text), "".join(self._reasoning)
        self._text.clear()
        self._reasoning.clear()
        self._pending = 0
        self._since = self._clock()
        self._write(
            ev.ChatCheckpoint(
                turn_id=self.turn_id, message=text or None, reasoning=reasoning or None
            )
        )
        self._written = True

    def join(self) -> None:
        """A model call streams: save every `INTERVAL` seconds while output is pending,
        until `leave`. One timer serves the calls streaming on this event loop
        (`_Ticker`): a thousand turns cost two wake-ups a second, not two thousand, and
        a call starts no task for it."""
        self._ticker = _Ticker.current()
        self._ticker.add(self)

    def leave(self) -> None:
        """The model call ended (however): no more checkpoints on the timer."""
        ticker, self._ticker = self._ticker, None
        if ticker is not None:
            ticker.remove(self)

    def due(self) -> None:
        """Save if output waited `INTERVAL` seconds (the ticker's check)."""
        if self._pending and self._clock() - self._since >= INTERVAL:
            self.save()

    def _grow(self, size: int) -> None:
        self._pending += size
        if self._pending >= SIZE:
            self.save()

    def _write(self, event: ev.Event) -> None:
        try:
            self._append(event)
        except OSError as exc:  # a checkpoint is a safety net, not part of the turn
            log.warning("turn %s: could not write a checkpoint: %s", self.turn_id, exc)


class _Ticker:
    """The timer of the checkpoints of every model call streaming on one event loop: a
    timer of the loop that wakes every `INTERVAL` while a call streams and saves what is
    due for all of them."""

    _current: RunVar[_Ticker | None] = RunVar("jpd_checkpoint_ticker", default=None)

    def __init__(self) -> None:
        self.members: dict[Checkpointer, None] = {}
        """The streaming calls' checkpointers, in the order they joined."""
        self._timer: asyncio.TimerHandle | None = None

    @classmethod
    def current(cls) -> _Ticker:
        ticker = cls._current.get()
        if ticker is None:
            ticker = _Ticker()
            cls._current.set(ticker)
        return ticker

    def add(self, member: Checkpointer) -> None:
        self.members[member] = None
        if self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(INTERVAL, self._tick)

    def remove(self, member: Checkpointer) -> None:
        self.members.pop(member, None)
        if not self.members and self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _tick(self) -> None:
        for each in list(self.members):
            try:
                each.due()
            except Exception:  # another turn's checkpoint must not end this one
                log.exception("checkpoint of turn %s failed", each.turn_id)
        self._timer = (
            asyncio.get_running_loop().call_later(INTERVAL, self._tick) if self.members else None
        )
