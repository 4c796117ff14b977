"""Checkpoints while model calls stream (jpd.core.checkpoints): one timer serves every
call on the event loop, and when the call driving it ends, another call takes it over."""

from __future__ import annotations

import anyio

from jpd.conversation import events as ev
from jpd.core.checkpoints import Checkpointer


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


async def test_one_timer_saves_every_call_and_is_handed_over_when_its_call_ends() -> None:
    now = [0.0]
    saved = {name: Saved() for name in ("a", "b", "c")}
    points = {
        name: Checkpointer(f"t-{name}", saved[name].append, clock=lambda: now[0]) for name in saved
    }
    scopes = {name: anyio.CancelScope() for name in points}

    async def run(name: str) -> None:
        with scopes[name]:
            await points[name].run()

    async with anyio.create_task_group() as tg:
        for name in points:
            tg.start_soon(run, name)
        for name, point in points.items():
            point.text(f"hello {name}")
        now[0] += 1.0  # all due at the next tick
        for name in points:
            await saved[name].wait_for(1)
        scopes["a"].cancel()  # the first to run drove the timer: its call ends
        for name in ("b", "c"):
            points[name].text(" again")
        now[0] += 1.0
        for name in ("b", "c"):
            await saved[name].wait_for(2)
        tg.cancel_scope.cancel()
    assert messages(saved["a"]) == ["hello a"]
    assert messages(saved["b"]) == ["hello b", " again"]
    assert messages(saved["c"]) == ["hello c", " again"]


async def test_a_new_call_after_all_ended_starts_the_timer_again() -> None:
    now = [0.0]
    for round_ in range(2):
        saved = Saved()
        point = Checkpointer(f"t-{round_}", saved.append, clock=lambda: now[0])
        async with anyio.create_task_group() as tg:
            tg.start_soon(point.run)
            point.text("x")
            now[0] += 1.0
            await saved.wait_for(1)
            tg.cancel_scope.cancel()
