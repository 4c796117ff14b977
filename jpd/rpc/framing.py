"""LSP base-protocol framing: `Content-Length: N\\r\\n\\r\\n<N bytes of JSON>`.

The reader is lenient about garbage before a header (it resynchronises on the next
`Content-Length` header) and reports each malformed frame instead of giving up, so
one bad client write never stops the connection.
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


async def read_frames(
    receive: Receive, max_body: int = MAX_BODY
) -> AsyncIterator[bytes | Malformed]:
    """Yield message bodies (or `Malformed` markers) until the input ends.

    `receive` returns the next chunk of bytes, or b"" at end of input. A body longer
    than `max_body` is reported and skipped as it arrives, never held whole.
    """
    buf = bytearray()
    eof = False

    async def fill() -> bool:
        nonlocal eof
        chunk = await receive()
        if not chunk:
            eof = True
            return False
        buf.extend(chunk)
        return True

    while True:
        end = buf.find(_SEP)
        while end < 0:
            if len(buf) > MAX_HEADER:
                # Keep a tail that may hold the start of a real header.
                del buf[: len(buf) - len(_SEP)]
                yield Malformed("header too long or missing separator")
            if eof or not await fill():
                if buf.strip():
                    yield Malformed("input ended inside a frame header")
                return
            end = buf.find(_SEP)
        header = bytes(buf[:end])
        del buf[: end + len(_SEP)]
        matches = list(_LENGTH.finditer(header))
        if not matches:
            yield Malformed("frame without a Content-Length header")
            continue
        length = int(matches[-1].group(1))
        if length > max_body:
            yield Malformed(f"frame of {length} bytes exceeds the {max_body}-byte limit")
            while length > 0:
                if not buf and not await fill():
                    return
                drop = min(length, len(buf))
                del buf[:drop]
                length -= drop
            continue
        while len(buf) < length:
            if eof or not await fill():
                yield Malformed("input ended inside a frame body")
                return
        body = bytes(buf[:length])
        del buf[:length]
        yield body


def encode_frame(body: bytes) -> bytes:
    """Frame a JSON body for sending."""
    # `bytes.join` copies a large result (1 MiB and up) without holding the GIL, where
    # `%` or `+` would hold it for the whole copy of a large `conversation/get`.
    return b"".join((b"Content-Length: %d\r\n\r\n" % len(body), body))
