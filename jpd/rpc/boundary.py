"""The one module that touches pygls: a protocol per connection, framing, errors.

pygls gives us dispatch, `$/cancelRequest` and server-to-client request futures.
We own the read loop (so malformed frames and invalid JSON get -32700 and the
connection keeps serving), lifecycle gating (-32002 before `initialize`, -32600
after `shutdown`), param validation with pydantic (-32602 with the errors in
`data`), and error mapping (`jpd.rpc.errors`: typed `JpdError` codes, never a
traceback on the wire). The calls in flight in both directions are tracked here, not
read from pygls' internals; the one private pygls hook is confined to `pygls_private`.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from concurrent.futures import Future
from typing import Any

import anyio
import anyio.lowlevel
from lsprotocol.types import CancelNotification
from pydantic import ValidationError
from pygls.exceptions import JsonRpcException
from pygls.server import JsonRPCServer

from jpd.core.daemon import Daemon
from jpd.protocol.client_port import Notification
from jpd.protocol.errors import (
    ConnectionLost,
    InvalidRequest,
    JpdError,
    MethodNotFound,
    NotInitialized,
    ParseError,
)
from jpd.protocol.method_table import (
    CANCEL_REQUEST,
    EXIT,
    INITIALIZE,
    SHUTDOWN,
    TURN_EVENT,
    TURN_LAGGED,
)
from jpd.protocol.turn_events import TurnLaggedParams
from jpd.protocol.turn_notes import TurnEventNote
from jpd.rpc import errors
from jpd.rpc.answers import QueueWriter, ThreadAnswers, answer_now
from jpd.rpc.converter import message_converter
from jpd.rpc.framing import Frame, Malformed, Receive, encode_frame, read_frames
from jpd.rpc.handler_types import Handler, Incoming
from jpd.rpc.inbound import Refused, read_message
from jpd.rpc.lane import ThreadedInput
from jpd.rpc.methods import HANDLERS
from jpd.rpc.outbox import ConnectionLimits, Outbox
from jpd.rpc.pygls_private import EncodedResult, EncodedResultProtocol
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


class _JpdProtocol(EncodedResultProtocol):
    """pygls protocol with `$/cancelRequest` typing (lifecycle gating is in `_dispatch`)."""

    session: Session
    daemon: Daemon

    def get_message_type(self, method: str) -> Any:
        # With the plain-dict converter pygls cannot read cancel params unless typed.
        if method == CANCEL_REQUEST.name:
            return CancelNotification
        return None


class _Calls:
    """Requests in flight on one connection, both ways (pygls keeps its own books
    privately; these are ours, so closing needs no pygls internals)."""

    def __init__(self) -> None:
        self.handling: set[asyncio.Task[Any]] = set()
        """Handlers of the client's requests; each leaves the set one callback after
        pygls sent its answer (callbacks run in the order they were added)."""
        self.awaiting: set[Future[Any]] = set()
        """Server-to-client requests awaiting the client's answer."""

    def track_handler(self) -> None:
        task = asyncio.current_task()
        if task is not None:
            self.handling.add(task)
            task.add_done_callback(self.handling.discard)

    def track_request(self, future: Future[Any]) -> None:
        self.awaiting.add(future)
        future.add_done_callback(self.awaiting.discard)

    def answers_due(self) -> bool:
        """A handler returned but pygls has not sent its answer yet."""
        return any(task.done() for task in self.handling)

    def fail_all(self) -> None:
        """The client is gone: stop its handlers, fail what awaits its answers."""
        for task in list(self.handling):
            task.cancel()
        for future in list(self.awaiting):
            if not future.done():
                future.set_exception(ConnectionLost("the client disconnected"))


class _Server(JsonRPCServer):
    def report_server_error(self, error: Exception, source: Any) -> None:
        if isinstance(error, JsonRpcException):
            log.info("error reply: %s", error)
        else:
            log.error("%s", error)


def _make_handler(
    daemon: Daemon, session: Session, calls: _Calls, method: Incoming, handler: Handler
) -> Any:
    async def handle(params: Any) -> Any:
        calls.track_handler()
        try:
            try:
                model = method.params.model_validate({} if params is None else params)
            except ValidationError as exc:
                raise errors.invalid_params(method.name, exc) from None
            result = await handler(daemon, session, model)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # typed errors keep their code; anything else: -32603
            raise errors.to_pygls(errors.from_handler(method.name, exc)) from None
        if result is None or isinstance(result, EncodedResult):
            return result
        return result.to_wire()

    return handle


def _error_frame(msg_id: Any, error: JpdError) -> bytes:
    return encode_frame(errors.error_body(msg_id, error))


async def serve_connection(
    daemon: Daemon,
    receive: Receive | ThreadedInput,
    send: Send,
    host: Host | None = None,
    limits: ConnectionLimits | None = None,
    *,
    peer_verified: bool = True,
) -> int:
    """Serve one client until `exit` or end of input; returns the exit code.

    `host` is the process serving the connection (`daemon/status`, `daemon/stop`);
    default: a single-client host that stops by ending this connection.
    `peer_verified`: the transport vouches that the peer is an unsandboxed process of
    the user (stdio: the process that started the daemon; the Unix socket: the peer
    rule passed); a WebSocket cannot tell.
    `receive` is a `ThreadedInput` when a reader thread reads the connection: it then
    answers control requests itself (`ThreadAnswers`) and hands the rest to this loop.
    """
    limits = limits if limits is not None else ConnectionLimits()
    session: Session | None = None

    def lagged_frame(conversation_id: str, from_seq: int) -> bytes:
        params = TurnLaggedParams(conversation_id=conversation_id, from_seq=from_seq)
        return encode_frame(Notification(TURN_LAGGED, params).body)

    def stuck() -> None:
        if session is not None:
            session.close(1)

    outbox = Outbox(limits.send_queue, lagged_frame, stuck)
    server = _Server(_JpdProtocol, message_converter)
    protocol = server.protocol
    assert isinstance(protocol, _JpdProtocol)

    calls = _Calls()

    def send_notification(notification: Notification) -> None:
        # Notifications arrive encoded (once for all subscribers): frame them directly
        # rather than through pygls' attrs/cattrs path.
        body = notification.body
        frame = b"".join((b"Content-Length: %d\r\n\r\n" % len(body), body))  # `encode_frame`
        if notification.method is not TURN_EVENT:
            outbox.put(frame)
            return
        if isinstance(notification, TurnEventNote):  # the hub's: no dict built per event
            conversation_id, seq = notification.conversation_id, notification.seq
        else:
            params = notification.wire
            conversation_id, seq = params["conversationId"], params["seq"]
        if not outbox.put_event(conversation_id, seq, frame):
            # Lagging (protocol.md 7.3): stop sending it this conversation, so its
            # questions go to the other clients or the detached policy.
            assert session is not None
            daemon.detach(session, conversation_id)

    async def request(method: str, params: dict[str, Any]) -> Any:
        future = protocol.send_request(method, params)
        calls.track_request(future)
        try:
            return await asyncio.wrap_future(future)
        except JsonRpcException as exc:
            raise errors.from_client(method, exc) from None

    session = Session(send_notification, request)
    session.peer_verified_ = peer_verified
    outbox.label = f"client {session.link_id}"
    session.on_attach = outbox.reattached
    session.host = host if host is not None else SingleClientHost()
    protocol.session = session
    protocol.daemon = daemon
    writer = QueueWriter(outbox, protocol)
    protocol.set_writer(writer, include_headers=False)
    for method, handler in HANDLERS.items():
        protocol.fm.feature(method.name)(_make_handler(daemon, session, calls, method, handler))
    daemon.connected(session)

    if isinstance(receive, ThreadedInput):
        loop = asyncio.get_running_loop()
        if isinstance(receive.answer, ThreadAnswers):  # started before the session
            receive.answer.bind(session)
        else:
            answers = ThreadAnswers(daemon, session, limits.max_nesting, loop, receive.in_order)
            receive.start(limits.max_frame, answers)
        frames = receive.frames()
    else:
        frames = read_frames(receive, limits.max_frame)
    flushed = anyio.Event()
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(_write_loop, outbox, send, session, flushed, limits.stall_timeout)
            tg.start_soon(_read_loop, protocol, frames, writer, session, limits.max_nesting)
            await session.closed.wait()
            await _flush(calls, outbox, flushed)
            tg.cancel_scope.cancel()
    finally:
        if isinstance(receive, ThreadedInput):
            receive.stop()
    outbox.close()
    daemon.disconnected(session)
    calls.fail_all()
    server.shutdown()  # type: ignore[no-untyped-call]
    return session.exit_code


async def _read_loop(
    protocol: _JpdProtocol,
    frames: AsyncIterator[Frame],
    writer: QueueWriter,
    session: Session,
    max_nesting: int,
) -> None:
    out = writer.out
    async for frame in frames:
        if session.closed.is_set():
            return  # closing: the queue no longer takes frames
        if isinstance(frame, Malformed):
            log.warning("malformed frame: %s", frame.reason)
            out.put(_error_frame(None, ParseError(f"parse error: {frame.reason}")))
            continue
        _dispatch(protocol, frame, writer, max_nesting)
        if session.closed.is_set():
            return
        await out.wait_room()
    # End of input without `exit`: the client is gone.
    session.close(session.exit_code if session.closed.is_set() else 1)


def _dispatch(protocol: _JpdProtocol, body: bytes, writer: QueueWriter, max_nesting: int) -> None:
    out = writer.out
    read = read_message(body, max_nesting)
    if isinstance(read, Refused):
        log.warning("refused message: %s", read.message)
        if read.answer:
            out.put(_error_frame(read.msg_id, _REFUSALS[read.code](read.message)))
        return
    data, msg_id, method = read.data, read.msg_id, read.method
    if method == EXIT.name:
        # LSP: whatever its params (and even with an id, which gets its answer first).
        if msg_id is not None:
            answer = {"jsonrpc": "2.0", "id": msg_id, "result": None}
            out.put(encode_frame(json.dumps(answer).encode()))
        session = protocol.session
        session.close(0 if session.shutdown_requested else 1)
        return
    if method is not None and not _admit(protocol.session, data, msg_id, out):
        return
    if method == SHUTDOWN.name and msg_id is not None:
        # In the order received: a request read after it gets -32600 even if its handler
        # has not run yet (a control request is answered in this step).
        protocol.session.shutdown_requested = True
    if msg_id is not None and method is not None:
        writer.requested(method, msg_id)
        if answer_now(protocol.daemon, protocol.session, data, msg_id, out):
            return
    try:
        message = protocol.structure_message(data)
        protocol.handle_message(message)
    except (concurrent.futures.InvalidStateError, asyncio.InvalidStateError):
        # A late answer to a request the daemon stopped waiting for (answered elsewhere,
        # or its turn ended): ignored, as protocol.md section 10.3 says.
        log.debug("ignored a late answer to request %r", msg_id)
    except Exception as exc:  # one bad message (e.g. a late answer) must not end the connection
        if method is None or msg_id is None:
            log.exception("could not handle message %r", method or msg_id)
        else:
            out.put(_error_frame(msg_id, errors.from_handler(method, exc)))


_REFUSALS: dict[int, type[JpdError]] = {
    ParseError.code: ParseError,
    InvalidRequest.code: InvalidRequest,
    MethodNotFound.code: MethodNotFound,
}


def _admit(session: Session, data: dict[str, Any], msg_id: Any, out: Outbox) -> bool:
    """Lifecycle gating: -32002 before `initialize`, -32600 after `shutdown`.

    Decided on the decoded dict: pygls' runtime-checkable message protocols make an
    `isinstance` test cost more than the rest of a small request's handling.
    """
    method = data["method"]
    if "id" in data:
        if session.shutdown_requested:
            error: JpdError = InvalidRequest("server is shut down: only `exit` is accepted")
            out.put(_error_frame(msg_id, error))
            return False
        if not session.initialized and method != INITIALIZE.name:
            error = NotInitialized("server not initialized: send `initialize`")
            out.put(_error_frame(msg_id, error))
            return False
    elif not session.initialized and method not in (EXIT.name, CANCEL_REQUEST.name):
        log.warning("ignoring notification %r before initialize", method)
        return False
    return True


async def _write_loop(
    out: Outbox, send: Send, session: Session, flushed: anyio.Event, stall_timeout: float
) -> None:
    try:
        # Everything already queued goes in one write: one syscall (and, on stdio, one
        # thread hop) per burst instead of one per frame.
        while (data := await out.take()) is not None:
            try:
                with anyio.move_on_after(stall_timeout) as scope:
                    await send(data)
            except (OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
                log.warning("client connection lost while writing")
                session.close(1)
                return
            if scope.cancelled_caught:
                # It reads nothing: drop it, so what it was asked goes to others (7.3).
                log.warning("client stuck: no write progress for %gs; closing it", stall_timeout)
                out.close()
                session.close(1)
                return
    finally:
        flushed.set()


async def _flush(calls: _Calls, out: Outbox, flushed: anyio.Event) -> None:
    """On close, still deliver what is due: answers of handlers that already returned
    (pygls sends them from a done-callback, one loop step later), then everything queued
    (e.g. the `daemon/stop` answer, or `turn_completed` of turns cancelled on stop)."""
    for _ in range(100):
        if not calls.answers_due():
            break
        await anyio.lowlevel.checkpoint()
    out.close()
    with anyio.move_on_after(_FLUSH_TIMEOUT):
        await flushed.wait()
