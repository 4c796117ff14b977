"""Reading an `events.jsonl` tolerantly, and small durable-file helpers."""

from __future__ import annotations

import logging
import operator
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from jpd.conversation.events import Event, dump_event, parse_event
from jpd.conversation.gc_pause import gc_paused
from jpd.conversation.sanitize import sanitize

log = logging.getLogger(__name__)

# A whole-log `split`, `count` or `join` is one C call that holds the GIL for tens of
# milliseconds on a 100,000-event log (the split allocates every line at once), and
# every other client's request waits behind it although the load runs in a worker
# thread. Done a slice of about this many bytes at a time, the interpreter can switch
# threads between slices.
SLICE_BYTES = 256 * 1024


def parse_log(data: bytes, source: str) -> list[Event]:
    """Parse the bytes of an events.jsonl, skipping (with a warning) unreadable lines.

    A last line without a trailing newline that does not parse is a torn write (a crash
    mid-append); an invalid line elsewhere is reported with its 1-based line number.
    Either way every other event is kept. Blank lines are ignored.
    """
    pairs = parse_lines(data, source)
    events = [event for _, event in pairs]
    drop_sliced(pairs)  # its lines
    return events


def parse_lines(data: bytes, source: str) -> list[tuple[bytes, Event]]:
    """As `parse_log`, each event with the stored line it was read from."""
    events: list[tuple[bytes, Event]] = []
    with gc_paused(count_lines(data)):  # no collector pauses for other clients (see gc_pause)
        for index, raw, terminated in split_lines(data):
            line = raw.strip()
            if not line:
                continue
            try:
                events.append((line, parse_event(line)))
            except ValueError as exc:  # pydantic.ValidationError is a ValueError
                what = "invalid line" if terminated else "torn last line"
                log.warning("%s: skipping %s %d: %s", source, what, index + 1, _describe(exc))
    return events


def encode_sanitized(data: bytes, source: str) -> bytes:
    """A log's sanitized events as one JSON array, each in its stored form.

    What `sanitize` keeps as it was is sent as the stored line (no decode/re-encode);
    only events it adds or changes are encoded.
    """
    with gc_paused(count_lines(data)):  # see gc_pause: no collector pauses for others
        pairs = parse_lines(data, source)
        events = [event for _, event in pairs]
        kept = sanitize(events)
        if len(kept) == len(events) and all(map(operator.is_, kept, events)):
            parts = [line for line, _ in pairs]  # a sound log: every line as stored
        else:
            stored = {id(event): line for line, event in pairs}
            parts = [stored.get(id(e)) or dump_event(e).encode() for e in kept]
        encoded = b"".join((b"[", join_sliced(parts, b","), b"]"))  # see join_sliced
        del kept, events  # the pairs hold the last references: free them in slices
        drop_sliced(parts)
        drop_sliced(pairs)
        return encoded


def split_lines(data: bytes, slice_bytes: int | None = None) -> Iterator[tuple[int, bytes, bool]]:
    """`data.split(b"\\n")` a slice at a time (see `SLICE_BYTES`): each line's 0-based
    index, its bytes, and whether a newline ends it (only a torn last line has none).
    The empty segment after a final newline is not a line."""
    step = slice_bytes or SLICE_BYTES
    index = pos = 0
    size = len(data)
    while pos < size:
        cut = data.find(b"\n", min(pos + step, size - 1))
        end = size if cut < 0 else cut + 1
        lines = data[pos:end].split(b"\n")
        tail = lines.pop()  # b"" after the slice's final newline, else the torn last line
        for line in lines:
            yield index, line, True
            index += 1
        if tail:
            yield index, tail, False
        pos = end


def count_lines(data: bytes, slice_bytes: int | None = None) -> int:
    """`data.count(b"\\n")`, a slice at a time (see `SLICE_BYTES`)."""
    step = slice_bytes or SLICE_BYTES
    return sum(data.count(b"\n", i, i + step) for i in range(0, len(data), step))


def join_sliced(parts: list[bytes], sep: bytes, slice_items: int = 2_000) -> bytes:
    """`sep.join(parts)`, joined a slice of parts at a time (see `SLICE_BYTES`); the
    last join copies a few large pieces, which `bytes.join` does without the GIL once
    the result reaches 1 MiB."""
    pieces = [sep.join(parts[i : i + slice_items]) for i in range(0, len(parts), slice_items)]
    return sep.join(pieces)


def drop_sliced(items: list[Any], slice_items: int = 2_000) -> None:
    """Empty `items` a slice at a time. When a list holds the last references to a
    loaded log's 100,000 events, letting it go frees them all in one C call that holds
    the GIL for 30-40 ms (more on a slower machine); in slices, other threads run in
    between."""
    while items:
        del items[-slice_items:]


def _describe(exc: ValueError) -> str:
    # One short line: a full pydantic report per bad line would flood the log.
    if isinstance(exc, ValidationError) and exc.errors():
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ())) or "line"
        return f"{where}: {first.get('msg', 'invalid')}"
    text = str(exc)
    return text.splitlines()[0][:200] if text else type(exc).__name__


def ends_with_newline(path: Path) -> bool:
    """Whether a non-empty file's last byte is `\\n`."""
    with open(path, "rb") as f:
        f.seek(-1, os.SEEK_END)
        return f.read(1) == b"\n"


def fsync_dir(path: Path) -> None:
    """Make new entries of a directory durable; best effort (not every platform can)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def fsync_file(path: Path) -> None:
    """Make a file's written data durable without an open handle to it."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
