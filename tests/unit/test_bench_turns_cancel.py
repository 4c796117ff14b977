"""The bench's `turn/cancel` probe (bench/turns_cancel.py) against a scripted connection:
what it sends, that it keeps few streams of its own, and that a wrong answer or a turn
that does not end cancelled fails the run (as the other probes' errors do). Its real
run is tests/e2e/test_bench.py's; nothing is timed here."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest

from bench import turns_cancel
from bench.fig_turns import Probing
from bench.turns_cancel import AHEAD, Canceller


@pytest.fixture(autouse=True)
def _short_waits(monkeypatch: pytest.MonkeyPatch) -> None:
    """A probe that waits in vain fails in seconds here, not minutes."""
    monkeypatch.setattr(turns_cancel, "_WAIT", 5.0)


class _Connection:
    """What `fig_turns._Daemon` offers the probe: requests, and the text and ends its
    reader noted; the daemon's side is scripted."""

    def __init__(self, answer: Any = None, stop: str = "cancelled") -> None:
        self.answer = {"cancelled": True} if answer is None else answer
        self.stop = stop
        self.first_text = 4
        """Characters of a turn's first text (after 20 ms); 0: it never streams."""
        self.text: dict[str, int] = {}
        self.ended: dict[str, str] = {}
        self.sent: list[tuple[str, Any]] = []
        self.running: set[str] = set()
        self.most = 0
        """The most turns running at once."""
        self.clock = 0.0
        """A clock the scripted requests move on (5 s per start, 1 s per cancel)."""

    def end(self, turn: str, stop: str) -> None:
        self.running.discard(turn)
        self.ended[turn] = stop

    async def request(self, method: str, params: Any = None) -> Any:
        self.sent.append((method, params))
        loop = asyncio.get_running_loop()
        if method == "turn/start":
            self.clock += 5
            turn = f"t-{len(self.sent)}"
            self.running.add(turn)
            self.most = max(self.most, len(self.running))
            if self.first_text:
                loop.call_later(0.02, self.text.__setitem__, turn, self.first_text)
            return {"turnId": turn, "conversationId": "c-1"}
        assert method == "turn/cancel"
        self.clock += 1
        if self.answer == {"cancelled": True}:
            loop.call_later(0.02, self.end, params["turnId"], self.stop)
        return self.answer

    def starts(self) -> list[Any]:
        return [params for method, params in self.sent if method == "turn/start"]

    def cancels(self) -> list[str]:
        return [params["turnId"] for method, params in self.sent if method == "turn/cancel"]


async def test_it_cancels_a_turn_of_its_own_that_streams() -> None:
    connection = _Connection()
    canceller = Canceller(connection, pause=0)
    took = await canceller.probe()
    assert took >= 0
    # Its turns are started ahead, each in a new conversation; one was cancelled.
    assert connection.starts() == [{"message": "bench"}] * AHEAD
    [cancelled] = connection.cancels()
    assert cancelled in connection.text
    await canceller.settle()
    # At the end the turns left are cancelled too, and every one ended so.
    assert sorted(connection.cancels()) == sorted(connection.text)
    assert set(connection.ended.values()) == {"cancelled"} and not connection.running


async def test_a_cancelled_false_answer_fails() -> None:
    connection = _Connection({"cancelled": False})
    with pytest.raises(RuntimeError, match=r"answered \{'cancelled': False\}"):
        await Canceller(connection, pause=0).probe()


@pytest.mark.parametrize("stop", ["end_turn", "error"])
async def test_a_cancelled_turn_ending_otherwise_fails(stop: str) -> None:
    canceller = Canceller(_Connection(stop=stop), pause=0)
    await canceller.probe()
    with pytest.raises(RuntimeError, match=f"ended with stop reason '{stop}'"):
        await canceller.settle()


async def test_a_later_probe_reports_an_earlier_turns_wrong_end() -> None:
    canceller = Canceller(_Connection(stop="end_turn"), pause=0)
    await canceller.probe()
    await asyncio.sleep(0.05)  # its end is read
    with pytest.raises(RuntimeError, match="ended with stop reason 'end_turn'"):
        await canceller.probe()


async def test_turns_near_their_end_are_left_to_end_normally() -> None:
    connection = _Connection()
    connection.first_text = turns_cancel._HALF + 1
    canceller = Canceller(connection, pause=0)
    probe = asyncio.create_task(canceller.probe())
    await _until(lambda: len(connection.text) == AHEAD)
    await asyncio.sleep(0.1)  # the probe looks again
    # None is cancelled, and no more are started while they run.
    assert not probe.done() and connection.cancels() == []
    assert len(connection.starts()) == AHEAD
    connection.first_text = 4  # the turns started next stream from their start
    for turn in list(connection.running):  # they end on their own, as they must
        connection.end(turn, "end_turn")
    await probe
    assert len(connection.cancels()) == 1 and len(connection.starts()) == 2 * AHEAD
    await canceller.settle()


async def test_a_turn_of_the_probe_ending_in_error_fails() -> None:
    connection = _Connection()
    connection.first_text = 0
    canceller = Canceller(connection, pause=0)
    probe = asyncio.create_task(canceller.probe())
    await _until(lambda: len(connection.running) == AHEAD)
    connection.end(next(iter(connection.running)), "error")
    with pytest.raises(RuntimeError, match="a turn of the probe ended 'error'"):
        await probe


async def test_turns_that_never_stream_fail(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(turns_cancel, "_WAIT", 0.1)
    connection = _Connection()
    connection.first_text = 0
    with pytest.raises(RuntimeError, match="never streamed"):
        await Canceller(connection, pause=0).probe()


async def test_a_cancelled_turn_that_never_ends_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(turns_cancel, "_WAIT", 0.1)
    connection = _Connection()
    connection.end = lambda turn, stop: None  # type: ignore[method-assign]
    canceller = Canceller(connection, pause=0)
    await canceller.probe()
    with pytest.raises(RuntimeError, match="never ended"):
        await canceller.settle()


async def test_a_failure_fails_the_batch_probes() -> None:
    """`Probing.finish` (the batch's end) raises what the probe raised."""
    canceller = Canceller(_Connection({"cancelled": False}), pause=0)
    probing = Probing({"turn/cancel": canceller.probe})
    await probing.start()
    await probing.streaming()
    await asyncio.sleep(0.1)
    with pytest.raises(RuntimeError, match="answered"):
        await probing.finish()


async def test_probing_keeps_the_cancel_time_alone_with_few_streams(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What the probe waited for first (the starts, the first text) is not its time: the
    latency `Probing` keeps is the one the probe measured, written -> answered. And
    however many it times, no more than `AHEAD` of its turns run at once."""
    connection = _Connection()
    monkeypatch.setattr(
        turns_cancel,
        "time",
        SimpleNamespace(perf_counter=lambda: connection.clock, monotonic=lambda: 0.0),
    )
    canceller = Canceller(connection, pause=0)
    probing = Probing({"turn/cancel": canceller.probe})
    await probing.start()
    await probing.streaming()
    await _until(lambda: len(connection.ended) >= 3 * AHEAD)
    starting, streaming = (await probing.finish())["turn/cancel"]
    await canceller.settle()
    # The scripted clock: 5 s for each start, 1 s for each cancel's answer.
    assert starting == [] and len(streaming) >= 3 * AHEAD and set(streaming) == {1.0}
    assert connection.most == AHEAD and not connection.running


async def _until(check: Callable[[], bool]) -> None:
    while not check():  # noqa: ASYNC110 - the scripted daemon's moments
        await asyncio.sleep(0.01)
