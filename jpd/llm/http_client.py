"""The HTTP client of model calls: httpx's API, on aiohttp's transport when installed.

One client per provider (its registry keeps one per configuration), sized for thousands
of streams at once; aiohttp's errors classed as httpx's own transport would class them.
"""

from __future__ import annotations

import httpx

MAX_CONNECTIONS = 10_000
"""Connections one client may open: a daemon streams thousands of turns at once."""
MAX_IDLE_CONNECTIONS = 1_000
"""Idle connections one client keeps for the next model calls."""


def http_client() -> httpx.AsyncClient:
    """A client for model calls: httpx's API on aiohttp's transport when `httpx-aiohttp`
    is installed, else httpx's own. Measured (`python -m bench --only turns`), httpx's
    pool spends CPU per request and per closed response in proportion to its open
    connections, so with a thousand streams it costs several times what aiohttp's does
    per token; aiohttp's stays flat. Imported here, on first use: nothing of aiohttp is
    loaded at start-up or for a daemon without a hosted model."""
    if not has_aiohttp():  # pragma: no cover - a dependency; kept optional for packagers
        return httpx.AsyncClient(limits=_limits())
    return httpx.AsyncClient(transport=aiohttp_transport())


def aiohttp_transport() -> httpx.AsyncBaseTransport:
    """`http_client`'s transport (`httpx-aiohttp` must be installed)."""
    from httpx_aiohttp import AiohttpTransport

    return AiohttpTransport(limits=_limits())


def _limits() -> httpx.Limits:
    return httpx.Limits(
        max_connections=MAX_CONNECTIONS, max_keepalive_connections=MAX_IDLE_CONNECTIONS
    )


def has_aiohttp() -> bool:
    try:
        import httpx_aiohttp  # noqa: F401
    except ImportError:  # pragma: no cover
        return False
    return True


def httpx_error_of(exc: httpx.TimeoutException) -> httpx.HTTPError:
    """`exc` as httpx's own transport would class it. `httpx-aiohttp` raises
    `ConnectTimeout` for every failed connection (refused, reset, closed by the server),
    which would read as "no response within 600s"; its cause says what happened."""
    cause = exc.__cause__
    if cause is None or isinstance(cause, TimeoutError) or type(cause).__module__ == "httpcore":
        return exc
    import aiohttp  # loaded already: the cause is one of its errors

    if isinstance(cause, aiohttp.ClientConnectorError):
        return httpx.ConnectError(str(cause))
    if isinstance(cause, aiohttp.ClientConnectionError):
        return httpx.ReadError(str(cause) or type(cause).__name__)
    return exc
