"""The per-connection send queue: bounded by bytes, lagging, catching up, stuck."""

from __future__ import annotations

import json

import anyio
import anyio.lowlevel
import pytest

from jpd.rpc.outbox import HARD_FACTOR, Outbox

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def lagged(cid: str, seq: int) -> bytes:
    return json.dumps({"lagged": cid, "fromSeq": seq}).encode()


def event(seq: int, size: int = 100) -> bytes:
    return json.dumps({"seq": seq, "pad": "x" * size}).encode()


async def drain(box: Outbox) -> bytes:
    out = b""
    with anyio.fail_after(1):
        while box.queued:
            data = await box.take()
            assert data is not None
            out += data
    return out


async def test_events_stop_past_the_limit_and_the_client_is_told_where_to_resume() -> None:
    box = Outbox(1000, lagged, lambda: None)
    sent = [seq for seq in range(1, 30) if box.put_event("c1", seq, event(seq))]
    assert sent == list(range(1, len(sent) + 1)) and 5 < len(sent) < 29
    assert box.lagging and box.queued < 1000 + len(event(1))
    box.put(b"response")  # responses are never dropped
    assert not box.put_event("c1", 40, event(40))  # still lagging
    assert box.put_event("c2", 1, event(1)) is False  # the backlog is over the limit
    data = await drain(box)
    assert data.endswith(lagged("c1", sent[-1]) + lagged("c2", 0))
    assert b"response" in data and b'"seq": 40' not in data
    # Told, but still dropping until the client re-attaches.
    assert not box.put_event("c1", 41, event(41))
    box.reattached("c1")
    assert box.put_event("c1", 42, event(42)) and box.lagging  # c2 still dropped
    box.reattached("c2")
    assert not box.lagging


async def test_one_event_larger_than_the_limit_reaches_a_client_that_keeps_up() -> None:
    box = Outbox(1000, lagged, lambda: None)
    assert box.put_event("c1", 1, event(1, size=5000))
    assert await drain(box) == event(1, size=5000)
    assert not box.lagging


async def test_a_client_that_reads_nothing_at_all_is_stuck() -> None:
    stuck: list[bool] = []
    box = Outbox(1000, lagged, lambda: stuck.append(True))
    for _ in range(HARD_FACTOR * 10 + 1):
        box.put(b"r" * 100)
    assert stuck == [True]
    box.put(b"more")  # closed: dropped, memory stays bounded
    assert box.queued <= HARD_FACTOR * 1000 + 100


async def test_the_reader_waits_for_room() -> None:
    box = Outbox(1000, lagged, lambda: None)
    box.put(b"r" * 1500)
    waited = anyio.Event()

    async def reader() -> None:
        await box.wait_room()
        waited.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(reader)
        await anyio.sleep(0.01)
        assert not waited.is_set()
        await box.take()
        with anyio.fail_after(1):
            await waited.wait()


async def test_answers_go_ahead_of_queued_events_and_keep_their_own_order() -> None:
    box = Outbox(1 << 20, lagged, lambda: None)
    for seq in range(1, 600):  # more than one write's worth of frames
        assert box.put_event("c1", seq, event(seq, size=10))
    box.put(b"<ordered answer>")
    box.put_answer(b"<answer 1>")
    box.put_answer(b"<answer 2>")
    first = await box.take()
    assert first is not None and first.startswith(b"<answer 1><answer 2>")
    rest = first + await drain(box)
    # The ordered frame keeps its place after every event queued before it.
    assert rest.index(b'"seq": 599') < rest.index(b"<ordered answer>")
    assert rest.count(b'"seq": ') == 599 and box.queued == 0


async def test_answers_count_towards_a_stuck_client() -> None:
    stuck: list[bool] = []
    box = Outbox(100, lagged, lambda: stuck.append(True))
    box.put_answer(b"x" * (HARD_FACTOR * 100 + 1))
    assert stuck == [True]
    box.put_answer(b"after")  # closed: dropped
    assert await box.take() is not None and await box.take() is None


async def test_a_waiting_writer_wakes_for_each_burst_and_misses_no_frame() -> None:
    """The writer is woken once per burst of events (not once per event): every burst
    still reaches it, whether it was waiting, writing, or about to wait again."""
    box = Outbox(1 << 20, lagged, lambda: None)
    taken: list[bytes] = []
    seq = 0
    ended = anyio.Event()

    async def writer() -> None:
        while (data := await box.take()) is not None:
            taken.append(data)
            if data.endswith(b"end"):
                ended.set()
            await anyio.lowlevel.checkpoint()  # "writing": events may queue meanwhile

    async with anyio.create_task_group() as tg:
        tg.start_soon(writer)
        for burst in (1, 3, 1, 5, 2):
            for _ in range(burst):
                seq += 1
                assert box.put_event("c1", seq, event(seq, 1))
            for _ in range(burst % 3):
                await anyio.lowlevel.checkpoint()
        box.put(b"end")
        with anyio.fail_after(1):
            await ended.wait()
        box.close()
    expected = b"".join(event(n, 1) for n in range(1, seq + 1)) + b"end"
    assert b"".join(taken) == expected
