"""HTTP plumbing shared by the hosted providers: API keys, the streaming POST, error lines.

Every failure leaves here as a `ProviderError` whose message is one line a
person can act on, and transient ones as `RetryableError` so `retry.py` can
retry them. API keys live in `SecretStr` (masked in `repr`) and are scrubbed
from any text a server echoes back before it reaches an error message.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

import httpx
from pydantic import SecretStr
from pydantic_core import from_json

from jpd.llm.errors import ContextOverflow, ProviderError, ProviderUnavailable
from jpd.llm.http_client import aiohttp_transport, has_aiohttp, http_client, httpx_error_of
from jpd.llm.read_watch import BodyWatch, unwatch, watch
from jpd.llm.retry import RetryableError, parse_retry_after, status_is_retryable

_MAX_DETAIL = 300


def read_api_key(env: Mapping[str, str], var: str, provider: str) -> SecretStr:
    """The key in environment variable `var`; `ProviderUnavailable` naming it if unset."""
    value = env.get(var, "").strip()
    if not value:
        raise ProviderUnavailable(f"{provider}: no API key; set the {var} environment variable")
    return SecretStr(value)


def one_line(text: str, secrets: Sequence[str] = (), limit: int = _MAX_DETAIL) -> str:
    """Collapse whitespace, mask `secrets`, and shorten `text` for an error message."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def error_detail(body: bytes) -> tuple[str | None, str | None, str | None]:
    """(type, message, code) from an error body in Anthropic, OpenAI or common server shapes."""
    try:
        data: Any = json.loads(body)
    except ValueError:
        text = body.decode("utf-8", "replace").strip()
        return None, text or None, None
    if isinstance(data, dict):
        error = data.get("error")
        if isinstance(error, dict):
            return (
                _str(error.get("type")),
                _str(error.get("message")),
                _str(error.get("code")),
            )
        if isinstance(error, str):
            return None, error, None
        message = data.get("message", data.get("detail"))
        return _str(data.get("type")), _str(message) or json.dumps(data), None
    return None, str(data), None


def _str(value: Any) -> str | None:
    if value is None:
        return None
    return value if isinstance(value, str) else json.dumps(value)


def event_json(provider: str, data: str, secrets: Sequence[str]) -> Any:
    """Parse one stream event's JSON; a garbled event is a transient failure."""
    try:
        # pydantic-core's parser: a third of json.loads' time, paid once per token.
        return from_json(data)
    except ValueError as exc:
        raise RetryableError(
            f"{provider}: malformed stream event {one_line(data, secrets, 80)!r}",
            reason="malformed stream event",
        ) from exc


def status_error(
    provider: str,
    response: httpx.Response,
    *,
    key_env: str | None,
    secrets: Sequence[str],
) -> ProviderError:
    """Map an HTTP error response (body already read) to the error to raise."""
    status = response.status_code
    etype, emsg, code = error_detail(response.content)
    detail = one_line(emsg or httpx.codes.get_reason_phrase(status) or "no details", secrets)
    request_id = response.headers.get("request-id") or response.headers.get("x-request-id")
    suffix = f" (request {one_line(request_id, secrets, 80)})" if request_id else ""
    quota = "insufficient_quota" in (etype, code)

    if status == 401:
        hint = f"check the API key in ${key_env}" if key_env else "the server requires an API key"
        return ProviderError(f"{provider}: authentication failed (401): {hint}{suffix}")
    if status == 403:
        return ProviderError(f"{provider}: permission denied (403): {detail}{suffix}")
    if status == 404:
        return ProviderError(
            f"{provider}: not found (404): {detail}; check the model name and base URL{suffix}"
        )
    if quota:
        return ProviderError(
            f"{provider}: quota exceeded ({status}): {detail}; check your plan and billing{suffix}"
        )
    label = etype or httpx.codes.get_reason_phrase(status) or "error"
    if status == 529 or etype == "overloaded_error":
        message = f"{provider}: server overloaded ({status}): {detail}{suffix}"
    elif status == 429:
        message = f"{provider}: rate limited (429): {detail}{suffix}"
    elif status >= 500:
        message = f"{provider}: server error ({status} {label}): {detail}{suffix}"
    else:
        message = f"{provider}: request rejected ({status} {label}): {detail}{suffix}"
    if status in (400, 413) and _is_overflow(code, emsg):
        return ContextOverflow(message)
    if status_is_retryable(status, response.headers):
        return RetryableError(
            message,
            reason=f"HTTP {status} {label}",
            retry_after=parse_retry_after(response.headers),
            status=status,
        )
    return ProviderError(message)


_OVERFLOW_WORDS = (
    "prompt is too long",
    "context_length_exceeded",
    "maximum context length",
    "context window",
    "too many tokens",
    "exceeds the context",
    "exceed_context_size",
    "available context size",
)


def _is_overflow(code: str | None, message: str | None) -> bool:
    """Whether a rejection says the request does not fit the model's window: Anthropic's
    "prompt is too long", OpenAI's `context_length_exceeded` and its compatible servers'
    wordings (llama.cpp server, vLLM)."""
    text = f"{code or ''} {message or ''}".lower()
    return any(word in text for word in _OVERFLOW_WORDS)


class StreamingPost:
    """POSTs a JSON body and hands back the streaming response, mapping every failure.

    Owns its `httpx.AsyncClient` (`http_client`: one per provider, whose registry keeps
    one per configuration) unless one is injected (then the caller closes it). Its own
    client reads bodies without aiohttp's read timeout, re-armed per chunk: the headers
    have a deadline, and a body silent for the timeout is closed by the loop's watchdog
    (`jpd.llm.read_watch`); an injected client keeps httpx's read timeout.

    With its own client on aiohttp's transport, a request goes to the transport
    directly, an `httpx.Request` with the client's default headers: the client's
    layers (auth and redirect flows, a cookie jar parsing every response through
    urllib) cost more CPU per model call than building and sending the request, and a
    model call uses none of them (no auth flow, no redirects followed, no cookies: a
    provider's cookies would be shared by the turns of every client and key).
    """

    def __init__(
        self,
        *,
        provider: str,
        timeout: float,
        key_env: str | None,
        client: httpx.AsyncClient | None = None,
    ) -> None:
        self._provider = provider
        self._timeout = httpx.Timeout(timeout)
        self._seconds = timeout
        self._key_env = key_env
        self._owned = client is None
        self._watched = client is None and has_aiohttp()
        self._transport: httpx.AsyncBaseTransport | None = None
        """The transport requests go to directly (None: through `_client`)."""
        if self._watched:
            self._timeout = httpx.Timeout(timeout, read=None)
            self._transport = aiohttp_transport()
            client = httpx.AsyncClient(transport=self._transport)
        self._client = client if client is not None else http_client()
        self._extensions = {"timeout": self._timeout.as_dict()}
        self._defaults = [
            (name, name.decode("latin-1").lower(), value)
            for name, value in self._client.headers.raw
        ]
        """The client's default headers (accept, accept-encoding, user-agent, ...)."""
        self._urls: dict[str, httpx.URL] = {}
        """Each URL parsed once: httpx parses a string again for every request."""
        self._made: dict[tuple[str, tuple[tuple[str, str], ...]], httpx.Headers] = {}
        """Each request's headers but its length, by URL and the headers given (`_headers`)."""

    def _url(self, url: str) -> httpx.URL:
        parsed = self._urls.get(url)
        if parsed is None:
            if len(self._urls) >= 64:  # a provider posts to a few URLs
                self._urls.clear()
            parsed = self._urls[url] = httpx.URL(url)
        return parsed

    def _headers(self, url: str, given: Mapping[str, str]) -> httpx.Headers:
        """The client's default headers, each overridden by a header of the same name
        given here, and `Host`: normalised once per URL and headers (the same for every
        model call of a provider and key), not for every request."""
        key = (url, tuple(given.items()))
        found = self._made.get(key)
        if found is None:
            names = {name.lower() for name in given}
            merged: list[tuple[Any, Any]] = [
                (name, value) for name, lower, value in self._defaults if lower not in names
            ]
            merged += given.items()
            made = httpx.Request("POST", self._url(url), headers=merged).headers
            made.pop("content-length", None)  # each request's own
            if len(self._made) >= 64:  # keys rotate, or many URLs: start over
                self._made.clear()
            found = self._made[key] = made
        return found

    async def _send(self, url: str, headers: Mapping[str, str], body: bytes) -> httpx.Response:
        """The response, its body not read yet (the caller closes it)."""
        transport = self._transport
        if transport is None:
            request = self._client.build_request(
                "POST", self._url(url), content=body, headers=dict(headers), timeout=self._timeout
            )
            return await self._client.send(request, stream=True)
        request = httpx.Request(
            "POST",
            self._url(url),
            headers=self._headers(url, headers),
            content=body,
            extensions=dict(self._extensions),
        )
        # The loop's own timeout: the transport needs asyncio, and an anyio cancel
        # scope cost more than the rest of sending the request.
        async with asyncio.timeout(self._seconds):
            response = await transport.handle_async_request(request)
        response.request = request
        return response

    @asynccontextmanager
    async def open(
        self,
        url: str,
        headers: Mapping[str, str],
        body: bytes,
        *,
        secrets: Sequence[str] = (),
    ) -> AsyncIterator[tuple[httpx.Response, BodyWatch | None]]:
        """Send the request; yield the 2xx response for streaming, and the watch whose
        `reads` its reader counts (None: httpx's read timeout applies).

        Exceptions raised while the caller reads the body (inside the `async
        with`) are mapped too, so a reset mid-stream becomes a `RetryableError`.
        """
        provider = self._provider
        reads: BodyWatch | None = None
        try:
            try:
                response = await self._send(url, headers, body)
                try:
                    if self._watched:
                        reads = watch(self._seconds, response.aclose)
                    if response.status_code >= 400:
                        await response.aread()
                        raise status_error(
                            provider, response, key_env=self._key_env, secrets=secrets
                        )
                    yield response, reads
                finally:
                    if reads is not None:
                        unwatch(reads)
                    await response.aclose()
            except Exception as exc:
                if reads is not None and reads.expired:  # the watchdog closed it
                    raise httpx.ReadTimeout("the body stayed silent") from exc
                if isinstance(exc, TimeoutError) and reads is None and self._watched:
                    raise httpx.ReadTimeout("no response headers") from exc
                if isinstance(exc, httpx.TimeoutException):
                    mapped = httpx_error_of(exc)
                    if mapped is not exc:
                        raise mapped from exc
                raise
        except httpx.TimeoutException as exc:
            raise RetryableError(
                f"{provider}: no response from {_host(url)} within {self._seconds:g}s",
                reason="timeout",
            ) from exc
        except httpx.ConnectError as exc:
            raise RetryableError(
                f"{provider}: cannot connect to {_host(url)} ({one_line(str(exc), secrets, 120)});"
                " check the base URL and your network",
                reason="connection failed",
            ) from exc
        except (httpx.NetworkError, httpx.RemoteProtocolError) as exc:
            what = one_line(_describe(exc), secrets, 120)
            raise RetryableError(
                f"{provider}: connection to {_host(url)} lost ({what})",
                reason="connection lost",
            ) from exc
        except (httpx.HTTPError, httpx.InvalidURL) as exc:
            raise ProviderError(
                f"{provider}: cannot send the request to {_host(url)}: "
                f"{one_line(str(exc), secrets, 120)}; check the base URL"
            ) from exc

    async def aclose(self) -> None:
        """Close the HTTP client if this object created it."""
        if self._owned:
            await self._client.aclose()


def _describe(exc: BaseException) -> str:
    # httpx often wraps the OS error with an empty message ("ReadError"):
    # the first non-empty message down the chain says what happened.
    seen: BaseException | None = exc
    while seen is not None:
        if str(seen):
            return str(seen)
        seen = seen.__cause__ or seen.__context__
    return type(exc).__name__


def _host(url: str) -> str:
    # Only scheme, host and port: never echo credentials a URL might carry.
    try:
        parsed = httpx.URL(url)
    except httpx.InvalidURL:
        return "the configured base URL"
    port = f":{parsed.port}" if parsed.port else ""
    return f"{parsed.scheme}://{parsed.host}{port}"
