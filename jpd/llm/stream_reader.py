"""From a provider's SSE body to its stream events, a batch of bytes at a time.

Each provider turns one SSE event's data into output (its own `handle`, writing into a
`Batch`); this module runs that over the body and hands the results on merged:
consecutive text (or unsigned reasoning) deltas of one batch become one delta. The
batches come from `jpd.llm.readahead`: everything that arrived while the previous one
was handled. A fast stream then costs the layers above (retries, the turn loop, the
store and the clients) once per batch instead of once per token, which is what lets a
daemon's total approach a direct reader's (protocol.md 7.2 lets deltas that arrive
together be merged). The first text is never held back for the rest of its batch.
"""

from __future__ import annotations

import codecs
import functools
import re
import time
from collections.abc import AsyncGenerator, AsyncIterable, AsyncIterator, Callable
from typing import Literal, Protocol

import anyio
import anyio.lowlevel

from jpd.llm.base import ReasoningDelta, StreamEvent, TextDelta
from jpd.llm.sse import SSEDecoder, match_run

YIELD_INTERVAL = 0.001
"""Longest stretch (seconds) a fast stream is handled without letting other tasks run."""
WAITED = 0.0002
"""A read that took this long (seconds) waited for the network: other tasks ran meanwhile."""
DRAIN_TIMEOUT = 1.0
"""Longest wait (seconds) for the body's end after the final event (see `_drain`)."""


class Batch:
    """The stream events made from one batch, consecutive deltas joined as they come:
    a run of text pieces (or of unsigned reasoning pieces) becomes one delta."""

    __slots__ = ("_events", "_kind", "_pieces", "text_seen")

    def __init__(self) -> None:
        self._events: list[StreamEvent] = []
        self._kind: Literal["text", "reasoning"] = "text"
        self._pieces: list[str] = []
        self.text_seen = False
        """Whether any text was added (the first text goes on at once: `stream_events`)."""

    def text(self, piece: str) -> None:
        """A piece of the answer."""
        if self._kind != "text":
            self._close_run()
            self._kind = "text"
        self._pieces.append(piece)
        self.text_seen = True

    def reasoning(self, piece: str) -> None:
        """A piece of reasoning (unsigned: a signature goes as its own `ReasoningDelta`)."""
        if self._kind != "reasoning":
            self._close_run()
            self._kind = "reasoning"
        self._pieces.append(piece)

    def add(self, event: StreamEvent) -> None:
        """Any other event, after the deltas before it."""
        self._close_run()
        self._events.append(event)

    def take(self) -> list[StreamEvent]:
        """Everything added so far, in order; the batch is then empty.

        Its own lists are kept (emptied), and nothing new is made when nothing was
        added: a list made per chunk would stay alive while the stream waits for the
        next one, and a thousand waiting streams' would fill the collector's young
        generation (each pass walks what is alive there)."""
        if self._pieces:
            self._close_run()
        events = self._events
        if not events:
            return events  # empty: the caller only iterates it
        taken = events.copy()
        events.clear()
        return taken

    def _close_run(self) -> None:
        pieces = self._pieces
        if not pieces:
            return
        text = pieces[0] if len(pieces) == 1 else "".join(pieces)
        pieces.clear()
        run = TextDelta.of(text) if self._kind == "text" else ReasoningDelta(text=text)
        self._events.append(run)


_NONE: list[str] = []
"""No frame data (never added to)."""

Handler = Callable[[str, Batch], bool]
"""One SSE event's data into the batch; returns whether the response is complete."""


class FrameDecoder(Protocol):
    """Splits a body's text into the data of its frames (`SSEDecoder`, `NDJSONDecoder`)."""

    def feed_data(self, text: str) -> list[str]:
        """Add `text`; the data of the frames it completes."""
        ...

    def close_data(self) -> list[str]:
        """End of body: the data of any frame it completes."""
        ...


async def stream_events(
    chunks: AsyncIterable[bytes],
    handle: Handler,
    interval: float = YIELD_INTERVAL,
    *,
    decoder: FrameDecoder | None = None,
    text_event: re.Pattern[str] | None = None,
) -> AsyncGenerator[StreamEvent, None]:
    """Run `handle` over the SSE events of `chunks` (a UTF-8 body, e.g. the batches of
    `Readahead.batches`) and yield what it makes, merged per chunk; stop once `handle`
    says the response is complete. `decoder` frames the body otherwise (NDJSON).

    `text_event` (SSE only): a pattern that fully matches a whole SSE event carrying
    only a piece of text, its group 1 that text, exactly when `handle` would add just
    that text for the event's data (`anthropic.TEXT_EVENT`). A chunk that is one such
    event (a slow stream's chunk per token) is then read in one match, without framing
    and `handle`, and a chunk of a few such events (a stream a little behind its server)
    in one match per event (property tests check both ways give the same events).

    An error `handle` raises is raised after the events before it in the chunk were
    yielded, as when they were handed on one by one.

    Handling a large chunk never suspends, and neither does reading one the HTTP client
    already holds: so every `interval` seconds, after the consumer has handled what was
    yielded, the event loop runs other tasks (among them the writer that forwards the
    deltas to clients).
    """
    sse: SSEDecoder | None = None
    if decoder is None:
        decoder = sse = SSEDecoder()
    # `text_event` anchored at the start of a chunk: read only while the SSE decoder holds
    # nothing of an event (`idle`, looked at again after each chunk it frames).
    match_text: Callable[[str], re.Match[str] | None] | None = None
    more: Callable[[str, int], list[str] | None] = _no_run
    if sse is not None and text_event is not None:
        match_text, more = text_event.match, functools.partial(match_run, text_event)
    idle = True
    utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")
    split = False
    """The incremental decoder holds the start of a character cut by a chunk's end."""
    out = Batch()
    text_sent = False
    first_chunk = True
    clock = time.perf_counter
    last = now = clock()
    reader = aiter(chunks)
    ended = False
    event: StreamEvent | None = None
    while not ended:
        try:
            chunk = await anext(reader)
            got = clock()
            if got - now >= WAITED:  # `now`: just before the read (below)
                # The read waited (a slow stream: the next token was not there yet), so
                # every other task had its turn meanwhile: no extra step for them below.
                last = got
        except StopAsyncIteration:  # end of body: what the decoder still holds
            ended = True
            batch = decoder.feed_data(utf8.decode(b"", final=True))
            batch += decoder.close_data()
        else:
            try:
                # Nearly every chunk is whole characters: one C call, not the codec's.
                text = utf8.decode(chunk) if split else chunk.decode()
            except UnicodeDecodeError:  # cut in a character (or invalid): the codec's
                text = utf8.decode(chunk)
                split = bool(utf8.getstate()[0])
            else:
                if split:
                    split = bool(utf8.getstate()[0])
            if first_chunk and text:
                # A leading byte-order mark is not part of the first field name.
                text = text.removeprefix("\ufeff")
                first_chunk = False
            if match_text is None or not idle or (match := match_text(text)) is None:
                batch = decoder.feed_data(text)
                idle = sse is not None and sse.idle()
            elif (end := match.end()) == len(text):  # one text event (once per token)
                # Its text, without framing, `handle` or the batch: yielded as it is.
                # Nothing made for it is kept while the next chunk is awaited (see
                # `Batch.take`): the match goes now, the delta once the consumer took it.
                batch, piece, match = _NONE, match[1], None
                if piece:
                    yield TextDelta.of(piece)
                    if not text_sent:  # the first text: the writer to clients runs now
                        text_sent = True
                        await anyio.lowlevel.checkpoint()
                        last = clock()
                # Nothing else of the chunk to hand on (the end of the loop, directly).
                now = clock()
                if now - last >= interval:
                    await anyio.lowlevel.checkpoint()
                    last = now = clock()
                continue
            elif (pieces := more(text, end)) is None:
                batch = decoder.feed_data(text)
                idle = sse is not None and sse.idle()
            else:  # text events only, a few tokens (a stream behind its server)
                batch, first, match = _NONE, match[1], None
                for piece in (first, *pieces):
                    if piece:
                        out.text(piece)
                        if not text_sent:  # the first text goes on its own, at once
                            text_sent = True
                            for event in out.take():
                                yield event
                            await anyio.lowlevel.checkpoint()
                            last = clock()
                pieces = None
        complete = False
        failure: Exception | None = None
        if not text_sent and out.text_seen and not batch:  # from a text event's match
            text_sent = True
            for event in out.take():
                yield event
            await anyio.lowlevel.checkpoint()
            last = clock()
        for data in batch:
            try:
                complete = handle(data, out)
            except Exception as exc:  # raised below, after what came before it
                failure = exc
                break
            if complete:
                break
            if not text_sent and out.text_seen:
                # The first text goes out at once, not after the whole chunk, and
                # the writer to clients gets to run before the rest is parsed.
                text_sent = True
                for event in out.take():
                    yield event
                await anyio.lowlevel.checkpoint()
                last = clock()
        for event in out.take():
            yield event
        event = None  # not kept while the next chunk is awaited (`Batch.take`)
        if failure is not None:
            raise failure
        if complete:
            await _drain(reader)
            return
        now = clock()
        if now - last >= interval:
            await anyio.lowlevel.checkpoint()
            last = now = clock()


def _no_run(text: str, at: int) -> None:
    """No run of text events is read without framing (no `text_event`)."""


async def _drain(reader: AsyncIterator[bytes]) -> None:
    """Read what follows the final event: normally just the end of the body, already
    there. A body left unread makes the HTTP client close the connection instead of
    keeping it for the next model call, which would then pay a new TCP (and TLS)
    handshake. A server that goes on sending is cut off after `DRAIN_TIMEOUT`."""
    with anyio.move_on_after(DRAIN_TIMEOUT):
        async for _ in reader:
            pass
