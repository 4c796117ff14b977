"""The daemon's JSON-RPC envelope converter reads and writes every envelope exactly as
lsprotocol's converter (the one pygls documents) does, at a fraction of its set-up."""

from __future__ import annotations

from typing import Any

import pytest
from lsprotocol.converters import get_converter
from lsprotocol.types import CancelNotification, ResponseError, ResponseErrorMessage
from pygls.protocol.json_rpc import (
    JsonRPCNotification,
    JsonRPCRequestMessage,
    JsonRPCResponseMessage,
)

from jpd.rpc.converter import message_converter

INCOMING: list[tuple[dict[str, Any], type]] = [
    ({"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": 3}}, CancelNotification),
    ({"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": "a"}}, CancelNotification),
    (
        {"jsonrpc": "2.0", "id": 1, "method": "turn/start", "params": {"a": [1, {"b": None}]}},
        JsonRPCRequestMessage,
    ),
    ({"jsonrpc": "2.0", "id": "r", "method": "x", "params": None}, JsonRPCRequestMessage),
    ({"jsonrpc": "2.0", "method": "initialized", "params": {}}, JsonRPCNotification),
    ({"jsonrpc": "2.0", "id": "u", "result": {"x": None}}, JsonRPCResponseMessage),
    ({"jsonrpc": "2.0", "id": 7, "result": None}, JsonRPCResponseMessage),
    ({"jsonrpc": "2.0", "id": "u", "error": {"code": -1, "message": "m"}}, ResponseErrorMessage),
    (
        {"jsonrpc": "2.0", "id": 2, "error": {"code": -2, "message": "m", "data": {"k": [1]}}},
        ResponseErrorMessage,
    ),
]


@pytest.mark.parametrize(("message", "kind"), INCOMING)
def test_reads_and_writes_envelopes_as_lsprotocol_does(message: dict[str, Any], kind: type) -> None:
    ours, theirs = message_converter(), get_converter()
    read = ours.structure(message, kind)
    assert read == theirs.structure(message, kind)
    assert ours.unstructure(read) == theirs.unstructure(read)


def test_an_error_without_data_has_no_data_member() -> None:
    """protocol.md 1: absent, not null."""
    sent = message_converter().unstructure(
        ResponseErrorMessage(id=4, error=ResponseError(code=-32603, message="boom"))
    )
    assert sent == {"id": 4, "jsonrpc": "2.0", "error": {"code": -32603, "message": "boom"}}


def test_made_once_per_process() -> None:
    assert message_converter() is message_converter()
