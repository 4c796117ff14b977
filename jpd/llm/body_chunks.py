"""A streamed response's body, as bytes, read with as few layers per network chunk as
the transport allows (an SSE body has a chunk per token)."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from typing import Any

import httpx


def body_chunks(response: httpx.Response) -> AsyncIterator[bytes]:
    """The streamed body's bytes: as they came when the server sent them uncompressed
    (one generator and decoder less per network chunk; an SSE body has a chunk per
    token), decoded otherwise. On aiohttp's transport an uncompressed body is read from
    aiohttp's stream itself (`_aiohttp_body`)."""
    if response.headers.get("content-encoding", "identity").strip().lower() in ("", "identity"):
        content = _aiohttp_content(response)
        if content is not None:
            return _aiohttp_body(response, content)
        return response.aiter_raw()
    return response.aiter_bytes()


def _aiohttp_content(response: httpx.Response) -> Any:
    """The aiohttp `StreamReader` of a response `httpx-aiohttp` streams, else None.

    `Response.aiter_raw` reaches it through four generators (httpx's, the response's
    stream, the transport's, aiohttp's iterator), each resumed and passed through once
    per network chunk: a tenth of what a token costs the daemon. The body is then read
    directly, as httpx would have (its errors mapped the same way).
    """
    transport = sys.modules.get("httpx_aiohttp.transport")
    if transport is None:
        return None
    stream: Any = response.stream
    if type(stream) is not transport.AiohttpResponseStream:
        # Sent through the client (not straight to the transport): httpx's wrapper.
        stream = getattr(stream, "_stream", None)
        if type(stream) is not transport.AiohttpResponseStream:
            return None
    if response.is_stream_consumed or response.is_closed:
        return None  # httpx raises its own error for these: let it
    content = getattr(getattr(stream, "_aiohttp_response", None), "content", None)
    if content is None or not callable(getattr(content, "readany", None)):
        return None
    response.is_stream_consumed = True
    return content


async def _aiohttp_body(response: httpx.Response, content: Any) -> AsyncIterator[bytes]:
    from httpx_aiohttp.transport import map_aiohttp_exceptions

    try:  # httpx's errors name their request, as `aiter_raw`'s do
        from httpx._exceptions import request_context
    except ImportError:  # pragma: no cover - a private helper of httpx's
        request_context = _no_context

    read = content.readany
    with request_context(request=response.request), map_aiohttp_exceptions():
        while chunk := await read():
            yield chunk
    await response.aclose()  # as `aiter_raw` does at the end of the body


@contextmanager
def _no_context(request: httpx.Request | None = None) -> Iterator[None]:
    yield
