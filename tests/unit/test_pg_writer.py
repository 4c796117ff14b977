"""The fleet store's ordered writer: appends are written in order by a task on the
event loop, what is queued in one batch; after a failed write nothing more of that
conversation is written; `when_written` calls back once a mark is committed."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from jpd.conversation.pg.writer import OrderedWriter

KEY = object()  # one lease


async def test_writes_in_order_in_batches_and_waits_for_them() -> None:
    done: list[int] = []
    batches: list[int] = []
    gate = asyncio.Event()

    async def write(key: Any, batch: list[dict[str, Any]]) -> None:
        await gate.wait()
        batches.append(len(batch))
        done.extend(params["n"] for params in batch)

    writer = OrderedWriter(write)
    writer.submit("c-1", KEY, {"n": 0})
    await asyncio.sleep(0)  # the first write starts and waits on the gate
    for n in range(1, 50):
        writer.submit("c-1", KEY, {"n": n})
    assert writer.pending("c-1")
    gate.set()
    await writer.written("c-1")
    assert done == list(range(50))
    assert len(batches) < 50  # what queued meanwhile went together
    assert not writer.pending("c-1")


async def test_another_key_is_another_batch() -> None:
    seen: list[tuple[Any, list[int]]] = []
    gate = asyncio.Event()

    async def write(key: Any, batch: list[dict[str, Any]]) -> None:
        await gate.wait()
        seen.append((key, [params["n"] for params in batch]))

    writer = OrderedWriter(write)
    other = object()
    writer.submit("c-1", KEY, {"n": 0})
    writer.submit("c-1", KEY, {"n": 1})
    writer.submit("c-1", other, {"n": 2})
    gate.set()
    await writer.written("c-1")
    assert [n for _, ns in seen for n in ns] == [0, 1, 2]
    assert all(key is (other if 2 in ns else KEY) for key, ns in seen)


async def test_a_failed_write_stops_the_conversation_until_forgotten() -> None:
    done: list[int] = []

    async def write(key: Any, batch: list[dict[str, Any]]) -> None:
        for params in batch:
            if params["n"] == 3:
                raise RuntimeError("lease lost")
        done.extend(params["n"] for params in batch)

    writer = OrderedWriter(write)
    for n in range(10):
        try:
            writer.submit("c-1", KEY, {"n": n})
        except RuntimeError:  # the failure may be known already: then append raises it
            break
        await asyncio.sleep(0)  # some batches are written between appends
    with pytest.raises(RuntimeError, match="lease lost"):
        await writer.written("c-1")
    assert 3 not in done and all(n < 3 for n in done)  # nothing at or after the hole
    with pytest.raises(RuntimeError, match="lease lost"):
        writer.submit("c-1", KEY, {"n": 10})
    await writer.written("c-1", check=False)  # a reader only waits
    writer.submit("c-2", KEY, {"n": 20})  # other conversations go on
    await writer.written("c-2")
    await writer.forget("c-1")  # a new lease
    writer.submit("c-1", KEY, {"n": 11})
    await writer.written("c-1")
    assert done[-2:] == [20, 11]


async def test_marks_are_called_back_once_committed_or_failed() -> None:
    gate = asyncio.Event()

    async def write(key: Any, batch: list[dict[str, Any]]) -> None:
        await gate.wait()
        if any(params.get("fail") for params in batch):
            raise RuntimeError("outage")

    writer = OrderedWriter(write)
    calls: list[tuple[int, bool]] = []
    called = asyncio.Event()

    def callback(done: int, ok: bool) -> None:
        calls.append((done, ok))
        called.set()

    assert writer.unwritten("c-1") is None
    first = writer.submit("c-1", KEY, {})
    assert writer.unwritten("c-1") == first
    writer.when_written("c-1", first, callback)
    await asyncio.sleep(0)
    assert calls == []  # held by the gate: not committed yet
    gate.set()
    await asyncio.wait_for(called.wait(), 5)
    assert calls == [(first, True)]
    await writer.written("c-1")
    assert writer.unwritten("c-1") is None
    writer.when_written("c-1", first, callback)  # already: at once
    assert calls[-1] == (first, True)

    gate.clear()
    called.clear()
    second = writer.submit("c-1", KEY, {"fail": True})
    writer.when_written("c-1", second, callback)
    gate.set()
    await asyncio.wait_for(called.wait(), 5)
    done, ok = calls[-1]
    assert not ok and done < second
    assert writer.unwritten("c-1") is None  # nothing more will be written
