"""The collector's pacer (jpd.core.gc_pacer): a young generation that went a tick
without a collection is collected then, whatever the collector's count says."""

from __future__ import annotations

import gc
import itertools
import threading
from collections.abc import Callable, Iterator

import pytest

from jpd.core import gc_pacer
from jpd.core.gc_pacer import GcPacer


class _Made:
    """A container object of its own (lists and dicts may come from free lists, which
    the collector's count does not see)."""


def _made(count: int) -> list[_Made]:
    return [_Made() for _ in range(count)]


def _working() -> Callable[[], float]:
    """A CPU clock of a process that works all the time (a second each look)."""
    used = itertools.count()
    return lambda: float(next(used))


@pytest.fixture
def collections() -> Iterator[list[int]]:
    """The generations collected while the test runs."""
    seen: list[int] = []

    def note(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            seen.append(info["generation"])

    gc.callbacks.append(note)
    try:
        yield seen
    finally:
        gc.callbacks.remove(note)


def test_a_tick_without_a_collection_collects_the_young_generation(
    collections: list[int],
) -> None:
    pacer = GcPacer(_working())
    made = _made(5)  # a few new objects, the count held down
    collected = pacer.tick()
    assert made
    assert collected in (0, 1)
    assert collections[-1] == collected


def test_a_collection_since_the_last_look_is_enough(collections: list[int]) -> None:
    pacer = GcPacer(_working())
    gc.collect(0)  # the collector's own pass, say
    before = len(collections)
    assert pacer.tick() is None
    assert len(collections) == before
    made = _made(5)
    assert pacer.tick() is not None  # then none came: the next look collects
    assert made


def test_a_process_doing_little_is_left_to_the_collector(collections: list[int]) -> None:
    pacer = GcPacer(lambda: 0.0)  # no CPU used: a few turns, say
    made = _made(5)
    assert pacer.tick() is None
    assert pacer.tick() is None
    assert made
    assert collections == []


def test_the_middle_generation_when_its_count_is_due(
    collections: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    pacer = GcPacer(_working())
    threshold = gc.get_threshold()
    gc.set_threshold(threshold[0], 1, threshold[2])
    try:
        gc.collect(0)  # one young pass: the middle generation is due
        pacer = GcPacer(_working())
        made = _made(5)
        assert pacer.tick() == 1
        assert made
        assert collections[-1] == 1
    finally:
        gc.set_threshold(*threshold)


def test_nothing_while_the_collector_is_off(collections: list[int]) -> None:
    pacer = GcPacer(_working())
    gc.disable()
    try:
        made = _made(5)
        assert made
        assert pacer.tick() is None
        assert pacer.tick() is None
    finally:
        gc.enable()
    assert collections == []


def test_the_thread_looks_while_busy_and_idles_after(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gc_pacer, "TICK", 0.001)
    pacer = GcPacer(_working())
    looks = 0
    ended = threading.Event()
    again = threading.Event()

    def busy() -> bool:
        nonlocal looks
        looks += 1
        if looks >= 5:
            ended.set()
            return False
        return True

    pacer.start(busy)
    pacer.start(busy)  # one thread at a time
    assert ended.wait(10)

    def busy_again() -> bool:
        again.set()
        return False

    for _ in range(1000):  # the thread ends after its last look
        with pacer._lock:
            if not pacer._running:
                break
        ended.wait(0.01)
    thread = pacer._thread
    pacer.start(busy_again)  # looks again once it went idle
    assert again.wait(10)
    assert looks >= 5
    # The same thread, woken: no thread start (and GIL hand-over) on a turn's way.
    assert pacer._thread is thread and thread is not None and thread.is_alive()


def test_a_count_growing_is_left_to_the_collector(collections: list[int]) -> None:
    threshold = gc.get_threshold()
    gc.set_threshold(100_000, threshold[1], threshold[2])
    try:
        pacer = GcPacer(_working())
        kept = _made(20_000)  # the count grows by 20,000 containers
        assert pacer.tick() is None
        assert collections == []
        del kept[:10_000]  # then it went down: held down
        assert pacer.tick() is not None
        del kept
    finally:
        gc.set_threshold(*threshold)


class _Turns:
    def __init__(self) -> None:
        self.count = 1


def _pacing() -> bool:
    with gc_pacer._PACER._lock:
        return gc_pacer._PACER._running


def _until(done: Callable[[], bool]) -> bool:
    for _ in range(2000):
        if done():
            return True
        threading.Event().wait(0.005)
    return False


def test_one_pacer_while_turns_run_anywhere(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gc_pacer, "TICK", 0.001)
    first, second = _Turns(), _Turns()
    gc_pacer.pace_while_running(first)
    gc_pacer.pace_while_running(second)
    assert _pacing()
    first.count = 0
    assert _pacing()  # the second daemon's turn still runs
    second.count = 0
    assert _until(lambda: not _pacing())


def test_a_dropped_daemon_stops_counting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gc_pacer, "TICK", 0.001)
    left = _Turns()  # a test's daemon dropped with a turn never ended
    gc_pacer.pace_while_running(left)
    assert _pacing()
    del left
    gc.collect()
    assert _until(lambda: not _pacing())


def _fake_collect(monkeypatch: pytest.MonkeyPatch, found: list[int]) -> list[int]:
    """`gc.collect` replaced: each pass "finds" the next of `found`; the generations
    passed are returned (the real collector is left alone)."""
    passes: list[int] = []

    def collect(generation: int = 2) -> int:
        passes.append(generation)
        return found.pop(0)

    monkeypatch.setattr(gc, "collect", collect)
    return passes


def test_a_pass_that_found_no_garbage_skips_the_next_looks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Streaming turns: the count stays flat and nothing is garbage; a pass at every
    # look would only walk the waiting turns' live objects again.
    passes = _fake_collect(monkeypatch, [0, 0])
    pacer = GcPacer(_working())
    assert pacer.tick() is not None
    for _ in range(gc_pacer.QUIET_LOOKS):
        assert pacer.tick() is None
    assert len(passes) == 1
    assert pacer.tick() is not None
    assert len(passes) == 2


def test_a_pass_that_found_garbage_keeps_a_pass_at_every_look(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    passes = _fake_collect(monkeypatch, [12, 3, 0])
    pacer = GcPacer(_working())
    assert pacer.tick() is not None
    assert pacer.tick() is not None  # turns ending: their cycles are collected at once
    assert pacer.tick() is not None
    assert len(passes) == 3
    assert pacer.tick() is None  # the last found nothing
