"""Retrying a streamed model call: which failures are transient, how long to wait.

An attempt signals a transient failure by raising `RetryableError`; anything
else ends the call at once. `run_with_retries` re-runs the attempt with
exponential backoff and full jitter (or the server's `retry-after`), yielding a
`Retry` event before each wait so clients can show it.

Contract for consumers: a `Retry` event voids every event yielded since the
previous `Retry` (or since the start of the stream). A failure can happen after
part of an answer was streamed (a connection reset mid-answer), and the next
attempt starts the answer again from the beginning.
"""

from __future__ import annotations

import email.utils
import random
import time
from collections.abc import AsyncGenerator, Callable, Mapping
from contextlib import aclosing
from dataclasses import dataclass

import anyio

from jpd.llm.base import Retry, StreamEvent
from jpd.llm.errors import ProviderError

RETRYABLE_STATUS = frozenset({408, 409, 429})
"""Besides every 5xx (Anthropic's 529 "overloaded" included)."""

TRANSIENT_5XX = frozenset({502, 503, 504, 529})
"""Gateway and overload errors: retried even when the same error comes back. Any
other 5xx that repeats word for word is the server rejecting the request itself (a
validation error reported as 500, say), and is not retried again."""


class RetryableError(ProviderError):
    """A transient failure of one attempt.

    `message` is the one-line error shown if retries run out; `reason` is the
    short text of the `Retry` event; `retry_after` is the server's requested
    wait in seconds, if it sent one.
    """

    def __init__(
        self,
        message: str,
        *,
        reason: str,
        retry_after: float | None = None,
        status: int | None = None,
    ) -> None:
        super().__init__(message, retryable=True)
        self.reason = reason
        self.retry_after = retry_after
        self.status = status
        """The HTTP status when the server answered with an error."""

    def repeats(self, previous: RetryableError | None) -> bool:
        """Whether this is a non-transient 5xx repeating `previous` word for word."""
        return (
            previous is not None
            and self.status is not None
            and self.status >= 500
            and self.status not in TRANSIENT_5XX
            and (self.status, self.message) == (previous.status, previous.message)
        )


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how long to retry. `max_retries` counts retries, not attempts."""

    max_retries: int = 3
    initial_delay: float = 0.5
    max_delay: float = 8.0
    max_retry_after: float = 60.0
    """A server asking for a longer wait fails the call now instead of hanging the turn."""

    def backoff(self, failures: int, rng: random.Random) -> float:
        """Delay before retry number `failures` (1-based): capped exponential, full jitter.

        The jitter keeps a lower bound of half the step so retries never fire
        back to back, and spreads clients that failed together.
        """
        step = min(self.max_delay, self.initial_delay * 2.0 ** (failures - 1))
        return step * (0.5 + rng.random() / 2)


def status_is_retryable(status: int, headers: Mapping[str, str]) -> bool:
    """Whether an HTTP error status is worth retrying.

    The `x-should-retry` header (sent by Anthropic and OpenAI) overrides the
    status-based rule when present.
    """
    override = headers.get("x-should-retry", "").strip().lower()
    if override in ("true", "false"):
        return override == "true"
    return status in RETRYABLE_STATUS or status >= 500


def parse_retry_after(headers: Mapping[str, str], *, now: float | None = None) -> float | None:
    """Seconds to wait from `retry-after-ms`, or `retry-after` (seconds or HTTP date).

    Returns None when absent or unparseable; never negative.
    """
    millis = headers.get("retry-after-ms")
    if millis is not None:
        try:
            return max(0.0, float(millis) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    current = time.time() if now is None else now
    return max(0.0, when.timestamp() - current)


def _format_wait(seconds: float) -> str:
    if seconds >= 3600:
        return f"{seconds / 3600:.1f}h"
    if seconds >= 60:
        return f"{seconds / 60:.0f}min"
    return f"{seconds:.0f}s"


async def run_with_retries(
    attempt: Callable[[], AsyncGenerator[StreamEvent, None]],
    policy: RetryPolicy,
    rng: random.Random,
) -> AsyncGenerator[StreamEvent, None]:
    """Run `attempt()` until it completes, retrying on `RetryableError`.

    Raises `ProviderError` (with `retryable=True`) once `policy.max_retries`
    retries have failed, or at once when the server's `retry-after` exceeds
    `policy.max_retry_after`.
    """
    failures = 0
    previous: RetryableError | None = None
    while True:
        try:
            async with aclosing(attempt()) as events:
                async for event in events:
                    yield event
                    del event  # not kept while the next one is awaited (`Batch.take`)
            return
        except RetryableError as err:
            failures += 1
            if err.repeats(previous):
                raise ProviderError(
                    f"{err.message} (the same error again: not retried)", retryable=False
                ) from err
            previous = err
            if err.retry_after is not None and err.retry_after > policy.max_retry_after:
                wait = _format_wait(err.retry_after)
                raise ProviderError(
                    f"{err.message}; the server asks to wait {wait}, try again later",
                    retryable=True,
                ) from err
            if failures > policy.max_retries:
                raise ProviderError(
                    f"{err.message} (gave up after {failures} attempts)", retryable=True
                ) from err
            if err.retry_after is not None:
                delay = err.retry_after
            else:
                delay = policy.backoff(failures, rng)
            reason = err.reason
        # The Retry event is yielded outside the except block so that closing this
        # generator at that point does not chain the old error onto GeneratorExit.
        yield Retry(attempt=failures, delay=delay, reason=reason)
        await anyio.sleep(delay)
