"""LSP base-protocol framing: `Content-Length: N\\r\\n\\r\\n<N bytes of JSON>`.

The reader is lenient about garbage before a header (it resynchronises on the next
`Content-Length` header) and reports each malformed frame instead of giving up, so
one bad client write never stops the connection. `FrameSplitter` holds the rules; the
async `read_frames` and the connection's reader thread (`jpd.rpc.lane`) both use it.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass

_LENGTH = re.compile(rb"content-length[ \t]*:[ \t]*(\d+)", re.IGNORECASE)
_SEP = b"\r\n\r\n"
MAX_HEADER = 64 * 1024
MAX_BODY = 64 * 1024 * 1024


@dataclass(frozen=True)
class Malformed:
    """A frame that could not be read; `reason` is logged and sent as -32700."""

    reason: str


Receive = Callable[[], Awaitable[bytes]]
Frame = bytes | Malformed


class FrameSplitter:
    """Cuts message bodies (or `Malformed` markers) out of the bytes fed to it.

    A body longer than `max_body` is reported and skipped as it arrives, never held whole.
    """

    def __init__(self, max_body: int = MAX_BODY) -> None:
        self._max_body = max_body
        self._buf = bytearray()
        self._skip = 0
        """Bytes of an oversized body still to drop."""
        self._length: int | None = None
        """The length of the body being read (its header is consumed)."""

    def feed(self, chunk: bytes) -> list[Frame]:
        """The frames completed by `chunk`, in order."""
        buf = self._buf
        buf.extend(chunk)
        frames: list[Frame] = []
        while True:
            if self._skip:
                drop = min(self._skip, len(buf))
                del buf[:drop]
                self._skip -= drop
                if self._skip:
                    return frames
            if self._length is not None:
                if len(buf) < self._length:
                    return frames
                frames.append(bytes(buf[: self._length]))
                del buf[: self._length]
                self._length = None
            end = buf.find(_SEP)
            if end < 0:
                if len(buf) > MAX_HEADER:
                    # Keep a tail that may hold the start of a real header.
                    del buf[: len(buf) - len(_SEP)]
                    frames.append(Malformed("header too long or missing separator"))
                return frames
            header = bytes(buf[:end])
            del buf[: end + len(_SEP)]
            matches = list(_LENGTH.finditer(header))
            if not matches:
                frames.append(Malformed("frame without a Content-Length header"))
                continue
            length = int(matches[-1].group(1))
            if length > self._max_body:
                frames.append(
                    Malformed(f"frame of {length} bytes exceeds the {self._max_body}-byte limit")
                )
                self._skip = length
                continue
            self._length = length

    def end(self) -> list[Frame]:
        """What the end of input leaves: a frame cut short is reported."""
        if self._skip:
            return []
        if self._length is not None:
            return [Malformed("input ended inside a frame body")]
        if self._buf.strip():
            return [Malformed("input ended inside a frame header")]
        return []


async def read_frames(receive: Receive, max_body: int = MAX_BODY) -> AsyncIterator[Frame]:
    """Yield message bodies (or `Malformed` markers) until the input ends.

    `receive` returns the next chunk of bytes, or b"" at end of input.
    """
    splitter = FrameSplitter(max_body)
    while chunk := await receive():
        for frame in splitter.feed(chunk):
            yield frame
    for frame in splitter.end():
        yield frame


def encode_frame(body: bytes) -> bytes:
    """Frame a JSON body for sending."""
    # `bytes.join` copies a large result (1 MiB and up) without holding the GIL, where
    # `%` or `+` would hold it for the whole copy of a large `conversation/get`.
    return b"".join((b"Content-Length: %d\r\n\r\n" % len(body), body))
