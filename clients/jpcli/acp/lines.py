"""ACP's stdio framing (one JSON-RPC message per line) with errors for bad lines.

The SDK's own line reader logs and skips a line that is not JSON; JSON-RPC 2.0 wants
an answer: a line that is not JSON gets -32700 and one that is not a JSON-RPC message
object gets -32600, both with `id: null` (the id cannot be trusted), and the bridge
reads on.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

log = logging.getLogger(__name__)

PARSE_ERROR = -32700
INVALID_REQUEST = -32600

CANCEL_REQUEST = "$/cancel_request"
DELETE_ROUTE = "jp/session_delete"
EXTENSION_ROUTES = {"session/delete": "_" + DELETE_ROUTE}
"""Methods of the ACP schema that SDK 0.12.1 does not route: renamed as they arrive to
an extension method, which the SDK hands to the agent's `ext_method`."""


def problem(line: bytes) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """`(message, None)` for a good line, `(None, error response)` for a bad one."""
    try:
        message = json.loads(line)
    except (ValueError, UnicodeDecodeError) as exc:
        return None, _error(PARSE_ERROR, f"parse error: invalid JSON: {exc}")
    if isinstance(message, list):
        return None, _error(INVALID_REQUEST, "invalid request: batches are not supported")
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
        return None, _error(INVALID_REQUEST, "invalid request: not a JSON-RPC 2.0 object")
    method = message.get("method")
    if "method" in message and not isinstance(method, str):
        return None, _error(INVALID_REQUEST, "invalid request: method must be a string")
    if "method" not in message and "id" not in message:
        return None, _error(INVALID_REQUEST, "invalid request: neither a request nor a response")
    return message, None


def _error(code: int, text: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": None, "error": {"code": code, "message": text}}


class LineTransport:
    """The SDK's `Transport` over stdin/stdout streams (see the module docstring)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader = reader
        self._writer = writer
        self._lock = asyncio.Lock()

    async def send(self, message: dict[str, Any]) -> None:
        """Write one message as one line."""
        data = json.dumps(message, ensure_ascii=False, separators=(",", ":")) + "\n"
        async with self._lock:
            self._writer.write(data.encode("utf-8"))
            await self._writer.drain()

    async def receive(self) -> dict[str, Any] | None:
        """The next message; `None` at the end of input (the editor went away)."""
        while True:
            line = await self._read_line()
            if line is None:
                return None
            if not line.strip():
                continue
            message, error = problem(line)
            if message is not None:
                if message.get("method") == CANCEL_REQUEST and "id" not in message:
                    # SDK 0.12.1 has no route for it (and logs a traceback): a request
                    # is cancelled the ACP way, `session/cancel`.
                    log.debug("ignored %s: %s", CANCEL_REQUEST, message.get("params"))
                    continue
                if message.get("method") in EXTENSION_ROUTES:
                    message["method"] = EXTENSION_ROUTES[message["method"]]
                return message
            log.warning("bad input line: %s", error)
            await self.send(error or {})

    async def close(self) -> None:
        """Close stdout's writer."""
        self._writer.close()

    async def _read_line(self) -> bytes | None:
        chunks: list[bytes] = []
        while True:
            try:
                chunk = await self._reader.readuntil(b"\n")
            except asyncio.LimitOverrunError as exc:
                chunks.append(await self._reader.readexactly(exc.consumed))
                continue
            except asyncio.IncompleteReadError as exc:
                if not exc.partial and not chunks:
                    return None
                chunk = exc.partial
            chunks.append(chunk)
            return b"".join(chunks)
