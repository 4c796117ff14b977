"""Checkpoints while model calls stream (jpd.core.checkpoints): one timer serves every
call on the event loop, goes on when a call ends while others stream, and stops when
none does."""

from __future__ import annotations

import anyio

from jpd.conversation import events as ev
from jpd.core.checkpoints import Checkpointer, _Ticker


class Saved:
    def __init__(self) -> None:
        self.events: list[ev.Event] = []
        self.changed = anyio.Event()

    def append(self, event: ev.Event) -> None:
        self.events.append(event)
        self.changed.set()
        self.changed = anyio.Event()

    async def wait_for(self, count: int) -> None:
        with anyio.fail_after(30):  # a safety net, not a measure
            while len(self.events) < count:
                await self.changed.wait()


def messages(saved: Saved) -> list[str | None]:
    return [e.message for e in saved.events if isinstance(e, ev.ChatCheckpoint)]


async def test_one_timer_saves_every_call_and_goes_on_when_one_call_ends() -> None:
    now = [0.0]
    saved = {name: Saved() for name in ("a", "b", "c")}
    points = {
        name: Checkpointer(f"t-{name}", saved[name].append, clock=lambda: now[0]) for name in saved
    }
    for point in points.values():
        point.join()
    try:
        for name, point in points.items():
            point.text(f"hello {name}")
        now[0] += 1.0  # all due at the next tick
        for name in points:
            await saved[name].wait_for(1)
        points["a"].leave()  # the first to join: its call ends
        for name in points:
            points[name].text(" again")
        now[0] += 1.0
        for name in ("b", "c"):
            await saved[name].wait_for(2)
    finally:
        for point in points.values():
            point.leave()
    assert messages(saved["a"]) == ["hello a"]  # its " again" came after it left
    assert messages(saved["b"]) == ["hello b", " again"]
    assert messages(saved["c"]) == ["hello c", " again"]


async def test_a_new_call_after_all_ended_starts_the_timer_again() -> None:
    now = [0.0]
    for round_ in range(2):
        saved = Saved()
        point = Checkpointer(f"t-{round_}", saved.append, clock=lambda: now[0])
        point.join()
        try:
            point.text("x")
            now[0] += 1.0
            await saved.wait_for(1)
        finally:
            point.leave()
        assert _Ticker.current().members == {}
