"""Provider stream events are handed on merged per batch (jpd/llm/stream_reader.py)."""

from __future__ import annotations

import itertools
import time
from collections.abc import AsyncGenerator

import anyio
import anyio.lowlevel
import pytest

from jpd.llm.base import Finish, ReasoningDelta, StreamEvent, TextDelta, ToolCallEvent
from jpd.llm.stream_reader import Batch, Handler, stream_events


def test_runs_of_text_and_unsigned_reasoning_are_joined_in_order() -> None:
    call = ToolCallEvent(id="c", name="t", arguments={})
    signed = ReasoningDelta(text="", signature="sig")
    batch = Batch()
    batch.reasoning("th")
    batch.reasoning("ink")
    batch.add(signed)
    batch.text("a")
    batch.text("b")
    batch.add(call)
    batch.text("c")
    batch.add(Finish(reason="end_turn"))
    assert batch.text_seen
    assert batch.take() == [
        ReasoningDelta(text="think"),
        signed,
        TextDelta(text="ab"),
        call,
        TextDelta(text="c"),
        Finish(reason="end_turn"),
    ]
    assert batch.take() == []


def test_a_run_ends_where_the_other_kind_begins() -> None:
    batch = Batch()
    batch.text("a")
    batch.reasoning("r")
    batch.text("b")
    assert batch.take() == [TextDelta(text="a"), ReasoningDelta(text="r"), TextDelta(text="b")]


def _handler(fail_on: str = "") -> Handler:
    def handle(data: str, out: Batch) -> bool:
        if data == fail_on:
            raise ValueError("bad event")
        if data == "end":
            out.add(Finish(reason="end_turn"))
            return True
        out.text(data)
        return False

    return handle


async def _chunks(*chunks: bytes) -> AsyncGenerator[bytes, None]:
    for chunk in chunks:
        yield chunk


async def test_the_first_text_goes_alone_then_each_chunk_merged_and_reading_stops_at_the_end() -> (
    None
):
    body = _chunks(
        b"data: a\n\ndata: b\n\ndata: c\n\n", b"data: d\n\ndata: e\n\n", b"data: end\n\n"
    )
    events = [e async for e in stream_events(body, _handler())]
    assert events == [
        TextDelta(text="a"),
        TextDelta(text="bc"),
        TextDelta(text="de"),
        Finish(reason="end_turn"),
    ]


async def test_an_error_is_raised_after_the_events_before_it_in_its_chunk() -> None:
    body = _chunks(b"data: a\n\ndata: b\n\ndata: c\n\ndata: boom\n\ndata: d\n\n")
    seen: list[StreamEvent] = []
    with pytest.raises(ValueError, match="bad event"):
        async for event in stream_events(body, _handler(fail_on="boom")):
            seen.append(event)
    assert seen == [TextDelta(text="a"), TextDelta(text="bc")]


async def test_a_body_split_anywhere_decodes_utf8_and_drops_a_leading_bom() -> None:
    raw = "\ufeffdata: h\u00e9llo\n\n".encode()
    seen: list[str] = []

    def handle(data: str, out: Batch) -> bool:
        seen.append(data)
        return False

    assert [
        e async for e in stream_events(_chunks(*(raw[i : i + 1] for i in range(len(raw)))), handle)
    ] == []
    assert seen == ["h\u00e9llo"]


async def test_any_split_of_any_bytes_decodes_as_the_whole_body_does() -> None:
    # Whole chunks are decoded in one call, cut characters by the incremental decoder:
    # either way the text is the whole body's, invalid bytes replaced.
    raw = (
        "data: a\u00e9\U0001f600b\n\n".encode()
        + b"data: \xff\xe2\x82 x\xc3\n\n"
        + "data: \u20ac\n\n".encode()
    )
    expected = [line[6:] for line in raw.decode(errors="replace").split("\n\n")[:-1]]
    for cuts in itertools.combinations(range(1, len(raw)), 2):
        bounds = (0, *cuts, len(raw))
        chunks = [raw[a:b] for a, b in itertools.pairwise(bounds)]
        seen: list[str] = []

        def handle(data: str, out: Batch, seen: list[str] = seen) -> bool:
            seen.append(data)
            return False

        assert [e async for e in stream_events(_chunks(*chunks), handle)] == []
        assert seen == expected, chunks


async def test_other_tasks_run_while_chunks_already_read_are_handled() -> None:
    """A body whose chunks are all buffered never suspends the reader: the loop must still
    run other tasks (the writer to clients) between them."""
    ticks = 0
    seen: list[int] = []

    async def ticker() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await anyio.lowlevel.checkpoint()

    body = _chunks(*(f"data: w{i}\n\n".encode() for i in range(20)), b"data: end\n\n")
    async with anyio.create_task_group() as tg:
        tg.start_soon(ticker)
        await anyio.lowlevel.checkpoint()
        async for event in stream_events(body, _handler()):
            if isinstance(event, TextDelta):
                seen.append(ticks)
                time.sleep(0.002)  # noqa: ASYNC251 - a consumer busy with the delta
        tg.cancel_scope.cancel()
    assert len(seen) == 20
    advanced = sum(1 for before, after in itertools.pairwise(seen) if after > before)
    assert advanced >= len(seen) - 2


async def test_no_layer_keeps_a_delta_while_the_next_chunk_is_awaited() -> None:
    # A thousand streams wait at once: what a layer keeps of the last token (the delta,
    # its parts) stays in the collector's young generation, which every pass walks.
    import random
    import weakref

    from jpd.llm.anthropic import TEXT_EVENT, _StreamState
    from jpd.llm.retry import RetryPolicy, run_with_retries

    def text(piece: str) -> bytes:
        data = '{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"%s"}}'
        return b"event: content_block_delta\ndata: " + (data % piece).encode() + b"\n\n"

    taken: list[weakref.ref[StreamEvent]] = []
    alive: list[bool] = []

    async def chunks() -> AsyncGenerator[bytes, None]:
        for chunk in (text("a"), text("b"), text("c") + text("d"), text("e"), text("f")):
            yield chunk
            # Awaiting the next chunk: the consumer let go of what it took.
            alive.append(any(ref() is not None for ref in taken))
        yield b'event: message_stop\ndata: {"type":"message_stop"}\n\n'

    def attempt() -> AsyncGenerator[StreamEvent, None]:
        return stream_events(chunks(), _StreamState(()).feed, text_event=TEXT_EVENT)

    texts = []
    async for event in run_with_retries(attempt, RetryPolicy(), random.Random(0)):
        if isinstance(event, TextDelta):
            texts.append(event.text)
            taken.append(weakref.ref(event))
        del event
    assert texts == ["a", "b", "cd", "e", "f"]
    assert alive == [False] * 5
