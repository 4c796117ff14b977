"""The `turn/cancel` probe of `fig_turns` (stdio) and `turns_socket` (socket): the
cancellation of a real running turn, timed while a batch streams.

The probe keeps `AHEAD` turns of its own started on its connection (each in a new
conversation, streamed by the same paced fake server as the batch's). Each time, it
takes one that streams (its first text arrived, and it is far from its end) and times
`turn/cancel` written -> its answer read; starting the turns and waiting for one to
stream are not timed. The answer must be `{"cancelled": true}`, and the turn must then
end with `turn_completed` (`stopReason: "cancelled"`): anything else fails the run, as
the other probes' errors do. Under a thousand turns a turn takes seconds from
`turn/start` to its first text, and its end as long: started ahead and checked later,
the probe still times one every 200 ms, with no more than `AHEAD` streams of its own
at once (the batch's count of turns ending normally is of its own turns only). `settle`
at the batch's end cancels the turns left and checks the last ends.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any, Protocol

AHEAD = 8
"""Turns of the probe running at once (cancelled ones count until they end)."""
PAUSE = 0.15
"""Seconds before each cancellation: with the batch's 50 ms between two runs of a probe,
one every 200 ms at most (as the pending `inquiry/answer` probe)."""
_WAIT = 120.0
"""Seconds for a turn to stream, or to end once cancelled, before the probe fails (a
thousand turns take seconds of loop rounds, never minutes)."""
_POLL = 0.01
"""Seconds between two looks at what the connection's reader noted."""
_HALF = len("".join(f" tok{i}" for i in range(50)))
"""Text of a turn past which it is not cancelled (its end may be near: the answer
could be `cancelled: false`); with the batch's 100 tokens, half of them."""


class Client(Protocol):
    """A connection whose reader notes its turns' text and ends (`fig_turns._Daemon`)."""

    text: dict[str, int]
    ended: dict[str, str]

    async def request(self, method: str, params: Any = None) -> Any: ...


class Canceller:
    """The probe (`probe`) and its turns, on one connection."""

    def __init__(self, client: Client, pause: float = PAUSE) -> None:
        self._client = client
        self._pause = pause
        self._ahead: list[str] = []
        """The probe's turns started and not cancelled, oldest first."""
        self._leaving: set[str] = set()
        """Its turns too near their end to be cancelled, until they end (normally)."""
        self._cancelled: dict[str, float] = {}
        """Turns cancelled whose end was not seen yet -> when."""
        self._starting: set[asyncio.Task[None]] = set()
        self._failed: list[str] = []

    async def probe(self) -> float:
        """Cancel a turn that streams; the seconds `turn/cancel` took."""
        await asyncio.sleep(self._pause)
        self._start_ahead()
        turn = await self._streaming()
        sent = time.perf_counter()
        result = await self._client.request("turn/cancel", {"turnId": turn})
        took = time.perf_counter() - sent
        if result != {"cancelled": True}:
            raise RuntimeError(f"turn/cancel of a running turn answered {result}")
        self._cancelled[turn] = time.monotonic()
        self._start_ahead()
        return took

    async def settle(self) -> None:
        """Cancel the turns left (untimed), wait for every cancelled turn's end and
        check it; raise the first failure."""
        await asyncio.gather(*self._starting)
        for turn in self._ahead:
            answer = await self._client.request("turn/cancel", {"turnId": turn})
            if answer == {"cancelled": True}:
                self._cancelled[turn] = time.monotonic()
            else:  # it ended at that moment, on its own
                self._leaving.add(turn)
        self._ahead.clear()
        await _until(lambda: not self._check(), "a turn never ended")

    def _start_ahead(self) -> None:
        running = len(self._ahead) + len(self._leaving) + len(self._cancelled)
        for _ in range(AHEAD - running - len(self._starting)):
            task = asyncio.create_task(self._start())
            self._starting.add(task)
            task.add_done_callback(self._starting.discard)

    async def _start(self) -> None:
        try:
            started = await self._client.request("turn/start", {"message": "bench"})
        except RuntimeError as exc:
            self._failed.append(f"the turn/cancel probe's turn/start failed: {exc}")
        else:
            self._ahead.append(started["turnId"])

    async def _streaming(self) -> str:
        """The oldest turn that streams, far enough from its end; waits for one."""
        found: list[str] = []

        def ready() -> bool:
            text, ended = self._client.text, self._client.ended
            for turn in list(self._ahead):
                if turn in ended or text.get(turn, 0) > _HALF:
                    self._ahead.remove(turn)  # too late to cancel: it ends on its own
                    self._leaving.add(turn)
                elif turn in text and not found:
                    found.append(turn)
            self._check()
            if found:
                return True
            self._start_ahead()
            return False

        await _until(ready, "never streamed")
        self._ahead.remove(found[0])
        return found[0]

    def _check(self) -> int:
        """Check the turns cancelled or left to end that ended (raising the first
        failure); how many have not yet."""
        ended = self._client.ended
        for turn in [turn for turn in self._leaving if turn in ended]:
            self._leaving.discard(turn)
            if ended[turn] != "end_turn":
                self._failed.append(f"a turn of the probe ended {ended[turn]!r}")
        for turn, when in list(self._cancelled.items()):
            if turn in ended:
                del self._cancelled[turn]
                if ended[turn] != "cancelled":
                    stop = ended[turn]
                    self._failed.append(f"a cancelled turn ended with stop reason {stop!r}")
            elif time.monotonic() - when > _WAIT:
                self._failed.append(f"a cancelled turn never ended within {_WAIT:.0f} s")
        if self._failed:
            raise RuntimeError(self._failed[0])
        return len(self._cancelled) + len(self._leaving)


async def _until(check: Callable[[], bool], what: str) -> None:
    try:
        async with asyncio.timeout(_WAIT):
            # Polled: the reader notes 20,000 deltas a second, too many to set an event.
            while not check():  # noqa: ASYNC110
                await asyncio.sleep(_POLL)
    except TimeoutError:
        raise RuntimeError(f"the turn/cancel probe: {what} within {_WAIT:.0f} s") from None
