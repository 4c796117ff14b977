"""The bench's `turn/cancel` probe (bench/turns_cancel.py) against a scripted connection:
what it sends, and that a wrong answer or a turn that does not end cancelled fails the
run (as the other probes' errors do). Its real run is tests/e2e/test_bench.py's; nothing
is timed here."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from bench import turns_cancel
from bench.fig_turns import Probing
from bench.turns_cancel import cancel_running


class _Connection:
    """What `fig_turns._Daemon` offers the probe: requests, and the text and ends its
    reader noted; the daemon's side is scripted."""

    def __init__(self, answer: Any = None, stop: str = "cancelled", streams: bool = True) -> None:
        self.answer = {"cancelled": True} if answer is None else answer
        self.stop = stop
        self.streams = streams
        self.text: dict[str, int] = {}
        self.ended: dict[str, str] = {}
        self.sent: list[tuple[str, Any]] = []
        self.clock = 0.0
        """A clock the scripted requests move on (5 s per start, 1 s per cancel)."""

    async def request(self, method: str, params: Any = None) -> Any:
        self.sent.append((method, params))
        loop = asyncio.get_running_loop()
        if method == "turn/start":
            self.clock += 5
            turn = f"t-{len(self.sent)}"
            if self.streams:  # its first delta comes after the answer
                loop.call_later(0.02, self.text.__setitem__, turn, 4)
            else:  # the model failed before any text
                loop.call_later(0.02, self.ended.__setitem__, turn, "error")
            return {"turnId": turn, "conversationId": "c-1"}
        assert method == "turn/cancel"
        self.clock += 1
        loop.call_later(0.02, self.ended.__setitem__, params["turnId"], self.stop)
        return self.answer


async def test_it_cancels_the_turn_it_started_once_it_streams() -> None:
    connection = _Connection()
    took = await cancel_running(connection, pause=0)
    assert took >= 0
    (start, params), cancel = connection.sent
    assert start == "turn/start" and "conversationId" not in params  # a new conversation
    assert cancel == ("turn/cancel", {"turnId": "t-1"})
    assert connection.ended == {"t-1": "cancelled"}


@pytest.mark.parametrize(
    ("answer", "stop", "said"),
    [
        ({"cancelled": False}, "cancelled", "answered {'cancelled': False}"),
        ({}, "cancelled", "answered {}"),
        ({"cancelled": True}, "end_turn", "ended with stop reason 'end_turn'"),
        ({"cancelled": True}, "error", "ended with stop reason 'error'"),
    ],
)
async def test_a_wrong_answer_or_end_fails(answer: Any, stop: str, said: str) -> None:
    with pytest.raises(RuntimeError, match=said.replace("{", r"\{").replace("}", r"\}")):
        await cancel_running(_Connection(answer, stop), pause=0)


async def test_a_turn_that_ends_before_it_streams_fails_uncancelled() -> None:
    connection = _Connection(streams=False)
    with pytest.raises(RuntimeError, match="ended first: error"):
        await cancel_running(connection, pause=0)
    assert [method for method, _ in connection.sent] == ["turn/start"]


async def test_a_turn_that_never_streams_or_ends_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(turns_cancel, "_WAIT", 0.1)
    connection = _Connection()
    connection.text = _NeverSet()
    with pytest.raises(RuntimeError, match="never streamed"):
        await cancel_running(connection, pause=0)


async def test_a_cancelled_turn_that_never_ends_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(turns_cancel, "_WAIT", 0.1)
    connection = _Connection()
    connection.ended = _NeverSet()
    with pytest.raises(RuntimeError, match="never ended after turn/cancel"):
        await cancel_running(connection, pause=0)


async def test_the_failure_fails_the_batch_probes() -> None:
    """`Probing.finish` (the batch's end) raises what the probe raised."""
    connection = _Connection({"cancelled": False})
    probing = Probing({"turn/cancel": lambda: cancel_running(connection, pause=0)})
    await probing.start()
    await probing.streaming()
    await asyncio.sleep(0.1)
    with pytest.raises(RuntimeError, match="answered"):
        await probing.finish()


async def test_probing_keeps_the_cancel_time_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """What the probe waited for first (the start, the first text) is not its time: the
    latency `Probing` keeps is the one the probe measured, written -> answered."""
    connection = _Connection()
    clock = SimpleNamespace(perf_counter=lambda: connection.clock)
    monkeypatch.setattr(turns_cancel, "time", clock)
    probing = Probing({"turn/cancel": lambda: cancel_running(connection, pause=0)})
    await probing.start()
    await probing.streaming()
    while len(connection.ended) < 2:  # noqa: ASYNC110 - the scripted daemon ends them
        await asyncio.sleep(0.01)
    starting, streaming = (await probing.finish())["turn/cancel"]
    # The scripted clock: 5 s for each start, 1 s for each cancel's answer.
    assert starting == [] and len(streaming) >= 2 and set(streaming) == {1.0}


class _NeverSet(dict[str, Any]):
    """A reader's notes that never take an entry (a turn whose events never come)."""

    def __setitem__(self, key: str, value: Any) -> None:
        pass
