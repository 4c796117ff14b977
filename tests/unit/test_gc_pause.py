"""Tests for `jpd.conversation.gc_pause`: a large log loads with the cycle collector
paused, and the collector is back on (its loaded objects frozen) when the load ends."""

from __future__ import annotations

import gc
import json
import threading
from collections.abc import Iterator

import pytest

from jpd.conversation import gc_pause
from jpd.conversation.gc_pause import LARGE_LOG_LINES, gc_paused
from jpd.conversation.logfile import parse_log


@pytest.fixture(autouse=True)
def _restore_gc() -> Iterator[None]:
    enabled = gc.isenabled()
    yield
    gc.unfreeze()  # frozen objects go back to the oldest generation
    if enabled:
        gc.enable()


def test_a_small_load_leaves_the_collector_alone() -> None:
    frozen = gc.get_freeze_count()
    with gc_paused(LARGE_LOG_LINES - 1):
        assert gc.isenabled()
    assert gc.get_freeze_count() == frozen


def test_a_large_load_pauses_then_freezes_what_it_made() -> None:
    gc.unfreeze()
    with gc_paused(LARGE_LOG_LINES):
        assert not gc.isenabled()
        made = [{"n": i} for i in range(1000)]
    assert gc.isenabled()
    assert gc.get_freeze_count() >= len(made)


def test_nested_and_concurrent_pauses_enable_once_the_last_ends() -> None:
    inner_entered = threading.Event()
    release = threading.Event()

    def other() -> None:
        with gc_paused(LARGE_LOG_LINES):
            inner_entered.set()
            release.wait(5)

    thread = threading.Thread(target=other)
    with gc_paused(LARGE_LOG_LINES):
        thread.start()
        assert inner_entered.wait(5)
    assert not gc.isenabled()  # the other load still runs
    release.set()
    thread.join(5)
    assert gc.isenabled()


def test_a_collector_the_host_disabled_stays_disabled() -> None:
    gc.disable()
    with gc_paused(LARGE_LOG_LINES):
        pass
    assert not gc.isenabled()


def test_parse_log_of_a_large_log_pauses_and_restores(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[bool] = []
    real = gc_pause._Pause.paused

    def spy(self: gc_pause._Pause) -> object:
        seen.append(True)
        return real(self)

    monkeypatch.setattr(gc_pause._Pause, "paused", spy)
    line = json.dumps({"type": "chat_request", "timestamp": "2026-01-01T00:00:00Z", "content": "x"})
    events = parse_log(("\n".join([line] * LARGE_LOG_LINES) + "\n").encode(), "big")
    assert len(events) == LARGE_LOG_LINES
    assert seen and gc.isenabled()
