"""The fleet store's ordered writer: appends are written in order off the caller's
thread; after a failed write nothing more of that conversation is written."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from jpd.conversation.pg.writer import OrderedWriter


def test_writes_in_order_and_waits_for_them() -> None:
    writer = OrderedWriter()
    done: list[int] = []
    gate = threading.Event()

    def write(params: dict[str, Any]) -> None:
        gate.wait(5)
        done.append(params["n"])

    for n in range(50):
        writer.submit("c-1", write, {"n": n})
    assert writer.pending("c-1")  # the first write waits on the gate
    gate.set()
    writer.written("c-1")
    assert done == list(range(50))
    assert not writer.pending("c-1")


def test_a_failed_write_stops_the_conversation_until_forgotten() -> None:
    writer = OrderedWriter()
    done: list[int] = []

    def write(params: dict[str, Any]) -> None:
        if params["n"] == 3:
            raise RuntimeError("lease lost")
        done.append(params["n"])

    for n in range(10):
        try:
            writer.submit("c-1", write, {"n": n})
        except RuntimeError:  # the failure may be known already: then append raises it
            break
    with pytest.raises(RuntimeError, match="lease lost"):
        writer.written("c-1")
    assert done == [0, 1, 2]  # nothing after the hole
    with pytest.raises(RuntimeError, match="lease lost"):
        writer.submit("c-1", write, {"n": 10})
    writer.written("c-1", check=False)  # a reader only waits
    writer.submit("c-2", write, {"n": 20})  # other conversations go on
    writer.written("c-2")
    writer.forget("c-1")  # a new lease
    writer.submit("c-1", write, {"n": 11})
    writer.written("c-1")
    assert done == [0, 1, 2, 20, 11]
