"""Anthropic retries (every transient failure) and errors (one actionable line, no key)."""

from __future__ import annotations

import anyio
import pytest

from jpd.llm.anthropic import AnthropicProvider
from jpd.llm.base import Finish, Retry
from jpd.llm.errors import ProviderError
from tests.fixtures.fake_llm_server import (
    Cut,
    Drop,
    FakeLLMServer,
    Hang,
    Pause,
    Reply,
    Reset,
    Script,
    Send,
)
from tests.fixtures.llm_support import (
    ANTHROPIC_KEY,
    FAST_RETRIES,
    after_last_retry,
    ask,
    collect,
    retries,
    text_of,
)
from tests.fixtures.llm_wire import (
    a_block_start,
    a_error,
    a_error_body,
    a_message_start,
    a_text,
    a_text_answer,
    json_reply,
    sse,
    stream_reply,
)


def clean_answer() -> Reply:
    return stream_reply(*a_text_answer("Hello", ", ", "world"))


def _503() -> Reply:
    return json_reply(503, a_error_body("api_error", "Service unavailable"))


RETRYABLE_FAILURES: dict[str, Script] = {
    "http_500": json_reply(500, a_error_body("api_error", "Internal server error")),
    "http_503": _503(),
    "http_529_overloaded": json_reply(529, a_error_body("overloaded_error", "Overloaded")),
    "http_429": json_reply(429, a_error_body("rate_limit_error", "Slow down")),
    "overloaded_error_event": stream_reply(
        a_message_start(),
        a_block_start(0, {"type": "text", "text": ""}),
        a_text(0, "partial answer"),
        a_error("overloaded_error", "Overloaded"),
    ),
    "connection_reset_before_response": Drop(),
    "connection_reset_mid_stream": Reply(
        headers={"content-type": "text/event-stream"},
        body=(Send(a_message_start()), Send(a_block_start(0, {"type": "text"})), Reset()),
    ),
    "stream_ended_without_message_stop": stream_reply(*a_text_answer("partial")[:-1]),
    "body_ends_mid_event": Reply(
        headers={"content-type": "text/event-stream"},
        body=(Send(a_message_start() + a_text(0, "partial")[:30]),),
        chunked=False,
    ),
    "malformed_event": stream_reply(a_message_start(), sse("{not json", event="ping")),
    "stream_cut_mid_event": Reply(
        headers={"content-type": "text/event-stream"},
        body=(Send(a_message_start()), Send(a_text(0, "partial")[:25]), Cut()),
    ),
}


@pytest.mark.parametrize("failure", RETRYABLE_FAILURES.values(), ids=RETRYABLE_FAILURES.keys())
async def test_retryable_failures_are_retried_and_visible(
    anthropic: AnthropicProvider, server: FakeLLMServer, failure: Script
) -> None:
    server.push(failure, clean_answer())
    events = await collect(anthropic.stream(ask()))

    (retry,) = retries(events)
    assert retry.attempt == 1
    assert retry.delay >= 0
    assert after_last_retry(events)[-1] == Finish(reason="end_turn")
    assert text_of(after_last_retry(events)) == "Hello, world"
    bodies = {r.body for r in server.requests}
    assert len(server.requests) == 2
    assert len(bodies) == 1  # the retry resends the identical bytes


async def test_timeout_is_retried(server: FakeLLMServer) -> None:
    provider = AnthropicProvider(
        base_url=server.base_url,
        env={"ANTHROPIC_API_KEY": ANTHROPIC_KEY},
        timeout=0.3,
        retry_policy=FAST_RETRIES,
    )
    server.push(Hang(), clean_answer())
    try:
        events = await collect(provider.stream(ask()))
    finally:
        await provider.aclose()
    assert [r.reason for r in retries(events)] == ["timeout"]
    assert text_of(after_last_retry(events)) == "Hello, world"


async def test_a_body_that_stalls_mid_stream_times_out_and_is_retried(
    server: FakeLLMServer,
) -> None:
    # No per-chunk read timer: the loop's watchdog (jpd/llm/read_watch.py) closes a body
    # whose reads stopped for the timeout, and the attempt fails as a timeout.
    provider = AnthropicProvider(
        base_url=server.base_url,
        env={"ANTHROPIC_API_KEY": ANTHROPIC_KEY},
        timeout=0.3,
        retry_policy=FAST_RETRIES,
    )
    frames = a_text_answer("never", "finished")
    stalled = Reply(
        headers={"content-type": "text/event-stream"},
        body=(*(Send(f) for f in frames[:4]), Pause(3600), *(Send(f) for f in frames[4:])),
    )
    server.push(stalled, clean_answer())
    try:
        with anyio.fail_after(30):
            events = await collect(provider.stream(ask()))
    finally:
        await provider.aclose()
    (retry,) = retries(events)
    assert retry.reason == "timeout"
    assert text_of(after_last_retry(events)) == "Hello, world"


async def test_a_slow_body_that_keeps_sending_is_not_timed_out(server: FakeLLMServer) -> None:
    # The timeout is for silence, not for the whole body: chunks 0.1 s apart for over
    # twice the 0.3 s timeout go on to the end.
    provider = AnthropicProvider(
        base_url=server.base_url,
        env={"ANTHROPIC_API_KEY": ANTHROPIC_KEY},
        timeout=0.3,
        retry_policy=FAST_RETRIES,
    )
    parts = [f"p{i} " for i in range(8)]
    body: list[Send | Pause] = []
    for frame in a_text_answer(*parts):
        body += [Send(frame), Pause(0.1)]
    server.push(Reply(headers={"content-type": "text/event-stream"}, body=tuple(body)))
    try:
        events = await collect(provider.stream(ask()))
    finally:
        await provider.aclose()
    assert retries(events) == []
    assert text_of(events) == "".join(parts)


async def test_retry_after_is_honoured(anthropic: AnthropicProvider, server: FakeLLMServer) -> None:
    limited = json_reply(429, a_error_body("rate_limit_error", "Slow down"), {"retry-after": "1"})
    server.push(limited, clean_answer())
    events = await collect(anthropic.stream(ask()))
    assert retries(events) == [Retry(attempt=1, delay=1.0, reason="HTTP 429 rate_limit_error")]


async def test_gives_up_after_max_retries_with_one_line(
    anthropic: AnthropicProvider, server: FakeLLMServer
) -> None:
    server.push(_503(), _503(), _503(), _503(), clean_answer())
    seen = []
    with pytest.raises(ProviderError) as caught:
        async with anthropic.stream(ask()) as events:
            async for event in events:
                seen.append(event)
    assert [r.attempt for r in retries(seen)] == [1, 2, 3]
    assert len(server.requests) == 4
    message = caught.value.message
    assert message.startswith("anthropic: server error (503 api_error): Service unavailable")
    assert "gave up after 4 attempts" in message
    assert "\n" not in message
    assert caught.value.retryable


async def test_a_500_repeating_the_same_error_is_not_retried_again(
    anthropic: AnthropicProvider, server: FakeLLMServer
) -> None:
    # llama.cpp's server reports a request it cannot read as a 500: the same words twice
    # mean the request itself is at fault, and a third try would fail alike.
    invalid = json_reply(500, a_error_body("api_error", "Invalid 'content': expected string"))
    server.push(invalid, invalid, clean_answer())
    seen = []
    with pytest.raises(ProviderError) as caught:
        async with anthropic.stream(ask()) as events:
            async for event in events:
                seen.append(event)
    assert [r.attempt for r in retries(seen)] == [1]
    assert len(server.requests) == 2
    assert "the same error again: not retried" in caught.value.message
    assert not caught.value.retryable


async def test_a_500_with_a_different_error_each_time_is_retried(
    anthropic: AnthropicProvider, server: FakeLLMServer
) -> None:
    first = json_reply(500, a_error_body("api_error", "worker 1 crashed"))
    second = json_reply(500, a_error_body("api_error", "worker 2 crashed"))
    server.push(first, second, clean_answer())
    events = await collect(anthropic.stream(ask()))
    assert [r.attempt for r in retries(events)] == [1, 2]
    assert text_of(after_last_retry(events)) == "Hello, world"


async def test_long_retry_after_fails_at_once(
    anthropic: AnthropicProvider, server: FakeLLMServer
) -> None:
    server.push(
        json_reply(429, a_error_body("rate_limit_error", "Daily limit"), {"retry-after": "7200"})
    )
    with pytest.raises(ProviderError, match=r"asks to wait 2\.0h, try again later"):
        await collect(anthropic.stream(ask()))
    assert len(server.requests) == 1


async def test_should_retry_header_overrides_status(
    anthropic: AnthropicProvider, server: FakeLLMServer
) -> None:
    server.push(
        json_reply(500, a_error_body("api_error", "Do not retry"), {"x-should-retry": "false"})
    )
    with pytest.raises(ProviderError, match="Do not retry"):
        await collect(anthropic.stream(ask()))
    assert len(server.requests) == 1


async def test_bad_request_is_not_retried(
    anthropic: AnthropicProvider, server: FakeLLMServer
) -> None:
    server.push(
        json_reply(
            400,
            a_error_body("invalid_request_error", f"messages: bad\nblock (key {ANTHROPIC_KEY})"),
            {"request-id": "req_011"},
        )
    )
    seen = []
    with pytest.raises(ProviderError) as caught:
        async with anthropic.stream(ask()) as events:
            async for event in events:
                seen.append(event)
    assert seen == []
    assert len(server.requests) == 1
    assert caught.value.message == (
        "anthropic: request rejected (400 invalid_request_error): "
        "messages: bad block (key ***) (request req_011)"
    )
    assert not caught.value.retryable


async def test_unauthorized_names_the_variable_and_hides_the_key(
    anthropic: AnthropicProvider, server: FakeLLMServer
) -> None:
    server.push(
        json_reply(401, a_error_body("authentication_error", f"invalid x-api-key {ANTHROPIC_KEY}"))
    )
    with pytest.raises(ProviderError) as caught:
        await collect(anthropic.stream(ask()))
    assert caught.value.message == (
        "anthropic: authentication failed (401): check the API key in $ANTHROPIC_API_KEY"
    )
    assert len(server.requests) == 1


async def test_non_retryable_error_event_mid_stream(
    anthropic: AnthropicProvider, server: FakeLLMServer
) -> None:
    server.push(stream_reply(a_message_start(), a_error("invalid_request_error", "Too long")))
    with pytest.raises(ProviderError, match=r"error mid-stream \(invalid_request_error\)"):
        await collect(anthropic.stream(ask()))
    assert len(server.requests) == 1
