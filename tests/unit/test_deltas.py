"""Streamed deltas merged on a tick (protocol.md section 7.2)."""

from __future__ import annotations

from collections.abc import Callable

import anyio

from jpd.core.deltas import DeltaBatcher
from jpd.protocol.turn_notes import DeltaKind

Published = list[tuple[DeltaKind, str]]


def _record(published: Published) -> Callable[[DeltaKind, str], None]:
    return lambda kind, text: published.append((kind, text))


async def test_first_delta_goes_out_at_once_and_the_burst_after_it_is_merged() -> None:
    published: Published = []
    batcher = DeltaBatcher(_record(published), tick=0.05)
    batcher.add("text_delta", "Hello")
    assert published == [("text_delta", "Hello")]  # not held back
    for piece in (" the", "re", ","):
        batcher.add("text_delta", piece)
    assert len(published) == 1  # held for the tick
    await anyio.sleep(0.15)  # the loop's timer publishes it, no task runs for it
    assert published == [("text_delta", "Hello"), ("text_delta", " there,")]


async def test_a_flush_before_the_tick_leaves_the_timer_nothing_to_publish() -> None:
    published: Published = []
    batcher = DeltaBatcher(_record(published), tick=0.05)
    batcher.add("text_delta", "a")
    batcher.add("text_delta", "b")  # held: the timer is set
    batcher.flush()  # another event goes out: what is held goes before it
    batcher.add("text_delta", "c")  # within a tick of that publish: held again
    await anyio.sleep(0.15)
    assert published == [("text_delta", "a"), ("text_delta", "b"), ("text_delta", "c")]


async def test_flush_keeps_order_across_kinds() -> None:
    published: Published = []
    batcher = DeltaBatcher(_record(published), tick=10.0)
    batcher.add("reasoning_delta", "think")
    batcher.add("reasoning_delta", "ing")
    batcher.add("text_delta", "an")  # a kind change publishes what is held first
    batcher.add("text_delta", "swer")
    batcher.flush()
    assert published == [
        ("reasoning_delta", "think"),
        ("reasoning_delta", "ing"),
        ("text_delta", "answer"),
    ]
