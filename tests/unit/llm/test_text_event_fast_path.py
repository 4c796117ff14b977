"""A chunk that is one whole SSE text event is read in one match (`stream_events`'
`text_event`, `anthropic.TEXT_EVENT`), and a chunk of a few in one match each, without
framing and the parser: on any body, split anywhere, the events must be those of the
framing and parser path, chunk by chunk, and the first text still goes out on its own."""

from __future__ import annotations

import itertools
import json
import os
from collections.abc import AsyncGenerator
from typing import Any

import anyio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jpd.llm.anthropic import TEXT_EVENT, _StreamState
from jpd.llm.base import StreamEvent, TextDelta
from jpd.llm.sse import SSEDecoder, match_run
from jpd.llm.stream_reader import stream_events

PROFILE = settings(
    max_examples=300,
    deadline=None,
    derandomize=bool(os.environ.get("CI")),
    suppress_health_check=[HealthCheck.too_slow],
)


def _event(data: dict[str, Any] | str, name: str | None, seps: tuple[str, str]) -> str:
    payload = data if isinstance(data, str) else json.dumps(data, separators=seps)
    head = f"event: {name}\n" if name is not None else ""
    return f"{head}data: {payload}\n\n"


TEXTS = st.text(alphabet=st.characters(codec="utf-8"), max_size=8) | st.sampled_from(
    ["", " tok", 'a"b', "a\\b", "é", "\n", "\r", "\x00"]
)
SEPS = st.sampled_from([(",", ":"), (", ", ": "), (" ,", " : ")])
NAMES = st.sampled_from([None, "content_block_delta", "ping", "x\ry", ""])


@st.composite
def events(draw: st.DrawFn) -> str:
    """One SSE event of an Anthropic stream: mostly text deltas, in every spelling."""
    seps = draw(SEPS)
    name = draw(NAMES)
    kind = draw(st.sampled_from(["text", "text", "text", "other", "ping", "raw", "crlf"]))
    if kind == "text":
        index = draw(st.sampled_from([0, 1, 12]))
        data: dict[str, Any] = {
            "type": "content_block_delta",
            "index": index,
            "delta": {"type": "text_delta", "text": draw(TEXTS)},
        }
        return _event(data, name, seps)
    if kind == "other":
        block = {"type": "content_block_start", "index": 0}
        return _event({**block, "content_block": {"type": "text", "text": draw(TEXTS)}}, name, seps)
    if kind == "ping":
        return _event({"type": "ping"}, name, seps)
    if kind == "crlf":
        text = {"type": "text_delta", "text": draw(TEXTS)}
        data = {"type": "content_block_delta", "index": 0, "delta": text}
        return _event(data, name, seps).replace("\n", "\r\n")
    return draw(st.sampled_from([": comment\n\n", "data:  {}\n\n", "retry: 5\n\n", "\n"]))


STOP = _event({"type": "message_stop"}, "message_stop", (",", ":"))


async def _chunks(parts: list[bytes]) -> AsyncGenerator[bytes, None]:
    for part in parts:
        yield part


async def _read(parts: list[bytes], fast: bool) -> list[StreamEvent]:
    state = _StreamState(())
    pattern = TEXT_EVENT if fast else None
    out: list[StreamEvent] = []
    try:
        async for event in stream_events(_chunks(parts), state.feed, text_event=pattern):
            out.append(event)
    except Exception as exc:  # the same error either way
        out.append(TextDelta(text=f"error: {type(exc).__name__}: {exc}"))
    return out


def _split(body: bytes, cuts: list[int], whole: list[bool]) -> list[bytes]:
    """`body` cut at `cuts`, or (`whole`) whole events: one per chunk as a slow stream
    sends them, or (cuts given too) a few per chunk, as a stream behind its server."""
    if whole[0]:
        events = [part + b"\n\n" for part in body.split(b"\n\n")[:-1]]
        if not cuts:
            return events
        points = sorted({0, len(events), *(c % (len(events) + 1) for c in cuts)})
        return [b"".join(events[a:b]) for a, b in itertools.pairwise(points)]
    points = sorted({0, len(body), *(c % (len(body) + 1) for c in cuts)})
    return [body[a:b] for a, b in itertools.pairwise(points)]


@PROFILE
@given(
    st.lists(events(), max_size=12),
    st.lists(st.integers(min_value=0, max_value=10_000), max_size=6),
    st.lists(st.booleans(), min_size=1, max_size=1),
    st.booleans(),
)
def test_the_match_gives_the_events_of_framing_and_parsing(
    body_events: list[str], cuts: list[int], whole: list[bool], stop: bool
) -> None:
    body = ("".join(body_events) + (STOP if stop else "")).encode()
    parts = _split(body, cuts, whole)

    async def both() -> tuple[list[StreamEvent], list[StreamEvent]]:
        return await _read(parts, fast=True), await _read(parts, fast=False)

    fast, slow = anyio.run(both)
    assert fast == slow


@PROFILE
@given(st.text(alphabet=st.characters(codec="utf-8"), max_size=20), SEPS, NAMES)
def test_a_match_is_exactly_one_event_whose_data_the_parser_takes_as_that_text(
    text: str, seps: tuple[str, str], name: str | None
) -> None:
    data = {
        "type": "content_block_delta",
        "index": 0,
        "delta": {"type": "text_delta", "text": text},
    }
    event = _event(data, name, seps)
    match = SSEDecoder().match_one(event, TEXT_EVENT)
    if match is None:
        return  # the framing and parser path takes it
    assert SSEDecoder().feed_data(event) == [json.dumps(data, separators=seps)]
    assert match[1] == text


def test_the_common_shapes_match_and_nothing_is_matched_mid_event() -> None:
    for seps in ((",", ":"), (", ", ": ")):
        for name in (None, "content_block_delta"):
            data = {
                "type": "content_block_delta",
                "index": 3,
                "delta": {"type": "text_delta", "text": " tok1"},
            }
            event = _event(data, name, seps)
            match = SSEDecoder().match_one(event, TEXT_EVENT)
            assert match is not None and match[1] == " tok1"
    decoder = SSEDecoder()
    assert decoder.feed_data("data: {") == []  # an event begun: the next chunk continues it
    tail = _event(
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "a"}},
        None,
        (",", ":"),
    )
    assert decoder.match_one(tail, TEXT_EVENT) is None


async def test_the_first_matched_text_goes_out_before_the_next_read() -> None:
    delta = _event(
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "a"}},
        None,
        (",", ":"),
    )
    reads: list[str] = []

    async def chunks() -> AsyncGenerator[bytes, None]:
        for part in (delta, delta, STOP):
            reads.append(part)
            yield part.encode()

    state = _StreamState(())
    seen: list[tuple[StreamEvent, int]] = []
    async for event in stream_events(chunks(), state.feed, text_event=TEXT_EVENT):
        seen.append((event, len(reads)))
    assert seen[0] == (TextDelta(text="a"), 1)
    assert seen[1] == (TextDelta(text="a"), 2)


def _text(text: str) -> str:
    data = {
        "type": "content_block_delta",
        "index": 0,
        "delta": {"type": "text_delta", "text": text},
    }
    return _event(data, "content_block_delta", (", ", ": "))


def test_a_run_of_text_events_is_matched_one_by_one_and_nothing_else() -> None:
    run = _text("a") + _text("") + _text(" b")
    assert match_run(TEXT_EVENT, run) == ["a", "", " b"]
    assert match_run(TEXT_EVENT, run, len(_text("a"))) == ["", " b"]
    ping = _event({"type": "ping"}, "ping", (",", ":"))
    for other in (run + ping, ping + run, run + "\n", run[:-1], run.replace("\n", "\r\n")):
        assert match_run(TEXT_EVENT, other) is None
    decoder = SSEDecoder()
    assert decoder.idle()
    assert decoder.feed_data("data: {") == []  # an event begun: the next text continues it
    assert not decoder.idle()


async def test_the_first_text_of_a_run_goes_out_on_its_own_then_the_rest_merged() -> None:
    async def chunks() -> AsyncGenerator[bytes, None]:
        for part in (
            _text("") + _text("a") + _text("b") + _text("c"),
            _text("d") + _text("e"),
            STOP,
        ):
            yield part.encode()

    state = _StreamState(())
    seen = [event async for event in stream_events(chunks(), state.feed, text_event=TEXT_EVENT)]
    assert seen[:3] == [TextDelta(text="a"), TextDelta(text="bc"), TextDelta(text="de")]


async def test_text_events_after_an_unfinished_line_are_framed_with_it() -> None:
    for head in ('data: {"type": "ping"', "event: x", ": comment", "data: {}\r"):
        parts = [head.encode(), (_text("a") + _text("b")).encode(), _text("c").encode()]
        assert await _read(parts, fast=True) == await _read(parts, fast=False)
