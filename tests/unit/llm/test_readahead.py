"""Reading a body ahead of its parser (jpd/llm/readahead.py, protocol.md 7.2): what
arrives while the parser works comes as one piece, nothing waits to be batched, errors
and closing behave as if the parser read the body itself."""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator

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
    async with anyio.create_task_group() as tg:
        reader = Readahead(tg)
        return [piece async for piece in reader.batches(chunks)]


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
    async with anyio.create_task_group() as tg:
        async for piece in Readahead(tg).batches(slow()):
            seen.append(piece)
            arrived.set()
    assert seen == [b"first", b"second"]


async def test_the_readers_error_comes_after_the_bytes_before_it() -> None:
    async def broken() -> AsyncGenerator[bytes, None]:
        yield b"a"
        yield b"b"
        raise OSError("connection reset")

    seen: list[bytes] = []
    async with anyio.create_task_group() as tg:
        with pytest.raises(OSError, match="connection reset"):
            async for piece in Readahead(tg).batches(broken()):
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

    async with anyio.create_task_group() as tg:
        pieces = Readahead(tg).batches(endless())
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
