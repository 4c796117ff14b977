"""Typed errors <-> JSON-RPC error objects: the one place error codes meet the wire.

The core raises `JpdError` subclasses (jpd/protocol/errors.py); everything else a
handler raises becomes a one-line -32603 naming only the exception type, so no
traceback, path or library message reaches a client (protocol.md, "Errors").
"""

from __future__ import annotations

import json
import logging
import secrets
from typing import Any

from pydantic import ValidationError
from pygls.exceptions import JsonRpcException

from jpd.protocol.errors import (
    ClientError,
    InternalError,
    InvalidParams,
    JpdError,
    RequestCancelled,
)

log = logging.getLogger(__name__)


def error_object(error: JpdError) -> dict[str, Any]:
    """The `error` member of a JSON-RPC response for `error`."""
    body: dict[str, Any] = {"code": error.code, "message": error.message}
    if error.data is not None:
        body["data"] = error.data
    return body


def error_body(msg_id: int | str | None, error: JpdError) -> bytes:
    """A whole JSON-RPC error response (unframed)."""
    return json.dumps({"jsonrpc": "2.0", "id": msg_id, "error": error_object(error)}).encode()


def to_pygls(error: JpdError) -> JsonRpcException:
    """The exception pygls turns into this error response."""
    return JsonRpcException(code=error.code, message=error.message, data=error.data)


def invalid_params(method: str, exc: ValidationError) -> InvalidParams:
    """-32602 naming the first offending field; every pydantic error goes in `data`."""
    errors = json.loads(exc.json(include_url=False, include_input=False))
    first = errors[0] if errors else {}
    where = ".".join(str(p) for p in first.get("loc", ())) or "params"
    return InvalidParams(
        f"invalid params for {method}: {where}: {first.get('msg', 'invalid')}", data=errors
    )


def from_handler(method: str, exc: Exception) -> JpdError:
    """What a client sees of an exception a handler raised: typed errors as they are;
    anything else as -32603 with an error id, under which the traceback is logged
    (protocol.md section 3)."""
    if isinstance(exc, JpdError):
        return exc
    error_id = secrets.token_hex(4)
    log.error("internal error in %s (error id %s)", method, error_id, exc_info=exc)
    return InternalError(
        f"internal error in {method}: {type(exc).__name__} "
        f"(error id {error_id}; details in the daemon log)",
        data={"errorId": error_id},
    )


def from_client(method: str, exc: JsonRpcException) -> JpdError:
    """A client's error answer to a server-to-client request, as the core sees it."""
    if exc.code == RequestCancelled.code:
        return RequestCancelled(exc.message)
    return ClientError(f"client answered {method} with error {exc.code}: {exc.message}")
