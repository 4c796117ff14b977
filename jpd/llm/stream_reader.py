"""From a provider's SSE body to its stream events, a network chunk at a time.

Each provider turns one SSE event into zero or more `StreamEvent`s (its own
`handle`); this module runs that over the body and hands the results on merged:
consecutive text (or unsigned reasoning) deltas from one chunk become one delta.
A fast stream then costs the layers above (retries, the turn loop, the store and
the clients) once per chunk instead of once per token, which is what lets a
daemon's total approach a direct reader's (protocol.md 7.2 already lets deltas
that arrive together be merged). The first text is never held back for the rest
of its chunk.
"""

from __future__ import annotations

import codecs
import time
from collections.abc import AsyncGenerator, AsyncIterable, AsyncIterator, Callable

import anyio
import anyio.lowlevel

from jpd.llm.base import ReasoningDelta, StreamEvent, TextDelta
from jpd.llm.sse import SSEDecoder, SSEEvent

YIELD_INTERVAL = 0.001
"""Longest stretch (seconds) a fast stream is read without letting other tasks run."""
DRAIN_TIMEOUT = 1.0
"""Longest wait (seconds) for the body's end after the final event (see `_drain`)."""

Handler = Callable[[SSEEvent], tuple[list[StreamEvent], bool]]
"""One SSE event to its stream events, and whether the response is complete."""


def merge_deltas(events: list[StreamEvent]) -> list[StreamEvent]:
    """Join runs of text deltas, and runs of unsigned reasoning deltas, into one each."""
    merged: list[StreamEvent] = []
    for event in events:
        last = merged[-1] if merged else None
        if isinstance(event, TextDelta) and isinstance(last, TextDelta):
            merged[-1] = TextDelta(text=last.text + event.text)
        elif (
            isinstance(event, ReasoningDelta)
            and isinstance(last, ReasoningDelta)
            and event.signature is None
            and last.signature is None
        ):
            merged[-1] = ReasoningDelta(text=last.text + event.text)
        else:
            merged.append(event)
    return merged


async def stream_events(
    chunks: AsyncIterable[bytes], handle: Handler, interval: float = YIELD_INTERVAL
) -> AsyncGenerator[StreamEvent, None]:
    """Run `handle` over the SSE events of `chunks` (a UTF-8 body, e.g.
    `httpx.Response.aiter_bytes()`) and yield what it makes, merged per chunk; stop once
    `handle` says the response is complete.

    An error `handle` raises is raised after the events before it in the chunk were
    yielded, as when they were handed on one by one.

    Reading a socket that already holds data never suspends (buffered bytes are
    returned at once), so a stream arriving faster than the daemon handles it would
    keep every other task waiting until the buffer ran dry: among them the writer
    that forwards the deltas to clients. So every `interval` seconds, after the
    consumer has handled what was yielded, the event loop runs other tasks.
    """
    decoder = SSEDecoder()
    utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")
    text_seen = False
    first_chunk = True
    last = time.perf_counter()
    reader = aiter(chunks)
    ended = False
    while not ended:
        try:
            chunk = await anext(reader)
        except StopAsyncIteration:  # end of body: what the decoder still holds
            ended = True
            batch = decoder.feed(utf8.decode(b"", final=True)) + decoder.close()
        else:
            text = utf8.decode(chunk)
            if first_chunk and text:
                # A leading byte-order mark is not part of the first field name.
                text = text.removeprefix("\ufeff")
                first_chunk = False
            batch = decoder.feed(text)
        pending: list[StreamEvent] = []
        complete = False
        failure: Exception | None = None
        for sse in batch:
            try:
                events, complete = handle(sse)
            except Exception as exc:  # raised below, after what came before it
                failure = exc
                break
            pending += events
            if complete:
                break
            if not text_seen and any(isinstance(e, TextDelta) for e in events):
                # The first text goes out at once, not after the whole chunk, and
                # the writer to clients gets to run before the rest is parsed.
                text_seen = True
                for event in merge_deltas(pending):
                    yield event
                pending = []
                await anyio.lowlevel.checkpoint()
                last = time.perf_counter()
        for event in merge_deltas(pending):
            yield event
        if failure is not None:
            raise failure
        if complete:
            await _drain(reader)
            return
        now = time.perf_counter()
        if now - last >= interval:
            await anyio.lowlevel.checkpoint()
            last = time.perf_counter()


async def _drain(reader: AsyncIterator[bytes]) -> None:
    """Read what follows the final event: normally just the end of the body, already
    there. A body left unread makes the HTTP client close the connection instead of
    keeping it for the next model call, which would then pay a new TCP (and TLS)
    handshake. A server that goes on sending is cut off after `DRAIN_TIMEOUT`."""
    with anyio.move_on_after(DRAIN_TIMEOUT):
        async for _ in reader:
            pass
