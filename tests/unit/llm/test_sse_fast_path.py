"""The SSE decoder's fast path gives the events the WHATWG rules give, however the
stream is made and split (jpd/llm/sse.py).

The decoder takes a run of common-shape events (optional `event` line, one `data`
line, blank line) with one regular expression and everything else line by line. The
reference below is a plain reading of the rules, with no fast path: on any stream,
split at any points, the decoder must agree with it.
"""

from __future__ import annotations

import os
import re

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jpd.llm.sse import SSEDecoder, SSEEvent, _one_event

PROFILE = settings(
    max_examples=400,
    deadline=None,
    derandomize=bool(os.environ.get("CI")),
    suppress_health_check=[HealthCheck.too_slow],
)


def reference(text: str) -> list[SSEEvent]:
    """The events of a whole body, by the rules (a last line without its end is dropped)."""
    events: list[SSEEvent] = []
    event, data, last_id, retry = "", [], None, None
    for line in re.split(r"\r\n|\r|\n", text)[:-1]:
        if not line:
            if data:
                events.append(SSEEvent(event or "message", "\n".join(data), last_id, retry))
            event, data, retry = "", [], None
            continue
        if line.startswith(":"):
            continue
        name, sep, value = line.partition(":")
        if sep and value.startswith(" "):
            value = value[1:]
        if name == "data":
            data.append(value)
        elif name == "event":
            event = value
        elif name == "id" and "\0" not in value:
            last_id = value
        elif name == "retry" and value.isdigit():
            retry = int(value)
    return events


FIELDS = st.sampled_from(
    [
        "event: content_block_delta",
        "event:ping",
        "event:",
        "event:  two",
        'data: {"type": "text_delta", "text": " tok"}',
        "data:x",
        "data: ",
        "data",
        "data:  spaced",
        "id: 7",
        "id: a\0b",
        "retry: 300",
        "retry: soon",
        ": keep-alive",
        "foo: bar",
    ]
)
COMMON = st.tuples(
    st.sampled_from(["", "event: content_block_delta\n", "event:ping\n", "event:\n"]),
    st.sampled_from(['data: {"type": "ping"}', "data:x", "data: ", "data:  spaced"]),
).map(lambda parts: f"{parts[0]}{parts[1]}\n\n")
"""An event of the shape the fast path takes."""
OTHER = st.lists(FIELDS, max_size=3).map(
    lambda lines: "".join(f"{line}\n" for line in lines) + "\n"
)
"""Any other run of lines up to a blank line (an event, or nothing to dispatch)."""
ENDS = st.sampled_from(["\n", "\r\n", "\r"])


@st.composite
def streams(draw: st.DrawFn) -> str:
    """Whole events, LF-ended as model servers send them, or with CRLF, CR or a mix."""
    text = "".join(draw(st.lists(st.one_of(COMMON, OTHER), max_size=20)))
    text += draw(st.sampled_from(["", "data: cut", "event: cut\ndata: x\n"]))
    style = draw(st.sampled_from(["lf", "lf", "lf", "crlf", "cr", "mixed"]))
    if style == "crlf":
        text = text.replace("\n", "\r\n")
    elif style == "cr":
        text = text.replace("\n", "\r")
    elif style == "mixed":
        lines = text.split("\n")
        ends = draw(st.lists(ENDS, min_size=len(lines) - 1, max_size=len(lines) - 1))
        text = "".join(line + end for line, end in zip(lines, ends, strict=False)) + lines[-1]
    return text


def pieces(text: str, cuts: list[int], at_events: bool) -> list[str]:
    """`text` split at `cuts`, or (`at_events`) after every blank line: a piece that
    starts between events is where the fast path takes over from what came before."""
    if at_events:
        points = {m.end() for m in re.finditer(r"\n\n", text)}
    else:
        points = {c % (len(text) + 1) for c in cuts}
    ends = [*sorted(points), len(text)]
    return [text[start:end] for start, end in zip([0, *ends], ends, strict=False)]


SPLITS = {
    "text": streams(),
    "cuts": st.lists(st.integers(0, 2000), max_size=8),
    "at_events": st.booleans(),
}


@PROFILE
@given(**SPLITS)
def test_the_decoder_agrees_with_the_rules_however_the_stream_is_split(
    text: str, cuts: list[int], at_events: bool
) -> None:
    decoder = SSEDecoder()
    events: list[SSEEvent] = []
    for piece in pieces(text, cuts, at_events):
        events += decoder.feed(piece)
    assert events + decoder.close() == reference(text)


@PROFILE
@given(**SPLITS)
def test_the_data_of_the_events_is_the_same_however_the_stream_is_split(
    text: str, cuts: list[int], at_events: bool
) -> None:
    """`feed_data` (what providers read) gives the data of the events the rules give."""
    decoder = SSEDecoder()
    data: list[str] = []
    for piece in pieces(text, cuts, at_events):
        data += decoder.feed_data(piece)
    data += [event.data for event in decoder.close()]
    assert data == [event.data for event in reference(text)]


def test_a_run_of_common_events_and_what_follows_it() -> None:
    text = (
        'event: a\ndata: {"n": 1}\n\n'
        "data: 2\n\n"
        ": a comment ends the run\n"
        "event: b\ndata: 3\ndata: 4\n\n"
        "event: c\ndata: 5\n\n"
    )
    decoder = SSEDecoder()
    assert decoder.feed(text) == [
        SSEEvent("a", '{"n": 1}'),
        SSEEvent("message", "2"),
        SSEEvent("b", "3\n4"),
        SSEEvent("c", "5"),
    ]


def test_an_id_set_before_carries_into_the_fast_path() -> None:
    decoder = SSEDecoder()
    assert decoder.feed("id: 9\ndata: a\n\n") == [SSEEvent("message", "a", "9")]
    assert decoder.feed("data: b\n\n") == [SSEEvent("message", "b", "9")]


@PROFILE
@given(st.one_of(COMMON, OTHER, streams(), st.text(alphabet="data:evnt \n\r", max_size=30)))
def test_a_lone_event_taken_by_string_search_is_what_the_rules_give(text: str) -> None:
    """`_one_event` (a chunk that is one common-shape event) answers only when the rules
    give exactly one event, and then its data."""
    one = _one_event(text)
    if one is not None:
        assert [event.data for event in reference(text)] == [one]
