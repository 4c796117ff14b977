"""The SSE decoder and the retry policy helpers."""

from __future__ import annotations

import random

import pytest

from jpd.llm.retry import RetryPolicy, parse_retry_after, status_is_retryable
from jpd.llm.sse import SSEDecoder, SSEEvent


def decode_in_pieces(text: str, size: int) -> list[SSEEvent]:
    decoder = SSEDecoder()
    events: list[SSEEvent] = []
    for start in range(0, len(text), size):
        events += decoder.feed(text[start : start + size])
    return events + decoder.close()


STREAM = (
    ": comment\r\n"
    "event: message_start\r\n"
    'data: {"a":\r\n'
    "data:1}\r\n"
    "\r\n"
    "event: ping\rdata: {}\r\r"
    "id: 7\n"
    "retry: 300\n"
    "data:  two spaces\n"
    "\n"
    "data: incomplete at the end"
)


@pytest.mark.parametrize("size", [1, 2, 3, 7, 1000])
def test_decoder_handles_every_line_ending_and_any_split(size: int) -> None:
    assert decode_in_pieces(STREAM, size) == [
        SSEEvent(event="message_start", data='{"a":\n1}'),
        SSEEvent(event="ping", data="{}"),
        SSEEvent(event="message", data=" two spaces", id="7", retry=300),
    ]


def test_blank_lines_without_fields_dispatch_nothing() -> None:
    assert decode_in_pieces("\n\n: keep-alive\n\n\n", 1) == []


def test_field_without_colon_and_unknown_fields() -> None:
    assert decode_in_pieces("data\nfoo: bar\n\n", 2) == [SSEEvent(event="message", data="")]


def test_backoff_grows_is_capped_and_jittered() -> None:
    policy = RetryPolicy(initial_delay=1.0, max_delay=8.0)
    rng = random.Random(1)
    for failures, step in [(1, 1.0), (2, 2.0), (3, 4.0), (4, 8.0), (9, 8.0)]:
        delays = {policy.backoff(failures, rng) for _ in range(50)}
        assert all(step / 2 <= d <= step for d in delays)
        assert len(delays) > 1


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({}, None),
        ({"retry-after": "3"}, 3.0),
        ({"retry-after": "1.5"}, 1.5),
        ({"retry-after": "-4"}, 0.0),
        ({"retry-after-ms": "250", "retry-after": "9"}, 0.25),
        ({"retry-after": "soon"}, None),
        ({"retry-after": "Wed, 21 Oct 2015 07:28:30 GMT"}, 30.0),
    ],
)
def test_parse_retry_after(headers: dict[str, str], expected: float | None) -> None:
    now = 1445412480.0  # Wed, 21 Oct 2015 07:28:00 GMT
    assert parse_retry_after(headers, now=now) == expected


@pytest.mark.parametrize(
    ("status", "headers", "retryable"),
    [
        (400, {}, False),
        (401, {}, False),
        (404, {}, False),
        (408, {}, True),
        (429, {}, True),
        (500, {}, True),
        (503, {}, True),
        (529, {}, True),
        (500, {"x-should-retry": "false"}, False),
        (400, {"x-should-retry": "true"}, True),
    ],
)
def test_status_classification(status: int, headers: dict[str, str], retryable: bool) -> None:
    assert status_is_retryable(status, headers) is retryable
