"""Answers before events: which answers a connection writes ahead of the notifications
queued for its client, and the control requests answered in the step that reads them
(protocol.md section 3). While a thousand turns stream, a `turn/list` answered the usual
way (a task, then pygls' answer one step later, then behind the queued deltas) waits
several rounds of a crowded event loop; answered here it waits for none of them.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import ValidationError

from jpd.core.daemon import Daemon
from jpd.protocol.method_table import TURN_ATTACH, TURN_DETACH
from jpd.rpc import errors
from jpd.rpc.framing import encode_frame
from jpd.rpc.methods import INSTANT
from jpd.rpc.outbox import Outbox
from jpd.rpc.pygls_private import EncodedResultProtocol
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


def answer_now(
    daemon: Daemon, session: Session, data: dict[str, Any], msg_id: Any, out: Outbox
) -> bool:
    """Answer a control request (`methods.INSTANT`) in this step of the read loop, ahead
    of queued events; False if it must take the usual way (a task, then pygls' answer):
    invalid params (answered -32602 there) or an answer that needs a wait."""
    entry = _INSTANT.get(str(data.get("method")))
    if entry is None:
        return False
    method, handler = entry
    params = data.get("params")
    try:
        model = method.params.model_validate({} if params is None else params)
    except ValidationError:
        return False
    try:
        result = handler(daemon, session, model)
    except Exception as exc:  # typed errors keep their code, as in `_make_handler`
        out.put_answer(
            encode_frame(errors.error_body(msg_id, errors.from_handler(method.name, exc)))
        )
        return True
    if result is None:
        return False
    answer = {"jsonrpc": "2.0", "id": msg_id, "result": result.to_wire()}
    out.put_answer(encode_frame(json.dumps(answer).encode()))
    return True
