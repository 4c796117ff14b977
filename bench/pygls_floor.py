"""A bare pygls 2.x `JsonRPCServer` answering `turn/list` on stdio: the floor of the
daemon's per-request CPU (pygls' own dispatch and framing, nothing of jpd)."""

from __future__ import annotations

from typing import Any

from pygls.protocol import JsonRPCProtocol, default_converter
from pygls.server import JsonRPCServer

server = JsonRPCServer(JsonRPCProtocol, default_converter)


@server.feature("turn/list")
def turn_list(params: Any) -> dict[str, Any]:
    return {"turns": [], "inquiries": []}


@server.feature("initialize")
def initialize(params: Any) -> dict[str, Any]:
    return {"serverInfo": {"name": "floor"}}


if __name__ == "__main__":
    server.start_io()
