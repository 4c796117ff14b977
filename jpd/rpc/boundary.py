"""The one module that touches pygls: a protocol per connection, framing, errors.

pygls gives us dispatch, `$/cancelRequest` and server-to-client request futures.
We own the read loop (so malformed frames and invalid JSON get -32700 and the
connection keeps serving), lifecycle gating (-32002 before `initialize`, -32600
after `shutdown`), param validation with pydantic (-32602 with the errors in
`data`), and error mapping (typed `JpdError` codes, never a traceback on the wire).
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import anyio.lowlevel
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from lsprotocol.converters import get_converter
from lsprotocol.types import CancelNotification, ResponseError
from pydantic import ValidationError
from pygls.exceptions import JsonRpcException
from pygls.protocol import JsonRPCProtocol
from pygls.server import JsonRPCServer

from jpd.core.daemon import Daemon
from jpd.protocol.errors import JpdError, RequestCancelled
from jpd.rpc.framing import Malformed, Receive, encode_frame, read_frames
from jpd.rpc.methods import METHODS, EncodedResult, Method
from jpd.rpc.session import Session
from jpd.rpc.transport import Host, SingleClientHost

log = logging.getLogger(__name__)

Send = Callable[[bytes], Awaitable[None]]

_FLUSH_TIMEOUT = 5.0  # seconds a closing connection gets to send its last frames


class _QuietRpcErrors(logging.Filter):
    """pygls logs a traceback for every error reply; expected errors need one line."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and isinstance(record.exc_info[1], JsonRpcException):
            record.exc_info = None
            record.levelno, record.levelname = logging.INFO, "INFO"
        return record.levelno >= logging.getLogger("pygls").getEffectiveLevel()


# pygls logs every message body at INFO; prompts and secrets pass through here.
logging.getLogger("pygls").setLevel(logging.WARNING)
for _name in ("pygls.protocol.json_rpc", "pygls.server"):
    logging.getLogger(_name).addFilter(_QuietRpcErrors())


class ConnectionLost(Exception):
    """The client went away while the daemon awaited its answer."""


class _JpdProtocol(JsonRPCProtocol):
    """pygls protocol with `$/cancelRequest` typing (lifecycle gating is in `_dispatch`)."""

    session: Session

    def get_message_type(self, method: str) -> Any:
        # With the plain-dict converter pygls cannot read cancel params unless typed.
        if method == "$/cancelRequest":
            return CancelNotification
        return None

    def _send_response(
        self, msg_id: Any, result: Any | None = None, error: ResponseError | None = None
    ) -> None:
        if error is None and isinstance(result, EncodedResult) and self.writer is not None:
            head = b'{"jsonrpc": "2.0", "id": %s, "result": ' % json.dumps(msg_id).encode()
            self.writer.write(head + result.json + b"}")
            return
        super()._send_response(msg_id, result=result, error=error)

    def _reply_error(self, msg_id: Any, code: int, message: str, data: Any = None) -> None:
        self._send_response(msg_id, error=ResponseError(code=code, message=message, data=data))


class _Server(JsonRPCServer):
    def report_server_error(self, error: Exception, source: Any) -> None:
        if isinstance(error, JsonRpcException):
            log.info("error reply: %s", error)
        else:
            log.error("%s", error)


class _QueueWriter:
    """pygls writes message bodies here; we frame them (only `Content-Length`, as
    protocol.md section 2 says: pygls would add a `Content-Type` header) and queue them
    for the writer task, so sends never block."""

    def __init__(self, out: MemoryObjectSendStream[bytes]) -> None:
        self._out = out

    def write(self, data: bytes) -> None:
        try:
            self._out.send_nowait(encode_frame(data))
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            log.debug("dropping %d bytes for a closed connection", len(data))

    def close(self) -> None:
        self._out.close()


def _make_handler(daemon: Daemon, session: Session, name: str, method: Method) -> Any:
    async def handler(params: Any) -> Any:
        try:
            model = method.params.model_validate({} if params is None else params)
        except ValidationError as exc:
            errors = json.loads(exc.json(include_url=False, include_input=False))
            first = errors[0] if errors else {}
            where = ".".join(str(p) for p in first.get("loc", ())) or "params"
            raise JsonRpcException(
                code=-32602,
                message=f"invalid params for {name}: {where}: {first.get('msg', 'invalid')}",
                data=errors,
            ) from None
        try:
            result = await method.handler(daemon, session, model)
        except JpdError as exc:
            raise JsonRpcException(code=exc.code, message=exc.message, data=exc.data) from None
        except (asyncio.CancelledError, JsonRpcException):
            raise
        except Exception as exc:  # never leak a traceback to the wire
            log.exception("internal error in %s", name)
            raise JsonRpcException(
                code=-32603, message=f"internal error in {name}: {type(exc).__name__}"
            ) from None
        if result is None or isinstance(result, EncodedResult):
            return result
        return result.to_wire()

    return handler


def _error_frame(msg_id: Any, code: int, message: str) -> bytes:
    body = {"jsonrpc": "2.0", "id": msg_id, "error": {"code": code, "message": message}}
    return encode_frame(json.dumps(body).encode())


async def serve_connection(
    daemon: Daemon, receive: Receive, send: Send, host: Host | None = None
) -> int:
    """Serve one client until `exit` or end of input; returns the exit code.

    `host` is the process serving the connection (`daemon/status`, `daemon/stop`);
    default: a single-client host that stops by ending this connection.
    """
    out_send, out_recv = anyio.create_memory_object_stream[bytes](max_buffer_size=math.inf)
    server = _Server(_JpdProtocol, get_converter)
    protocol = server.protocol
    assert isinstance(protocol, _JpdProtocol)

    def send_body(body: bytes) -> None:
        # Notifications arrive encoded (once for all subscribers): frame them directly
        # rather than through pygls' attrs/cattrs path.
        try:
            out_send.send_nowait(encode_frame(body))
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            log.debug("dropping a notification for a closed connection")

    async def request(method: str, params: dict[str, Any]) -> Any:
        try:
            return await protocol.send_request_async(method, params)
        except JsonRpcException as exc:
            if exc.code == RequestCancelled.code:
                raise RequestCancelled(exc.message) from None
            raise JpdError(
                f"client answered {method} with error {exc.code}: {exc.message}"
            ) from None

    session = Session(send_body, request)
    session.host = host if host is not None else SingleClientHost()
    protocol.session = session
    protocol.set_writer(_QueueWriter(out_send), include_headers=False)
    for name, method in METHODS.items():
        protocol.fm.feature(name)(_make_handler(daemon, session, name, method))
    daemon.connected(session)

    flushed = anyio.Event()
    async with anyio.create_task_group() as tg:
        tg.start_soon(_write_loop, out_recv, send, session, flushed)
        tg.start_soon(_read_loop, protocol, receive, out_send, session)
        await session.closed.wait()
        await _flush(protocol, out_send, flushed)
        tg.cancel_scope.cancel()
    out_send.close()
    daemon.disconnected(session)
    _fail_pending(protocol)
    server.shutdown()  # type: ignore[no-untyped-call]
    return session.exit_code


async def _read_loop(
    protocol: _JpdProtocol, receive: Receive, out: MemoryObjectSendStream[bytes], session: Session
) -> None:
    async for frame in read_frames(receive):
        if session.closed.is_set():
            return  # closing: the queue no longer takes frames
        if isinstance(frame, Malformed):
            log.warning("malformed frame: %s", frame.reason)
            out.send_nowait(_error_frame(None, -32700, f"parse error: {frame.reason}"))
            continue
        _dispatch(protocol, frame, out)
        if session.closed.is_set():
            return
    # End of input without `exit`: the client is gone.
    session.close(session.exit_code if session.closed.is_set() else 1)


def _dispatch(protocol: _JpdProtocol, body: bytes, out: MemoryObjectSendStream[bytes]) -> None:
    try:
        data = json.loads(body)
    except ValueError as exc:
        log.warning("invalid JSON from client: %s", exc)
        out.send_nowait(_error_frame(None, -32700, f"parse error: invalid JSON: {exc}"))
        return
    msg_id = data.get("id") if isinstance(data, dict) else None
    if not isinstance(msg_id, str | int) or isinstance(msg_id, bool):
        msg_id = None
    if isinstance(data, list):
        out.send_nowait(_error_frame(None, -32600, "invalid request: batches are not supported"))
        return
    if not isinstance(data, dict) or data.get("jsonrpc") != "2.0":
        out.send_nowait(_error_frame(msg_id, -32600, "invalid request: not a JSON-RPC 2.0 object"))
        return
    if "method" in data:
        if not isinstance(data["method"], str):
            out.send_nowait(
                _error_frame(msg_id, -32600, "invalid request: method must be a string")
            )
            return
        data.setdefault("params", None)
        if not _admit(protocol, data, msg_id):
            return
    try:
        message = protocol.structure_message(data)
    except Exception:  # pygls raises several types here
        log.warning("could not read message %r", data.get("method"))
        if msg_id is not None:
            out.send_nowait(_error_frame(msg_id, -32600, "invalid request: unreadable message"))
        return
    try:
        protocol.handle_message(message)
    except Exception:  # one bad message (e.g. a late answer) must not end the connection
        log.exception("could not handle message %r", data.get("method") or data.get("id"))


def _admit(protocol: _JpdProtocol, data: dict[str, Any], msg_id: Any) -> bool:
    """Lifecycle gating: -32002 before `initialize`, -32600 after `shutdown`.

    Decided on the decoded dict: pygls' runtime-checkable message protocols make an
    `isinstance` test cost more than the rest of a small request's handling.
    """
    session = protocol.session
    method = data["method"]
    if "id" in data:
        if session.shutdown_requested:
            protocol._reply_error(msg_id, -32600, "server is shut down: only `exit` is accepted")
            return False
        if not session.initialized and method != "initialize":
            protocol._reply_error(msg_id, -32002, "server not initialized: send `initialize`")
            return False
    elif not session.initialized and method not in ("exit", "$/cancelRequest"):
        log.warning("ignoring notification %r before initialize", method)
        return False
    return True


async def _write_loop(
    out: MemoryObjectReceiveStream[bytes], send: Send, session: Session, flushed: anyio.Event
) -> None:
    try:
        async with out:
            async for first in out:
                # Send everything already queued in one write: one syscall (and, on
                # stdio, one thread hop) per burst instead of one per frame.
                chunks = [first]
                while len(chunks) < 256:
                    try:
                        chunks.append(out.receive_nowait())
                    except (anyio.WouldBlock, anyio.EndOfStream):
                        break
                data = b"".join(chunks)
                try:
                    await send(data)
                except (OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
                    log.warning("client connection lost while writing")
                    session.close(1)
                    return
    finally:
        flushed.set()


async def _flush(
    protocol: _JpdProtocol, out: MemoryObjectSendStream[bytes], flushed: anyio.Event
) -> None:
    """On close, still deliver what is due: answers of handlers that already returned
    (pygls sends them from a done-callback, one loop step later), then everything queued
    (e.g. the `daemon/stop` answer, or `turn_completed` of turns cancelled on stop)."""
    for _ in range(100):
        futures = protocol._request_futures.values()
        if not any(isinstance(f, asyncio.Future) and f.done() for f in futures):
            break
        await anyio.lowlevel.checkpoint()
    out.close()
    with anyio.move_on_after(_FLUSH_TIMEOUT):
        await flushed.wait()


def _fail_pending(protocol: _JpdProtocol) -> None:
    """Fail server-to-client requests still awaiting this client's answer."""
    for future in list(protocol._request_futures.values()):
        if isinstance(future, asyncio.Future):
            future.cancel()  # a handler of this client's own request
        elif not future.done():
            future.set_exception(ConnectionLost("the client disconnected"))
