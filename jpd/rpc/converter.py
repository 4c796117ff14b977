"""The cattrs converter pygls reads and writes JSON-RPC envelopes with.

pygls structures each incoming message into an attrs envelope (request, notification,
response, error, `$/cancelRequest`) and unstructures the envelopes it sends. The daemon
validates params and results itself with pydantic, so the envelopes' `params` and
`result` stay plain JSON values. lsprotocol's `get_converter` would do that too, but it
registers hooks for every LSP type, which costs each start-up tens of milliseconds for
types the daemon never sees; pygls' default converter turns params into namedtuples.
This one knows only what the envelopes hold. `tests/unit/test_rpc_converter.py` checks
it reads and writes every envelope as lsprotocol's converter does.
"""

from __future__ import annotations

import functools
from typing import Any

import cattrs
from lsprotocol.types import LSPAny, ResponseError


def _as_is(value: Any, _type: Any) -> Any:
    return value


def _error(error: ResponseError) -> dict[str, Any]:
    # "Absent, not null" (protocol.md 1): an error without data has no `data` member.
    body: dict[str, Any] = {"code": error.code, "message": error.message}
    if error.data is not None:
        body["data"] = error.data
    return body


@functools.cache
def message_converter() -> cattrs.Converter:
    """The converter for JSON-RPC envelopes (made once per process)."""
    converter = cattrs.Converter()
    # Ids are an int or a string as sent; error data is any JSON value.
    converter.register_structure_hook(int | str, _as_is)
    converter.register_structure_hook(int | str | None, _as_is)
    converter.register_structure_hook(LSPAny, _as_is)
    converter.register_unstructure_hook(ResponseError, _error)
    return converter
