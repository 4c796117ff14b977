"""Saving a model call's output while it streams (protocol.md section 12.4).

The turn writes the whole output as `chat_response` events when the call ends. Until
then, what streamed is saved as `chat_checkpoint` events every `INTERVAL` seconds or
`SIZE` bytes, whichever comes first, so a daemon killed mid-stream loses at most that
much: recovery rebuilds the interrupted output from the checkpoints.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import anyio
from anyio.lowlevel import RunVar

from jpd.conversation import events as ev

log = logging.getLogger(__name__)

INTERVAL = 0.5
"""Seconds between checkpoints while text streams."""
SIZE = 4096
"""Characters of new text that trigger a checkpoint at once."""


class Checkpointer:
    """Checkpoints of one turn's model calls; `run` is the interval ticker."""

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
        self._grow(len(piece))

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

    async def run(self) -> None:
        """Save every `INTERVAL` seconds while output is pending (run in a task group,
        for as long as the model call streams). One timer serves the calls streaming on
        this event loop (`_Ticker`): a thousand turns cost two wake-ups a second, not
        two thousand."""
        ticker = _Ticker.current()
        turn = anyio.Event()
        ticker.members[self] = turn
        try:
            while True:
                if ticker.driver is None:
                    await ticker.drive(self)
                await turn.wait()
                turn = ticker.members[self] = anyio.Event()
        finally:
            ticker.members.pop(self, None)

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
    """The timer of the checkpoints of every model call streaming on one event loop: one
    member's `run` task (the driver) wakes every `INTERVAL` and saves what is due for
    all; when its call ends, it hands the timer to another member."""

    _current: RunVar[_Ticker | None] = RunVar("jpd_checkpoint_ticker", default=None)

    def __init__(self) -> None:
        self.members: dict[Checkpointer, anyio.Event] = {}
        """Each member's wake-up: set when it is to drive the timer."""
        self.driver: Checkpointer | None = None

    @classmethod
    def current(cls) -> _Ticker:
        ticker = cls._current.get()
        if ticker is None:
            ticker = _Ticker()
            cls._current.set(ticker)
        return ticker

    async def drive(self, member: Checkpointer) -> None:
        """Run the timer until `member`'s call ends (its task is cancelled)."""
        self.driver = member
        try:
            while True:
                await anyio.sleep(INTERVAL)
                for each in list(self.members):
                    try:
                        each.due()
                    except Exception:  # another turn's checkpoint must not end this one
                        log.exception("checkpoint of turn %s failed", each.turn_id)
        finally:
            self.driver = None
            self.members.pop(member, None)
            successor = next(iter(self.members), None)
            if successor is not None:
                self.members[successor].set()
