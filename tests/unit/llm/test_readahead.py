"""Reading a body ahead of its parser (jpd/llm/readahead.py, protocol.md 7.2): what
arrives while the parser works comes as one piece, nothing waits to be batched, errors
and closing behave as if the parser read the body itself."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import aclosing
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from jpd.llm import readahead
from jpd.llm.base import Finish, StreamEvent, TextDelta
from jpd.llm.errors import ProviderError
from jpd.llm.readahead import Readahead, read_ahead

CHUNKS = [f"c{i};".encode() for i in range(10)]


async def _buffered(chunks: list[bytes]) -> AsyncGenerator[bytes, None]:
    """A body the HTTP client already holds: no chunk suspends."""
    for chunk in chunks:
        yield chunk


async def _pieces(chunks: AsyncIterator[bytes]) -> list[bytes]:
    return [piece async for piece in Readahead().batches(chunks)]


async def test_what_arrives_while_the_parser_waits_comes_as_one_piece(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(readahead, "HANDOVER", 3600.0)
    pieces = await _pieces(_buffered(CHUNKS))
    # The opening chunks go over one by one (the first text is among them); the
    # rest was read without a pause, so it comes together.
    opening = readahead.OPENING
    assert pieces == [*CHUNKS[:opening], b"".join(CHUNKS[opening:])]


async def test_a_reader_that_never_waits_still_hands_over_every_handover(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(readahead, "HANDOVER", 0.0)
    pieces = await _pieces(_buffered(CHUNKS))
    opening = readahead.OPENING
    assert pieces[:opening] == CHUNKS[:opening] and b"".join(pieces) == b"".join(CHUNKS)
    # After waking the parser the reader reads on once before it lets it run (normally
    # it then waits for the network anyway): never more than two chunks per piece.
    assert all(len(piece) <= 2 * len(CHUNKS[0]) for piece in pieces)
    assert len(pieces) >= opening + (len(CHUNKS) - opening) // 2


async def test_a_chunk_after_a_wait_is_handed_over_at_once() -> None:
    arrived = anyio.Event()

    async def slow() -> AsyncGenerator[bytes, None]:
        yield b"first"
        await arrived.wait()
        yield b"second"

    seen: list[bytes] = []
    async for piece in Readahead().batches(slow()):
        seen.append(piece)
        arrived.set()
    assert seen == [b"first", b"second"]


async def test_the_readers_error_comes_after_the_bytes_before_it() -> None:
    async def broken() -> AsyncGenerator[bytes, None]:
        yield b"a"
        yield b"b"
        raise OSError("connection reset")

    seen: list[bytes] = []
    with pytest.raises(OSError, match="connection reset"):
        async for piece in Readahead().batches(broken()):
            seen.append(piece)
    assert b"".join(seen) == b"ab"


async def test_closing_the_pieces_stops_the_reader_before_it_returns() -> None:
    stopped: list[str] = []

    async def endless() -> AsyncGenerator[bytes, None]:
        try:
            yield b"a"
            await anyio.sleep_forever()
            yield b"never"  # pragma: no cover
        finally:
            stopped.append("reader")

    pieces = Readahead().batches(endless())
    assert await anext(pieces) == b"a"
    await pieces.aclose()
    # The body may be closed now: its reader is gone.
    assert stopped == ["reader"]


async def test_read_ahead_raises_errors_as_they_are() -> None:
    async def failing(reader: Readahead) -> AsyncGenerator[StreamEvent, None]:
        yield TextDelta(text="partial")
        raise ProviderError("anthropic: server error")

    seen: list[StreamEvent] = []
    with pytest.raises(ProviderError, match="server error"):
        async with read_ahead(failing) as events:
            async for event in events:
                seen.append(event)
    assert seen == [TextDelta(text="partial")]

    async def fine(reader: Readahead) -> AsyncGenerator[StreamEvent, None]:
        yield Finish(reason="end_turn")

    with pytest.raises(KeyError):
        async with read_ahead(fine) as events:
            async for _ in events:
                raise KeyError("the consumer's own error")


async def test_leaving_the_block_early_stops_every_reader() -> None:
    stopped = anyio.Event()

    async def endless() -> AsyncGenerator[bytes, None]:
        try:
            while True:
                yield b"x"
                await anyio.sleep(0.001)
        finally:
            stopped.set()

    async def events(reader: Readahead) -> AsyncGenerator[StreamEvent, None]:
        async for piece in reader.batches(endless()):
            yield TextDelta(text=piece.decode())

    with anyio.fail_after(5):
        async with read_ahead(events) as stream:
            async for _ in stream:
                break
        assert stopped.is_set()


async def test_a_body_whose_reads_wait_is_read_by_its_parser_without_a_task(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A token every few milliseconds: each read waits for the network, so a task between
    # body and parser would only add a hand-over per chunk.
    async def no_task(*args: object) -> None:
        raise AssertionError("a reader task started for a slow body")

    monkeypatch.setattr(readahead, "_read", no_task)

    async def paced() -> AsyncGenerator[bytes, None]:
        for chunk in CHUNKS:
            await anyio.sleep(0.002)
            yield chunk

    assert await _pieces(paced()) == CHUNKS


def _fast_then(tail: AsyncGenerator[bytes, None] | None = None) -> AsyncGenerator[bytes, None]:
    """A body whose first chunks are all there at once (a reader task starts), then
    whatever `tail` yields."""

    async def body() -> AsyncGenerator[bytes, None]:
        for chunk in CHUNKS:
            yield chunk
        if tail is not None:
            async with aclosing(tail):
                async for chunk in tail:
                    yield chunk

    return body()


async def _deltas(
    reader: Readahead, body: AsyncGenerator[bytes, None]
) -> AsyncGenerator[StreamEvent, None]:
    async for piece in reader.batches(body):
        yield TextDelta(text=piece.decode())


async def test_a_slow_stream_opens_no_task_group_and_starts_no_task(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def no_group() -> None:
        raise AssertionError("a task group opened for a slow stream")

    monkeypatch.setattr(anyio, "create_task_group", no_group)

    async def paced() -> AsyncGenerator[bytes, None]:
        for chunk in CHUNKS:
            await anyio.sleep(0.002)
            yield chunk

    before = len(asyncio.all_tasks())
    counts: list[int] = []
    seen: list[str] = []
    async with read_ahead(lambda reader: _deltas(reader, paced())) as events:
        async for event in events:
            assert isinstance(event, TextDelta)
            seen.append(event.text)
            counts.append(len(asyncio.all_tasks()))
    assert "".join(seen).encode() == b"".join(CHUNKS)
    assert set(counts) == {before}


async def test_a_fast_streams_reader_error_comes_out_of_the_block(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    readers: list[asyncio.Task[object] | None] = []
    read = readahead._read

    async def recorded(*args: Any) -> None:
        readers.append(asyncio.current_task())
        await read(*args)

    monkeypatch.setattr(readahead, "_read", recorded)

    async def broken() -> AsyncGenerator[bytes, None]:
        raise OSError("connection reset")
        yield b""  # pragma: no cover

    main = asyncio.current_task()
    before = len(asyncio.all_tasks())
    seen: list[str] = []
    with pytest.raises(OSError, match="connection reset"):
        async with read_ahead(lambda reader: _deltas(reader, _fast_then(broken()))) as events:
            async for event in events:
                assert isinstance(event, TextDelta)
                seen.append(event.text)
    assert "".join(seen).encode() == b"".join(CHUNKS)
    # The body was read on by a task of its own, gone once the block ended.
    assert len(readers) == 1 and readers[0] is not main
    assert len(asyncio.all_tasks()) == before


async def test_cancelling_the_consumer_stops_the_reader_task() -> None:
    stopped = anyio.Event()
    reading = anyio.Event()

    async def stalls() -> AsyncGenerator[bytes, None]:
        try:
            reading.set()
            await anyio.sleep_forever()
            yield b"never"  # pragma: no cover
        finally:
            stopped.set()

    before = len(asyncio.all_tasks())
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:

            async def consume() -> None:
                async with read_ahead(lambda r: _deltas(r, _fast_then(stalls()))) as events:
                    async for _ in events:
                        pass

            tg.start_soon(consume)
            await reading.wait()
            assert len(asyncio.all_tasks()) == before + 2  # the consumer and its reader
            tg.cancel_scope.cancel()
    # The reader was stopped (and its body closed) before the consumer's block ended.
    assert stopped.is_set()
    assert len(asyncio.all_tasks()) == before


async def test_a_consumer_that_stops_early_stops_the_reader_task() -> None:
    stopped = anyio.Event()

    async def endless() -> AsyncGenerator[bytes, None]:
        try:
            while True:
                yield b"x"
        finally:
            stopped.set()

    before = len(asyncio.all_tasks())
    with anyio.fail_after(5):
        async with read_ahead(lambda r: _deltas(r, _fast_then(endless()))) as events:
            count = 0
            async for _ in events:
                count += 1
                if count > readahead.OPENING + 2:
                    break
    assert stopped.is_set()
    assert len(asyncio.all_tasks()) == before
