"""Bounded tool output (issue 35, 9): what a call keeps for the model and what it streams
to clients stay small however much a command prints.

`HeadTail` keeps the first and last `keep` bytes of a stream and counts the rest; its
text says how many bytes were left out between. `LiveBudget` lets a call stream its
first `limit` bytes as live output, then says once that live output stops there, and
from then on reports only the byte count, at most once per `COUNT_EVERY` bytes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

OUTPUT_KEEP = 10_000
"""Default bytes kept of each end (head and tail) of a stream for the result."""
LIVE_OUTPUT = 1_048_576
"""Default bytes of a call's output streamed live (`tool_progress` messages)."""

KEEP_OPTION = "output_keep"
LIVE_OPTION = "live_output"
COUNT_EVERY = 1_048_576
"""Past the live budget, a count-only progress event per this many bytes of output."""


class CapError(ValueError):
    """An invalid cap option; the message names it."""


def int_option(options: Mapping[str, Any], name: str, default: int, least: int) -> int:
    """`options[name]` as an integer >= `least` (`default` when absent)."""
    value = options.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise CapError(f"options.{name} must be an integer >= {least}, not {value!r}")
    return value


def elision(left_out: int) -> str:
    return f"\n[... {left_out} bytes left out ...]\n"


class HeadTail:
    """The head and tail of a stream, however long it gets."""

    def __init__(self, keep: int = OUTPUT_KEEP) -> None:
        self.keep = keep
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def add(self, data: bytes) -> None:
        self.total += len(data)
        room = self.keep - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if not data:
            return
        if len(data) >= self.keep:
            self.tail[:] = data[-self.keep :] if self.keep else b""
        else:
            self.tail += data
            del self.tail[: max(len(self.tail) - self.keep, 0)]

    @property
    def left_out(self) -> int:
        return self.total - len(self.head) - len(self.tail)

    def whole(self) -> bytes | None:
        """All the bytes, when nothing was left out."""
        return bytes(self.head + self.tail) if self.left_out == 0 else None

    def text(self) -> str:
        head = self.head.decode(errors="replace")
        if self.left_out == 0:
            return (self.head + self.tail).decode(errors="replace")
        return head + elision(self.left_out) + self.tail.decode(errors="replace")


class LiveBudget:
    """How much of one call's output goes out live, shared by its streams."""

    def __init__(self, limit: int = LIVE_OUTPUT) -> None:
        self.limit = limit
        self.sent = 0
        self.seen = 0
        self._next_count = 0

    def take(self, chunk: bytes) -> tuple[bool, str | None]:
        """(publish a progress event?, its message) for the next `chunk` of output."""
        self.seen += len(chunk)
        room = self.limit - self.sent
        if room > 0:
            part = chunk[:room]
            self.sent += len(part)
            message = part.decode(errors="replace")
            if len(part) < len(chunk):
                message += (
                    f"\n[... live output stops after {self.limit} bytes; the result keeps "
                    "the head and tail ...]\n"
                )
                self._next_count = self.seen + COUNT_EVERY
            return True, message
        if self.seen >= self._next_count:  # only the count, now and then
            self._next_count = self.seen + COUNT_EVERY
            return True, None
        return False, None
