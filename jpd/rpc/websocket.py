"""`jpd --listen --listen-ws ws://127.0.0.1:PORT`: the daemon's protocol on a WebSocket.

Optional, and no weaker than the Unix socket (mode 0600, this user only). A loopback
port is open to every local user and to every web page the browser loads, so:

- **a token is always required**, as `Authorization: Bearer <token>` in the upgrade
  request, compared in constant time, before any JSON-RPC message is read. The token is
  read from `--ws-token-file` (a regular file of this user, mode 0600, at least 32
  characters) or, without it, generated and written to `<socket>.ws-token` (0600,
  removed at stop) for local clients to read;
- **loopback only** unless a token file is given: binding another address without one
  is refused at start-up;
- **any `Origin` header is refused** (403): browsers send one, other clients do not, so
  no web page can drive the daemon (cross-site WebSocket hijacking);
- on loopback, **the `Host` header must name a loopback address** (403 otherwise), so a
  DNS-rebinding page cannot reach it under its own name.

One JSON-RPC message per WebSocket message (text or binary), in both directions; the
session behind it is the Unix socket's (`serve_connection`), with the same limits.
"""

from __future__ import annotations

import contextlib
import hmac
import ipaddress
import logging
import os
import secrets
import stat
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import anyio

log = logging.getLogger(__name__)

MIN_TOKEN = 32


class WsConfigError(Exception):
    """`--listen-ws` cannot be honoured safely; the message says why."""


@dataclass(frozen=True)
class WsListen:
    host: str
    port: int
    token: str
    loopback: bool
    generated: Path | None
    """The token file this daemon wrote (removed at stop), if it generated the token."""


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def read_token_file(path: Path) -> str:
    """The token in `path`, refused unless only this user can read it."""
    try:
        info = path.stat()
        text = path.read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise WsConfigError(f"cannot read the token file {path}: {exc.strerror}") from None
    if not stat.S_ISREG(info.st_mode) or info.st_uid != os.getuid():
        raise WsConfigError(f"refusing token file {path}: not a regular file of this user")
    if info.st_mode & 0o077:
        raise WsConfigError(
            f"refusing token file {path}: mode {stat.S_IMODE(info.st_mode):o}, "
            "others could read it (chmod 600)"
        )
    if len(text) < MIN_TOKEN:
        raise WsConfigError(f"refusing token file {path}: the token is under {MIN_TOKEN} chars")
    return text


def configure(url: str, token_file: Path | None, socket_path: Path) -> WsListen:
    """Check `--listen-ws URL [--ws-token-file FILE]`; generate the token when needed."""
    parts = urlsplit(url)
    if parts.scheme != "ws" or not parts.hostname or parts.port is None:
        raise WsConfigError(f"expected ws://HOST:PORT, got {url!r}")
    if parts.path not in ("", "/") or parts.query or parts.username:
        raise WsConfigError(f"expected ws://HOST:PORT with nothing after it, got {url!r}")
    host, loopback = parts.hostname, _is_loopback(parts.hostname)
    if token_file is not None:
        return WsListen(host, parts.port, read_token_file(token_file), loopback, None)
    if not loopback:
        raise WsConfigError(
            f"refusing to listen on {host} without --ws-token-file: "
            "only loopback gets a generated token"
        )
    token = secrets.token_urlsafe(32)
    generated = socket_path.with_suffix(".ws-token")
    fd = os.open(generated, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(token + "\n")
    return WsListen(host, parts.port, token, loopback, generated)


def refusal(settings: WsListen, headers: Any) -> tuple[int, str] | None:
    """Why an upgrade request must be refused (status, reason), or None to accept it."""
    if headers.get("Origin") is not None:
        return 403, "Origin not allowed\n"
    if settings.loopback:
        host = (headers.get("Host") or "").strip().lower()
        name = host.rsplit(":", 1)[0] if not host.endswith("]") else host
        if not _is_loopback(name.strip("[]")):
            return 403, "Host not allowed\n"
    given = headers.get("Authorization") or ""
    scheme, _, token = given.partition(" ")
    expected = settings.token.encode()
    if scheme.lower() != "bearer" or not hmac.compare_digest(token.strip().encode(), expected):
        return 401, "a valid Authorization: Bearer token is required\n"
    return None


class WsConnection:
    """A WebSocket as the byte stream `serve_connection` reads and writes: each incoming
    message becomes one framed message; each outgoing frame becomes one message."""

    def __init__(self, ws: Any) -> None:
        self._ws = ws
        self._out = bytearray()
        self._hung_up = False
        self._scope: anyio.CancelScope | None = None

    async def receive(self) -> bytes:
        if self._hung_up:
            return b""
        from websockets.exceptions import ConnectionClosed

        with anyio.CancelScope() as scope:
            self._scope = scope
            try:
                message = await self._ws.recv()
            except ConnectionClosed:
                return b""
            finally:
                self._scope = None
            body = message.encode() if isinstance(message, str) else bytes(message)
            return b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
        return b""

    async def send(self, data: bytes) -> None:
        self._out += data
        while True:
            end = self._out.find(b"\r\n\r\n")
            if end < 0:
                return
            length = _content_length(bytes(self._out[:end]))
            start = end + 4
            if len(self._out) < start + length:
                return
            body = bytes(self._out[start : start + length])
            del self._out[: start + length]
            from websockets.exceptions import ConnectionClosed

            try:
                await self._ws.send(body.decode("utf-8"))
            except ConnectionClosed:
                # As a socket that broke: the session ends this client quietly.
                raise anyio.BrokenResourceError from None

    def hang_up(self) -> None:
        self._hung_up = True
        if self._scope is not None:
            self._scope.cancel()


def _content_length(headers: bytes) -> int:
    for line in headers.split(b"\r\n"):
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return int(value.strip())
    raise ValueError("a frame without Content-Length")  # the daemon always sends one


async def serve_ws(
    settings: WsListen,
    serve_client: Callable[[WsConnection], Awaitable[None]],
    max_size: int,
    stop: Callable[[str], None],
) -> None:
    """Accept WebSocket clients until cancelled; each is served by `serve_client`. A port
    that cannot be had stops the daemon (`stop`), rather than serving less than asked."""
    from websockets.asyncio.server import serve

    def process_request(connection: Any, request: Any) -> Any:
        refused = refusal(settings, request.headers)
        if refused is None:
            return None
        log.warning("refused a WebSocket client: %s", refused[1].strip())
        return connection.respond(refused[0], refused[1])

    async def handler(ws: Any) -> None:
        await serve_client(WsConnection(ws))

    try:
        server = serve(
            handler,
            settings.host,
            settings.port,
            process_request=process_request,
            max_size=max_size,
            compression=None,
            server_header=None,
        )
        try:
            await server.__aenter__()
        except OSError as exc:
            log.error("cannot listen on ws://%s:%d: %s", settings.host, settings.port, exc)
            stop(f"cannot listen on ws://{settings.host}:{settings.port}")
            return
        try:
            log.info("listening on ws://%s:%d", settings.host, settings.port)
            await anyio.sleep_forever()
        finally:
            with anyio.CancelScope(shield=True):
                await server.__aexit__(None, None, None)
    finally:
        if settings.generated is not None:
            with contextlib.suppress(OSError):
                settings.generated.unlink()
