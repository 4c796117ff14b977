"""Answers before events: which answers a connection writes ahead of the notifications
queued for its client, and the control requests answered in the step that reads them
(protocol.md section 3). While a thousand turns stream, a `turn/list` answered the usual
way (a task, then pygls' answer one step later, then behind the queued deltas) waits
several rounds of a crowded event loop; answered here it waits for none of them.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

from pydantic import ValidationError

from jpd.core.daemon import Daemon
from jpd.protocol.errors import JpdError, NotFound
from jpd.protocol.initialize import InitializeParams
from jpd.protocol.method_table import (
    EXIT,
    INITIALIZE,
    INQUIRY_ANSWER,
    SHUTDOWN,
    TURN_ATTACH,
    TURN_DETACH,
)
from jpd.protocol.server_requests import InquiryAnswerResult
from jpd.rpc import errors
from jpd.rpc.framing import encode_frame
from jpd.rpc.handler_types import OnLoop
from jpd.rpc.inbound import Message, read_message
from jpd.rpc.methods import INSTANT, initialize_now
from jpd.rpc.outbox import Outbox
from jpd.rpc.pygls_private import EncodedResult, EncodedResultProtocol
from jpd.rpc.session import Session

# Their answers come after the events they replay or stop (protocol.md 5.8, 5.9): they
# keep their place in the queue; every other answer goes ahead of queued notifications.
_IN_ORDER = frozenset({TURN_ATTACH.name, TURN_DETACH.name})


class QueueWriter:
    """pygls writes message bodies here; we frame them (only `Content-Length`, as
    protocol.md section 2 says: pygls would add a `Content-Type` header) and queue them
    for the writer task, so sends never block. Answers are queued ahead of
    notifications (`Outbox.put_answer`), except those of `in_order` requests."""

    def __init__(self, out: Outbox, protocol: EncodedResultProtocol) -> None:
        self.out = out
        self._protocol = protocol
        self.in_order: set[Any] = set()
        """Ids of requests in flight whose answers keep their place in the queue."""

    def requested(self, method: str | None, msg_id: Any) -> None:
        """A request came in (its answer is written later)."""
        if method in _IN_ORDER:
            self.in_order.add(msg_id)

    def write(self, data: bytes) -> None:
        answering = self._protocol.answering
        if answering is None or answering in self.in_order:
            self.in_order.discard(answering)
            self.out.put(encode_frame(data))
        else:
            self.out.put_answer(encode_frame(data))

    def close(self) -> None:
        self.out.close()


_INSTANT = {method.name: (method, handler) for method, handler in INSTANT.items()}
_MARKERS = tuple(
    b'"%s"' % name.encode()
    for name in (*_INSTANT, INITIALIZE.name, INQUIRY_ANSWER.name, SHUTDOWN.name, EXIT.name)
)
"""A body naming none of these is no control request and changes no lifecycle."""


def instant_frame(
    daemon: Daemon,
    session: Session,
    data: dict[str, Any],
    msg_id: Any,
    on_loop: OnLoop,
    *,
    in_thread: bool = False,
) -> bytes | None:
    """The answer to a control request (`methods.INSTANT`) made at once, or None if it
    must take the usual way (a task, then pygls' answer): invalid params (answered -32602
    there), an answer that needs a wait, or (`in_thread`) any error."""
    entry = _INSTANT.get(str(data.get("method")))
    if entry is None:
        return None
    method, handler = entry
    params = data.get("params")
    try:
        model = method.params.model_validate({} if params is None else params)
    except ValidationError:
        return None
    try:
        result = handler(daemon, session, model, on_loop)
    except Exception as exc:  # typed errors keep their code, as in `_make_handler`
        if in_thread:
            return None
        return encode_frame(errors.error_body(msg_id, errors.from_handler(method.name, exc)))
    if result is None:
        return None
    if isinstance(result, EncodedResult):
        head = b'{"jsonrpc": "2.0", "id": %s, "result": ' % json.dumps(msg_id).encode()
        return encode_frame(b"".join((head, result.json, b"}")))
    answer = {"jsonrpc": "2.0", "id": msg_id, "result": result.to_wire()}
    return encode_frame(json.dumps(answer).encode())


def answer_now(
    daemon: Daemon, session: Session, data: dict[str, Any], msg_id: Any, out: Outbox
) -> bool:
    """Answer a control request in this step of the read loop, ahead of queued events;
    False if it must take the usual way."""
    frame = instant_frame(daemon, session, data, msg_id, _call_now)
    if frame is None:
        return False
    out.put_answer(frame)
    return True


def _call_now(action: Callable[[], object]) -> None:
    action()


class ThreadAnswers:
    """The control requests a connection's reader thread answers as it reads them
    (`jpd.rpc.lane`), before anything the loop has yet to handle. Each sees the effects
    of every request whose answer was already sent (protocol.md section 3): the loop
    answers a request only after handling it. Once a `shutdown` or `exit` went to the
    loop, everything does (their effects come first).

    The connection's first message, if it is `initialize`, is answered here too (its
    result is static): the session's state changes on the loop (`in_order`) before any
    message read after it is handled there, and nothing read before it is pending.

    `inquiry/answer` is checked and claims its question here (`PendingQuestions.claim`:
    no other answer, timeout or cancel wins it after); the loop then tells every client
    and wakes the turn (`call_soon_threadsafe`), ahead of the frames read before it. In
    a fleet, an id not pending here goes to the loop (it looks on the store's board)."""

    def __init__(
        self,
        daemon: Daemon,
        session: Session | None,
        max_nesting: int,
        loop: asyncio.AbstractEventLoop,
        in_order: OnLoop | None = None,
    ) -> None:
        self._daemon = daemon
        self._session = session
        self._max_nesting = max_nesting
        self._loop = loop
        self._in_order = in_order
        self._lifecycle = False
        self._handed = False
        """A message went to the loop: an `initialize` after it is the loop's too."""
        self._initialized = False
        """This thread answered `initialize` (the loop applies it in order)."""

    def bind(self, session: Session) -> None:
        """On the loop: the connection's session exists now (a socket client's reader
        thread may start before it, to answer its `initialize` at once)."""
        self._session = session

    def __call__(self, body: bytes) -> bytes | None:
        """In the reader thread: the answer to `body`, or None to hand it to the loop."""
        frame = self._answer(body)
        if frame is None:
            self._handed = True
        return frame

    def _answer(self, body: bytes) -> bytes | None:
        if self._lifecycle or not any(marker in body for marker in _MARKERS):
            return None
        read = read_message(body, self._max_nesting)
        if not isinstance(read, Message) or read.method is None:
            return None  # refused the same way on the loop
        if read.method in (SHUTDOWN.name, EXIT.name):
            self._lifecycle = True
            return None
        session = self._session
        if read.method == INITIALIZE.name:
            if read.msg_id is None or (session is not None and session.shutdown_requested):
                return None
            return self._initialize(read.data, read.msg_id)
        if session is None:
            return None  # before the session exists only a first `initialize` is answered
        if read.msg_id is None or session.shutdown_requested or session.closed.is_set():
            return None  # the loop gates it (-32600) or ignores it
        if not (session.initialized or self._initialized):
            return None  # -32002 from the loop
        if read.method == INQUIRY_ANSWER.name:
            return self._inquiry_answer(session, read.data, read.msg_id)
        return instant_frame(
            self._daemon, session, read.data, read.msg_id, self._on_loop, in_thread=True
        )

    def _initialize(self, data: dict[str, Any], msg_id: Any) -> bytes | None:
        if self._handed or self._in_order is None:
            return None
        if self._session is not None and self._session.initialized:
            return None
        params = data.get("params")
        try:
            model = InitializeParams.model_validate({} if params is None else params)
            result = initialize_now(self._daemon, model, self._with_session)
        except Exception:  # invalid params, another data dir: the loop answers the error
            return None
        self._initialized = True
        answer = {"jsonrpc": "2.0", "id": msg_id, "result": result.to_wire()}
        return encode_frame(json.dumps(answer).encode())

    def _with_session(self, action: Callable[[Session], None]) -> None:
        """Run `action` on the loop in the order of the frames, with the session (which
        exists by then: the loop handles frames only once it is bound)."""
        assert self._in_order is not None

        def run() -> None:
            assert self._session is not None
            action(self._session)

        self._in_order(run)

    def _inquiry_answer(self, session: Session, data: dict[str, Any], msg_id: Any) -> bytes | None:
        params = data.get("params")
        try:
            model = INQUIRY_ANSWER.params.model_validate({} if params is None else params)
        except ValidationError:
            return None  # -32602 from the loop
        try:
            settle = self._daemon.inquiries.claim_here(
                session,
                model.inquiry_id,
                model.answer,
                model.remember,
                model.conversation_id,
                model.turn_id,
            )
        except JpdError as exc:  # -32001 gone, -32602 does not fit or is ambiguous
            if isinstance(exc, NotFound) and self._daemon.shared is not None:
                return None  # maybe pending on another member: the loop asks the store
            return encode_frame(errors.error_body(msg_id, exc))
        # Claimed: no other answer, timeout or cancel can win it now; the loop tells
        # every client and wakes the turn.
        self._loop.call_soon_threadsafe(settle)
        body = {
            "jsonrpc": "2.0",
            "id": msg_id,
            "result": InquiryAnswerResult(accepted=True).to_wire(),
        }
        return encode_frame(json.dumps(body).encode())

    def _on_loop(self, action: Callable[[], object]) -> None:
        self._loop.call_soon_threadsafe(action)
