"""The HTTP part every hosted provider shares, written once: the client, the API key,
retries, reading a streamed body (SSE or NDJSON) and mapping failures.

A provider module (`anthropic.py`, `openai.py`, `google.py`, ...) is then its wire format
only: it subclasses `HttpProvider` and says, per model call, where to POST what
(`Call`), and how one streamed event becomes stream events (a `WireParser`).

Failures leave as the errors of `jpd.llm.errors`: transient ones as `RetryableError`
(retried here), a request too large for the model's window as `ContextOverflow` with
the window the provider stated where it stated one (`jpd.llm.overflow`).
"""

from __future__ import annotations

import functools
import os
import random
import re
from collections.abc import AsyncGenerator, Callable, Mapping
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Literal, Protocol

import httpx

from jpd.llm.base import EventStream, ModelRequest, StreamEvent
from jpd.llm.body_chunks import body_chunks
from jpd.llm.errors import ContextOverflow, ProviderError, ProviderUnavailable
from jpd.llm.ndjson import NDJSONDecoder
from jpd.llm.overflow import as_overflow
from jpd.llm.readahead import Readahead, read_ahead
from jpd.llm.retry import RetryableError, RetryPolicy, run_with_retries
from jpd.llm.stream_reader import Batch, stream_events
from jpd.llm.transport import StreamingPost, read_api_key


class WireParser(Protocol):
    """Assembles one response from its streamed events (one per attempt)."""

    def feed(self, data: str, out: Batch) -> bool:
        """One event's data (an SSE event's `data`, an NDJSON line) into `out`;
        returns whether the response is complete."""
        ...

    def end(self, out: Batch) -> None:
        """The body ended: nothing if `feed` said the response was complete; else add
        the closing events if the answer is whole anyway, or raise (`RetryableError` to
        retry)."""
        ...


@dataclass(frozen=True)
class Call:
    """One model call as the wire sees it."""

    url: str
    body: bytes
    parser: Callable[[], WireParser]
    """A new parser for each attempt."""
    headers: dict[str, str] = field(default_factory=dict)
    """Besides content type, accept and the key's header (added here)."""
    framing: Literal["sse", "ndjson"] = "sse"
    text_event: re.Pattern[str] | None = None
    """SSE: a whole event that is only a piece of text, its group 1 the text the parser
    would take from it (see `stream_events`)."""


class HttpProvider:
    """Base of the hosted providers. Subclasses set `name`, `default_base_url` (None:
    `base_url` is required), `base_url_env` and implement `call` and `auth_headers`.

    The API key is read from `env[api_key_env]` (default `os.environ`) when a stream
    starts, so a missing key fails the turn, not daemon start-up; with `api_key_env`
    None the server is sent no key.
    """

    name = "http"
    default_base_url: str | None = None
    default_api_key_env: str | None = None
    """The variable holding the key when the config names none."""
    base_url_env: str | None = None
    refuses_forced_tool_with_reasoning = False
    constrains_decoding = False

    def __init__(
        self,
        *,
        base_url: str | None = None,
        api_key_env: str | None = None,
        max_retries: int = 3,
        timeout: float = 600.0,
        env: Mapping[str, str] | None = None,
        client: httpx.AsyncClient | None = None,
        retry_policy: RetryPolicy | None = None,
    ) -> None:
        self._env = env if env is not None else os.environ
        from_env = self._env.get(self.base_url_env) if self.base_url_env else None
        base = base_url or from_env or self.default_base_url
        self.base_url = base.rstrip("/") if base else None
        # None: the wire format's own variable (`default_api_key_env`; none for a server
        # that takes no key).
        api_key_env = api_key_env if api_key_env is not None else self.default_api_key_env
        self.api_key_env = api_key_env
        self.policy = retry_policy or RetryPolicy(max_retries=max_retries)
        self._post = StreamingPost(
            provider=self.name, timeout=timeout, key_env=api_key_env, client=client
        )
        self._rng = random.Random()

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(name={self.name!r}, base_url={self.base_url!r}, "
            f"api_key_env={self.api_key_env!r})"
        )

    # --- what a wire format supplies ------------------------------------------------

    def call(self, request: ModelRequest, base_url: str, secrets: tuple[str, ...]) -> Call:
        """Where to send `request` and how to read the answer (`secrets`: the key, to
        mask in any text a server echoes)."""
        raise NotImplementedError

    def auth_headers(self, secret: str) -> dict[str, str]:
        """The headers carrying the API key (never the URL: it ends up in logs)."""
        return {"authorization": f"Bearer {secret}"}

    def prepare(self, request: ModelRequest) -> ModelRequest:
        """The request as sent (e.g. a forced tool softened); the default sends it as is."""
        return request

    # --- shared -----------------------------------------------------------------------

    def require_base_url(self) -> str:
        """The base URL; `ProviderUnavailable` naming the setting when none is set."""
        if self.base_url is None:
            section = self.name.replace("-", "_")
            raise ProviderUnavailable(f"{self.name}: no base URL; set providers.{section}.base_url")
        return self.base_url

    def secret(self) -> str | None:
        """The API key (None when this provider sends none)."""
        if self.api_key_env is None:
            return None
        return read_api_key(self._env, self.api_key_env, self.name).get_secret_value()

    def stream(self, request: ModelRequest) -> EventStream:
        """Stream one model call (see `Provider.stream`)."""
        return read_ahead(functools.partial(self._events, self.prepare(request)))

    async def aclose(self) -> None:
        """Close the HTTP client if this provider created it."""
        await self._post.aclose()

    def _events(
        self, request: ModelRequest, readahead: Readahead
    ) -> AsyncGenerator[StreamEvent, None]:
        base = self.require_base_url()
        secret = self.secret()
        secrets = (secret,) if secret is not None else ()
        call = self.call(request, base, secrets)
        accept = "text/event-stream" if call.framing == "sse" else "application/x-ndjson"
        headers = {"content-type": "application/json", "accept": accept, **call.headers}
        if secret is not None:
            headers.update(self.auth_headers(secret))

        def attempt() -> AsyncGenerator[StreamEvent, None]:
            return self._attempt(call, headers, secrets, readahead)

        return run_with_retries(attempt, self.policy, self._rng)

    async def _attempt(
        self,
        call: Call,
        headers: dict[str, str],
        secrets: tuple[str, ...],
        readahead: Readahead,
    ) -> AsyncGenerator[StreamEvent, None]:
        parser = call.parser()
        decoder = NDJSONDecoder() if call.framing == "ndjson" else None
        try:
            async with (
                self._post.open(call.url, headers, call.body, secrets=secrets) as (response, reads),
                aclosing(
                    stream_events(
                        readahead.batches(body_chunks(response), reads),
                        parser.feed,
                        decoder=decoder,
                        text_event=call.text_event if decoder is None else None,
                    )
                ) as events,
            ):
                async for event in events:
                    yield event
                    # Not kept while the next one is awaited: a thousand waiting streams'
                    # would fill the collector's young generation (`Batch.take`).
                    del event
        except ContextOverflow:
            raise
        except RetryableError:
            raise
        except ProviderError as exc:
            overflow = as_overflow(exc)
            if overflow is not None:
                raise overflow from exc
            raise
        out = Batch()
        parser.end(out)
        for event in out.take():
            yield event
