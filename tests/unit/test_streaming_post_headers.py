"""`StreamingPost` sends each request with the client's default headers, the ones given
(overriding a default of the same name), `Host` and the body's own length, also when
the headers are reused from an earlier request; a silent server's headers time out."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from jpd.llm.retry import RetryableError
from jpd.llm.transport import StreamingPost


class _Recording(httpx.AsyncBaseTransport):
    def __init__(self, delay: float = 0.0) -> None:
        self.requests: list[httpx.Request] = []
        self._delay = delay

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        await asyncio.sleep(self._delay)
        return httpx.Response(200, content=b"data: {}\n\n")


def _post(transport: _Recording, timeout: float = 5.0) -> StreamingPost:
    post = StreamingPost(provider="test", timeout=timeout, key_env=None)
    post._transport = transport  # what aiohttp's transport would be handed
    return post


async def test_headers_are_merged_once_and_each_body_has_its_length() -> None:
    transport = _Recording()
    post = _post(transport)
    url = "http://127.0.0.1:9/v1/messages"
    given = {"content-type": "application/json", "Accept": "text/event-stream", "x-key": "k"}
    for body in (b"{}", b'{"a":1}', b'{"a":12}'):
        async with post.open(url, given, body) as (response, _reads):
            assert response.status_code == 200
    assert len(post._made) == 1  # normalised once
    lengths = []
    for request in transport.requests:
        names = [name.lower() for name, _value in request.headers.items()]
        assert len(names) == len(set(names))  # no header twice
        assert request.headers["host"] == "127.0.0.1:9"
        assert request.headers["accept"] == "text/event-stream"  # the given one wins
        assert request.headers["x-key"] == "k"
        assert "user-agent" in request.headers  # a client default
        lengths.append(request.headers["content-length"])
        assert request.read() == request.content
    assert lengths == ["2", "7", "8"]
    # Other headers (another key) are merged afresh, not mixed with the first ones.
    async with post.open(url, {**given, "x-key": "other"}, b"{}"):
        pass
    assert transport.requests[-1].headers["x-key"] == "other"
    assert len(post._made) == 2


async def test_a_server_that_sends_no_headers_in_time_is_a_retryable_timeout() -> None:
    post = _post(_Recording(delay=5.0), timeout=0.05)
    with pytest.raises(RetryableError, match="no response"):
        async with post.open("http://127.0.0.1:9/v1/messages", {}, b"{}"):
            pass
