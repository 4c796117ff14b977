"""Server-sent events: an incremental decoder for `text/event-stream` bodies.

Follows the WHATWG event-stream parsing rules: lines end with CRLF, LF or CR
(possibly split across network chunks), `data` lines accumulate joined by LF,
comment lines start with `:`, a blank line dispatches the event, and an event
left incomplete when the body ends is discarded. Provider code decides what a
missing final event means; this module only frames.

Nearly every event of a model's stream has one shape: an optional `event` line, one
`data` line, a blank line. A run of such events at the start of the text is taken by
regular expressions built from that one shape; the line-by-line parser takes the rest.
Both give the same events (property tests check it on arbitrary streams split anywhere).
"""

from __future__ import annotations

import re
from typing import NamedTuple, cast


def _shape(event: str, data: str) -> str:
    """One event of the common shape with `event` and `data` as the patterns of its two
    values; LF line ends only (CR is left to the line parser)."""
    return rf"(?:event: ?{event}\n)?data: ?{data}\n\n"


_VALUE = r"[^\n]*"
_SIMPLE = re.compile(_shape(f"({_VALUE})", f"({_VALUE})"))
"""One event of the common shape: its event name and data."""
_DATA = re.compile(_shape(_VALUE, f"({_VALUE})"))
"""Its data only."""
_RUN = re.compile(f"(?:{_shape(_VALUE, _VALUE)})+")
"""A run of such events."""


_tuple_new = tuple.__new__


def _one_event(text: str) -> str | None:
    """The data of `text` when it is exactly one common-shape event (a slow stream's
    chunk: one per token), found with a few string searches instead of the regular
    expressions' two passes; None otherwise."""
    end = len(text) - 2
    if end < 5 or text[end:] != "\n\n" or "\r" in text:
        return None
    start = text.find("\n") + 1 if text.startswith("event:") else 0
    if not text.startswith("data:", start) or text.find("\n", start, end) != -1:
        return None
    start += 6 if text.startswith(" ", start + 5) else 5
    return text[start:end]


def match_run(pattern: re.Pattern[str], text: str, at: int = 0) -> list[str] | None:
    """The group 1 of each of the events `text` holds from `at` to its end, when each is
    matched by `pattern` (anchored one after the other); else None. For a `pattern` that
    matches one whole event of the common shape only (as `SSEDecoder.match_one`'s), a
    run starting where no event is pending: a stream a little behind its server gets two
    or three tokens per chunk, each read in one match, without framing."""
    match = pattern.match
    found: list[str] = []
    end = len(text)
    while at < end:
        one = match(text, at)
        if one is None:
            return None
        found.append(one[1])
        at = one.end()
    return found


class SSEEvent(NamedTuple):
    """One dispatched event. `event` defaults to `message` as the spec says."""

    event: str
    data: str
    id: str | None = None
    retry: int | None = None


class SSEDecoder:
    """Turns decoded text chunks into events; keep one per response body."""

    def __init__(self) -> None:
        self._buffer = ""
        self._event = ""
        self._data: list[str] = []
        self._id: str | None = None
        self._retry: int | None = None

    def feed(self, text: str) -> list[SSEEvent]:
        """Add `text` and return the events it completes."""
        buffer, run_end = self._run(text)
        events: list[SSEEvent] = []
        if run_end:
            ident = self._id
            # The regular expressions find the run's events; tuple.__new__ builds each
            # without the named tuple's Python-level constructor.
            events = cast(
                "list[SSEEvent]",
                [
                    _tuple_new(SSEEvent, (name or "message", data, ident, None))
                    for name, data in _SIMPLE.findall(buffer, 0, run_end)
                ],
            )
        return events + self._lines(buffer[run_end:])

    def feed_data(self, text: str) -> list[str]:
        """As `feed`, but only each event's data: all a model provider's stream needs,
        taken once per token without building the events of a common-shape run."""
        if not (self._buffer or self._data or self._event or self._retry is not None):
            one = _one_event(text)
            if one is not None:
                return [one]
        buffer, run_end = self._run(text)
        if not run_end:
            return [event.data for event in self._lines(buffer)]
        data: list[str] = _DATA.findall(buffer, 0, run_end)
        if run_end == len(buffer):
            # All of it common-shape events (a token's chunk): no line parser, nothing left.
            self._buffer = ""
            return data
        return data + [event.data for event in self._lines(buffer[run_end:])]

    def match_one(self, text: str, pattern: re.Pattern[str]) -> re.Match[str] | None:
        """`pattern`'s full match of `text` while nothing is pending (no part of an event
        held from the text before), else None. For a `pattern` that matches only one
        whole event of the common shape (an optional `event` line, one `data` line, a
        blank line, LF ends, no CR), a match means `feed_data(text)` is that event's
        data alone: a caller reads it from the match without framing (`stream_events`)."""
        if self._buffer or self._data or self._event or self._retry is not None:
            return None
        return pattern.fullmatch(text)

    def idle(self) -> bool:
        """Nothing of an event is pending: the next text starts a new event."""
        return not (self._buffer or self._data or self._event or self._retry is not None)

    def _run(self, text: str) -> tuple[str, int]:
        """The text to parse (what was pending, then `text`) and the end of the run of
        common-shape events it starts with (0: none; the line parser takes it all)."""
        buffer = self._buffer + text if self._buffer else text
        if self._data or self._event or self._retry is not None or "\r" in buffer:
            return buffer, 0  # inside an event, or CR line ends: only the line parser
        run = _RUN.match(buffer)
        return buffer, run.end() if run is not None else 0

    def _lines(self, buffer: str) -> list[SSEEvent]:
        """The line parser: the events `buffer` completes; an unfinished line waits."""
        events: list[SSEEvent] = []
        # A CR at the very end may be the first half of a CRLF: keep it pending.
        pending_cr = buffer.endswith("\r")
        if pending_cr:
            buffer = buffer[:-1]
        if "\r" in buffer:
            buffer = buffer.replace("\r\n", "\n").replace("\r", "\n")
        lines = buffer.split("\n")
        rest = lines.pop()
        self._buffer = rest + "\r" if pending_cr else rest
        for line in lines:
            if not line:
                event = self._dispatch()
                if event is not None:
                    events.append(event)
            elif line.startswith("data:"):
                # The hot path (one data line per token) is inlined.
                self._data.append(line[6:] if line.startswith("data: ") else line[5:])
            elif line[0] != ":":
                self._field(line)
        return events

    def close(self) -> list[SSEEvent]:
        """End of body: a pending line is processed, an undispatched event is dropped."""
        events = self.feed("\n") if self._buffer.endswith("\r") else []
        # Per spec, a final line without its terminator is incomplete: drop it too.
        self._buffer = ""
        self._reset()
        return events

    def close_data(self) -> list[str]:
        """As `close`, but only each event's data."""
        return [event.data for event in self.close()]

    def _field(self, line: str) -> None:
        name, sep, value = line.partition(":")
        if sep and value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "id":
            if "\0" not in value:
                self._id = value
        elif name == "retry" and value.isdigit():
            self._retry = int(value)

    def _dispatch(self) -> SSEEvent | None:
        # Per spec an event without any data line is not dispatched.
        if not self._data:
            self._reset()
            return None
        event = SSEEvent(
            event=self._event or "message",
            data="\n".join(self._data),
            id=self._id,
            retry=self._retry,
        )
        self._reset()
        return event

    def _reset(self) -> None:
        self._event = ""
        self._data = []
        self._retry = None
