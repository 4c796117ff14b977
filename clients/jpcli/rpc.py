"""JSON-RPC 2.0 over a byte stream with LSP base framing (`Content-Length` headers).

Standard library only: this module is on the client's start-up path.

A `Connection` owns one background thread that reads frames and routes them:
responses wake the thread waiting in `request`; notifications and server-to-client
requests are queued for `receive`, which the caller's thread drains. Handlers for
server-to-client requests therefore run on the thread that calls `receive` (the main
thread in `jp`), which is where terminal prompts and signal handling belong.
"""

from __future__ import annotations

import contextlib
import json
import queue
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO, Any

# JSON-RPC error codes used by this client when answering server-to-client requests.
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
REQUEST_CANCELLED = -32800
"""The person dismissed the question (Ctrl-C, end of input at the prompt)."""

_MAX_HEADER_LINE = 8192


class RpcError(Exception):
    """An error response to a request: `code`, `message` and optional `data`."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data

    def __repr__(self) -> str:
        return f"RpcError({self.code!r}, {self.message!r}, {self.data!r})"


class ConnectionClosed(Exception):
    """The peer went away (end of stream, broken pipe) or sent something unreadable."""


@dataclass(frozen=True, slots=True)
class Notification:
    """A notification from the server."""

    method: str
    params: Any


@dataclass(frozen=True, slots=True)
class _ServerRequest:
    id: int | str
    method: str
    params: Any


class _Pending:
    """One outstanding request: set once, by the reader thread."""

    __slots__ = ("done", "error", "result")

    def __init__(self) -> None:
        self.done = threading.Event()
        self.result: Any = None
        self.error: BaseException | None = None


_CLOSED = object()  # inbox sentinel: the reader thread has stopped


# --- framing -----------------------------------------------------------------------


def encode_message(message: dict[str, Any]) -> bytes:
    """One framed message: `Content-Length` header plus UTF-8 JSON body."""
    body = json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    return b"Content-Length: " + str(len(body)).encode("ascii") + b"\r\n\r\n" + body


def write_message(writer: IO[bytes], message: dict[str, Any]) -> None:
    """Write one framed message and flush."""
    writer.write(encode_message(message))
    writer.flush()


def _read_exact(reader: IO[bytes], size: int) -> bytes:
    # Raw streams may return short reads; loop until the whole body is in.
    chunks: list[bytes] = []
    remaining = size
    while remaining > 0:
        chunk = reader.read(remaining)
        if not chunk:
            raise ConnectionClosed("end of stream inside a message body")
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def read_message(reader: IO[bytes]) -> dict[str, Any] | None:
    """Read one framed message; `None` at a clean end of stream (between messages).

    Raises `ConnectionClosed` on a truncated or malformed frame.
    """
    length: int | None = None
    seen_header = False
    while True:
        line = reader.readline(_MAX_HEADER_LINE)
        if not line:
            if seen_header:
                raise ConnectionClosed("end of stream inside message headers")
            return None
        if not line.endswith(b"\n"):
            raise ConnectionClosed("header line too long or truncated")
        line = line.rstrip(b"\r\n")
        if not line:
            if not seen_header:
                continue  # tolerate stray blank lines between messages
            break
        seen_header = True
        name, sep, value = line.partition(b":")
        if not sep:
            raise ConnectionClosed(f"malformed header: {line[:80]!r}")
        if name.strip().lower() == b"content-length":
            try:
                length = int(value.strip())
            except ValueError:
                raise ConnectionClosed(f"bad Content-Length: {value[:40]!r}") from None
            if length < 0:
                raise ConnectionClosed(f"bad Content-Length: {length}")
    if length is None:
        raise ConnectionClosed("message without Content-Length")
    body = _read_exact(reader, length)
    try:
        message = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConnectionClosed(f"invalid JSON body: {exc}") from None
    if not isinstance(message, dict):
        raise ConnectionClosed("message body is not a JSON object")
    return message


# --- connection --------------------------------------------------------------------


class Connection:
    """A JSON-RPC client endpoint over `reader`/`writer` byte streams.

    `request` and `notify` may be called from any thread. `receive` returns the next
    notification, answering queued server-to-client requests on the way with the
    handlers registered by `on_request` (unregistered methods are answered -32601
    by the reader thread at once).
    """

    def __init__(self, reader: IO[bytes], writer: IO[bytes]) -> None:
        self._reader = reader
        self._writer = writer
        self._write_lock = threading.Lock()
        self._state_lock = threading.Lock()
        self._next_id = 1
        self._pending: dict[int, _Pending] = {}
        self._handlers: dict[str, Callable[[Any], Any]] = {}
        self._watchers: dict[str, Callable[[Any], None]] = {}
        self._inbox: queue.Queue[object] = queue.Queue()
        self._held: deque[_ServerRequest] = deque()
        self._closed: ConnectionClosed | None = None
        self._thread = threading.Thread(target=self._read_loop, name="jp-rpc-reader", daemon=True)
        self._thread.start()

    @property
    def closed(self) -> bool:
        """True once the reader has seen the end of the stream or a broken frame."""
        return self._closed is not None

    def on_request(self, method: str, handler: Callable[[Any], Any]) -> None:
        """Answer server-to-client requests for `method` with `handler(params)`.

        The handler's return value is the result; raising `RpcError` sends that
        error, any other exception sends -32603.
        """
        self._handlers[method] = handler

    def on_message(self, method: str, watcher: Callable[[Any], None]) -> None:
        """Call `watcher(params)` on the reader thread for each incoming notification or
        server request of `method`, as it arrives, before it is queued for `receive`.

        For what cannot wait for `receive`: while a handler blocks the receiving thread
        (a person answering a prompt), a watcher still sees what arrives meanwhile. It
        must be quick and thread-safe; its exceptions are ignored.
        """
        self._watchers[method] = watcher

    def request(self, method: str, params: Any = None, timeout: float | None = None) -> Any:
        """Send a request and block until its response; return the result.

        Raises `RpcError` for an error response, `ConnectionClosed` if the peer goes away,
        `TimeoutError` when `timeout` seconds pass first (the request is then cancelled
        with `$/cancelRequest`).
        """
        pending = _Pending()
        request_id = self._new_request(pending)
        try:
            self._send(_request(request_id, method, params))
            if not pending.done.wait(timeout):
                self.notify("$/cancelRequest", {"id": request_id})
                raise TimeoutError(f"{method}: no answer within {timeout:g}s")
        finally:
            with self._state_lock:
                self._pending.pop(request_id, None)
        if pending.error is not None:
            raise pending.error
        return pending.result

    def post(self, method: str, params: Any = None) -> None:
        """Send a request without waiting for its response (dropped when it comes).

        Raises `ConnectionClosed` if the peer is gone already."""
        self._send(_request(self._new_request(None), method, params))

    def _new_request(self, pending: _Pending | None) -> int:
        """A new request's id, its response awaited by `pending` (None: dropped)."""
        with self._state_lock:
            if self._closed is not None:
                raise self._closed
            request_id = self._next_id
            self._next_id += 1
            if pending is not None:
                self._pending[request_id] = pending
        return request_id

    def notify(self, method: str, params: Any = None) -> None:
        """Send a notification (no response)."""
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        self._send(message)

    def receive(
        self, timeout: float | None = None, *, hold_requests: bool = False
    ) -> Notification | None:
        """The next notification, or `None` if `timeout` seconds pass without one.

        Server requests met on the way are answered first, in order; with
        `hold_requests` they are kept, unanswered, for the next `receive` without it
        (to show a backlog of notifications before asking the person anything).
        Raises `ConnectionClosed` once everything received before the end is consumed.
        """
        if not hold_requests:
            while self._held:
                self._answer(self._held.popleft())
        while True:
            try:
                item = self._inbox.get(timeout=timeout)
            except queue.Empty:
                return None
            if item is _CLOSED:
                self._inbox.put(_CLOSED)  # keep later calls failing too
                assert self._closed is not None
                raise self._closed
            if isinstance(item, _ServerRequest):
                if hold_requests:
                    self._held.append(item)
                else:
                    self._answer(item)
                continue
            assert isinstance(item, Notification)
            return item

    def close(self) -> None:
        """Close the writing side (the peer sees end of stream)."""
        with self._write_lock, contextlib.suppress(OSError):
            self._writer.close()

    def wait_closed(self, timeout: float | None = None) -> bool:
        """Wait for the reader thread to see the end of the stream; True if it did."""
        self._thread.join(timeout)
        return not self._thread.is_alive()

    # --- internals ---------------------------------------------------------------

    def _send(self, message: dict[str, Any]) -> None:
        data = encode_message(message)
        with self._write_lock:
            try:
                self._writer.write(data)
                self._writer.flush()
            except (OSError, ValueError) as exc:  # ValueError: write to a closed file
                raise self._closed or ConnectionClosed(f"cannot write: {exc}") from None

    def _answer(self, request: _ServerRequest) -> None:
        handler = self._handlers.get(request.method)
        response: dict[str, Any] = {"jsonrpc": "2.0", "id": request.id}
        try:
            if handler is None:
                raise RpcError(METHOD_NOT_FOUND, f"method not supported: {request.method}")
            response["result"] = handler(request.params)
        except RpcError as exc:
            error: dict[str, Any] = {"code": exc.code, "message": exc.message}
            if exc.data is not None:
                error["data"] = exc.data
            response["error"] = error
        except Exception as exc:
            response["error"] = {"code": INTERNAL_ERROR, "message": str(exc) or type(exc).__name__}
        with contextlib.suppress(ConnectionClosed):  # the end surfaces through receive()
            self._send(response)

    def _read_loop(self) -> None:
        reason = ConnectionClosed("connection closed by peer")
        try:
            while True:
                message = read_message(self._reader)
                if message is None:
                    break
                self._route(message)
        except ConnectionClosed as exc:
            reason = exc
        except (OSError, ValueError) as exc:
            reason = ConnectionClosed(f"cannot read: {exc}")
        with self._state_lock:
            self._closed = reason
            pending = list(self._pending.values())
        for slot in pending:
            # A slot already answered keeps its answer: its caller may not have woken
            # yet when the peer hangs up right after answering (e.g. `daemon/stop`).
            if not slot.done.is_set():
                slot.error = reason
                slot.done.set()
        self._inbox.put(_CLOSED)

    def _route(self, message: dict[str, Any]) -> None:
        method = message.get("method")
        if isinstance(method, str):
            params = message.get("params")
            watcher = self._watchers.get(method)
            if watcher is not None:
                with contextlib.suppress(Exception):
                    watcher(params)
            if "id" in message:
                request = _ServerRequest(message["id"], method, params)
                if method in self._handlers:
                    self._inbox.put(request)
                else:
                    self._answer(request)
            else:
                self._inbox.put(Notification(method, params))
            return
        request_id = message.get("id")
        with self._state_lock:
            slot = self._pending.get(request_id) if isinstance(request_id, int) else None
        if slot is None:
            return  # a response nobody waits for (or garbage): nothing to wake
        error = message.get("error")
        if isinstance(error, dict):
            code = error.get("code")
            slot.error = RpcError(
                code if isinstance(code, int) else INTERNAL_ERROR,
                str(error.get("message", "unknown error")),
                error.get("data"),
            )
        else:
            slot.result = message.get("result")
        slot.done.set()


def _request(request_id: int, method: str, params: Any) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        message["params"] = params
    return message
