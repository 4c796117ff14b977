"""Reading one incoming message body: what it is, or why it is refused (protocol.md
section 3). Pure: no pygls, no I/O. Whatever the bytes, `read_message` returns; it never
raises (hostile input included: deep nesting, odd ids, `$/` requests).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

MsgId = str | int


@dataclass(frozen=True)
class Refused:
    """Answer with this error (`msg_id` None: `id: null`), or ignore it if `answer` is
    False (a malformed response to one of our requests: there is nobody to tell)."""

    msg_id: MsgId | None
    code: int
    message: str
    answer: bool = True


@dataclass(frozen=True)
class Message:
    """A well-formed request (`msg_id` set), notification, or response (`method` None)."""

    data: dict[str, Any]
    msg_id: MsgId | None
    method: str | None


def valid_id(value: object) -> bool:
    """Request ids are integers or strings (protocol.md section 3); never bool or float."""
    return isinstance(value, str | int) and not isinstance(value, bool)


def too_deep(value: object, limit: int) -> bool:
    """Whether arrays and objects nest deeper than `limit` (iterative: any depth is safe)."""
    stack: list[tuple[object, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False


def read_message(body: bytes, max_nesting: int) -> Message | Refused:
    """Decode and check one message body."""
    try:
        data = json.loads(body)
    except RecursionError:
        return Refused(None, -32700, f"parse error: nested deeper than {max_nesting} levels")
    except ValueError as exc:
        return Refused(None, -32700, f"parse error: invalid JSON: {exc}")
    if too_deep(data, max_nesting):
        return Refused(None, -32700, f"parse error: nested deeper than {max_nesting} levels")
    if isinstance(data, list):
        return Refused(None, -32600, "invalid request: batches are not supported")
    if not isinstance(data, dict):
        return Refused(None, -32600, "invalid request: not a JSON-RPC 2.0 object")
    has_id = "id" in data
    msg_id = data.get("id")
    if has_id and not valid_id(msg_id):
        # Answering with that id would echo something that is not an id.
        answer = "method" in data
        return Refused(None, -32600, "invalid request: id must be an integer or a string", answer)
    if data.get("jsonrpc") != "2.0":
        return Refused(msg_id, -32600, "invalid request: not a JSON-RPC 2.0 object")
    if "method" not in data:
        if not has_id or ("result" not in data and "error" not in data):
            return Refused(msg_id, -32600, "invalid request: no method")
        return Message(data, msg_id, None)
    method = data["method"]
    if not isinstance(method, str):
        return Refused(msg_id, -32600, "invalid request: method must be a string")
    if has_id and method.startswith("$/"):
        return Refused(
            msg_id, -32601, f"method not found: {method} is a notification (send it without an id)"
        )
    data.setdefault("params", None)
    return Message(data, msg_id if has_id else None, method)
