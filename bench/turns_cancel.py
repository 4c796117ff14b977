"""The `turn/cancel` probe of `fig_turns` (stdio) and `turns_socket` (socket): the
cancellation of a real running turn, timed while a batch streams.

Each time, the probe starts a turn of its own on its connection (a new conversation,
streamed by the same paced fake server as the batch's) and waits until its first text
arrived; neither is timed. Then it times `turn/cancel` written -> its answer read. The
answer must be `{"cancelled": true}`, and the turn must then end with `turn_completed`
(`stopReason: "cancelled"`): anything else fails the run, as the other probes' errors
do. The probe waits for that end before it starts another turn, and pauses `PAUSE`
first, so it adds one short stream at a time to the batch (whose count of turns ending
normally is of its own turns only).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any, Protocol

PAUSE = 0.15
"""Seconds before each new turn: with the batch's 50 ms between two runs of a probe,
one cancellation every 200 ms at most (as the pending `inquiry/answer` probe)."""
_WAIT = 120.0
"""Seconds for the probe's turn to stream, or to end once cancelled, before the probe
fails (a thousand turns take seconds of loop rounds, never minutes)."""
_POLL = 0.01
"""Seconds between two looks at what the connection's reader noted."""


class Client(Protocol):
    """A connection whose reader notes its turns' text and ends (`fig_turns._Daemon`)."""

    text: dict[str, int]
    ended: dict[str, str]

    async def request(self, method: str, params: Any = None) -> Any: ...


async def _until(check: Callable[[], bool], what: str) -> None:
    try:
        async with asyncio.timeout(_WAIT):
            # Polled: the reader notes 20,000 deltas a second, too many to set an event.
            while not check():  # noqa: ASYNC110
                await asyncio.sleep(_POLL)
    except TimeoutError:
        raise RuntimeError(f"the turn/cancel probe's turn {what} within {_WAIT:.0f} s") from None


async def cancel_running(client: Client, pause: float = PAUSE) -> float:
    """Start a turn, cancel it once it streams; the seconds `turn/cancel` took."""
    await asyncio.sleep(pause)
    turn = (await client.request("turn/start", {"message": "bench"}))["turnId"]
    await _until(lambda: turn in client.text or turn in client.ended, "never streamed")
    if turn in client.ended:
        raise RuntimeError(f"the turn/cancel probe's turn ended first: {client.ended[turn]}")
    sent = time.perf_counter()
    result = await client.request("turn/cancel", {"turnId": turn})
    took = time.perf_counter() - sent
    if result != {"cancelled": True}:
        raise RuntimeError(f"turn/cancel of a running turn answered {result}")
    await _until(lambda: turn in client.ended, "never ended after turn/cancel")
    if client.ended[turn] != "cancelled":
        raise RuntimeError(f"a cancelled turn ended with stop reason {client.ended[turn]!r}")
    return took
