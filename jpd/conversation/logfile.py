"""Reading an `events.jsonl` tolerantly, and small durable-file helpers."""

from __future__ import annotations

import logging
import os
from pathlib import Path

from pydantic import ValidationError

from jpd.conversation.events import Event, parse_event
from jpd.conversation.gc_pause import gc_paused

log = logging.getLogger(__name__)


def parse_log(data: bytes, source: str) -> list[Event]:
    """Parse the bytes of an events.jsonl, skipping (with a warning) unreadable lines.

    A last line without a trailing newline that does not parse is a torn write (a crash
    mid-append); an invalid line elsewhere is reported with its 1-based line number.
    Either way every other event is kept. Blank lines are ignored.
    """
    return [event for _, event in parse_lines(data, source)]


def parse_lines(data: bytes, source: str) -> list[tuple[bytes, Event]]:
    """As `parse_log`, each event with the stored line it was read from."""
    events: list[tuple[bytes, Event]] = []
    lines = data.split(b"\n")
    last = len(lines) - 1  # the segment after the final newline; b"" in a clean file
    with gc_paused(len(lines)):  # no collector pauses for other clients (see gc_pause)
        for index, raw in enumerate(lines):
            line = raw.strip()
            if not line:
                continue
            try:
                events.append((line, parse_event(line)))
            except ValueError as exc:  # pydantic.ValidationError is a ValueError
                what = "torn last line" if index == last else "invalid line"
                log.warning("%s: skipping %s %d: %s", source, what, index + 1, _describe(exc))
    return events


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
