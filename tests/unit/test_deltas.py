"""Streamed deltas merged on a tick (protocol.md section 7.2)."""

from __future__ import annotations

import anyio

from jpd.core.deltas import DeltaBatcher
from jpd.protocol.turn_events import TurnEvent


def _wire(events: list[TurnEvent]) -> list[tuple[str, str]]:
    return [(e.kind, getattr(e, "text", "")) for e in events]


async def test_first_delta_goes_out_at_once_and_the_burst_after_it_is_merged() -> None:
    published: list[TurnEvent] = []
    batcher = DeltaBatcher(published.append, tick=0.05)
    async with anyio.create_task_group() as tg:
        tg.start_soon(batcher.run)
        batcher.add("text", "Hello")
        assert _wire(published) == [("text_delta", "Hello")]  # not held back
        for piece in (" the", "re", ","):
            batcher.add("text", piece)
        assert len(published) == 1  # held for the tick
        await anyio.sleep(0.15)
        assert _wire(published) == [("text_delta", "Hello"), ("text_delta", " there,")]
        tg.cancel_scope.cancel()


async def test_flush_keeps_order_across_kinds() -> None:
    published: list[TurnEvent] = []
    batcher = DeltaBatcher(published.append, tick=10.0)
    batcher.add("reasoning", "think")
    batcher.add("reasoning", "ing")
    batcher.add("text", "an")  # a kind change publishes what is held first
    batcher.add("text", "swer")
    batcher.flush()
    assert _wire(published) == [
        ("reasoning_delta", "think"),
        ("reasoning_delta", "ing"),
        ("text_delta", "answer"),
    ]
