"""The pygls private hook `jpd/rpc/pygls_private.py` relies on still exists and is used,
and no other module of `jpd` touches a private pygls member.

If a pygls upgrade renames `_send_response`, changes its parameters, or stops sending
handler results through it, these tests fail and name what changed.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import re
from pathlib import Path
from typing import Any

from lsprotocol.converters import get_converter
from lsprotocol.types import Position
from pygls.protocol import JsonRPCProtocol
from pygls.server import JsonRPCServer

from jpd.rpc.pygls_private import EncodedResult, EncodedResultProtocol

JPD = Path(__file__).resolve().parents[2] / "jpd"


class _Collect:
    def __init__(self) -> None:
        self.sent: list[bytes] = []

    def write(self, data: bytes) -> None:
        self.sent.append(data)

    def close(self) -> None:
        pass


def test_send_response_keeps_its_name_and_parameters() -> None:
    hook = getattr(JsonRPCProtocol, "_send_response", None)
    assert hook is not None, "pygls no longer has JsonRPCProtocol._send_response"
    params = list(inspect.signature(hook).parameters)
    assert params == ["self", "msg_id", "result", "error"], params


class _Server(JsonRPCServer):
    def __init__(self, errors: list[Exception]) -> None:
        super().__init__(EncodedResultProtocol, get_converter)
        self.errors = errors

    def report_server_error(self, error: Exception, source: Any) -> None:
        self.errors.append(error)


async def _answer(result: Any, errors: list[Exception] | None = None) -> list[dict[str, Any]]:
    server = _Server([] if errors is None else errors)
    protocol = server.protocol
    writer = _Collect()
    protocol.set_writer(writer, include_headers=False)

    @protocol.fm.feature("x/get")
    async def handler(params: Any) -> Any:
        return result

    message = protocol.structure_message(
        {"jsonrpc": "2.0", "id": 7, "method": "x/get", "params": None}
    )
    protocol.handle_message(message)
    for _ in range(20):  # pygls answers from the handler task's done-callback
        await asyncio.sleep(0)
        if writer.sent:
            break
    server.shutdown()  # type: ignore[no-untyped-call]
    return [json.loads(data) for data in writer.sent]


async def test_an_encoded_result_is_sent_verbatim_through_the_hook() -> None:
    encoded = EncodedResult(b'{"events": [{"type": "turn_start"}], "n": 1}')
    sent = await _answer(encoded)
    assert sent == [
        {"jsonrpc": "2.0", "id": 7, "result": {"events": [{"type": "turn_start"}], "n": 1}}
    ]


async def test_other_results_are_sent_as_pygls_sends_them() -> None:
    for result in ({"plain": True, "n": [1, "é"]}, None, [], "text", 3):
        sent = await _answer(result)
        assert sent == [{"jsonrpc": "2.0", "id": 7, "result": result}]
    # An attrs value inside a result is unstructured as pygls does it.
    position = Position(line=1, character=2)
    assert await _answer({"at": position}) == [
        {"jsonrpc": "2.0", "id": 7, "result": {"at": {"line": 1, "character": 2}}}
    ]


async def test_a_result_json_cannot_encode_is_reported_by_pygls() -> None:
    server_errors: list[Exception] = []
    sent = await _answer({"bad": object()}, server_errors)
    assert sent == []
    assert len(server_errors) == 1


def test_no_other_module_touches_a_private_pygls_member() -> None:
    server = JsonRPCServer(JsonRPCProtocol, get_converter)
    names = {*dir(server), *vars(server), *dir(server.protocol), *vars(server.protocol)}
    server.shutdown()  # type: ignore[no-untyped-call]
    private = {name for name in names if name.startswith("_") and not name.startswith("__")}
    assert {"_send_response", "_request_futures"} <= private
    pattern = re.compile(r"(?:\.|def )(" + "|".join(sorted(private)) + r")\b")
    allowed = JPD / "rpc" / "pygls_private.py"
    # Only jpd.rpc may import pygls (the import-linter contracts in pyproject.toml), and
    # only its modules that do can hold pygls objects; the others may use such names freely.
    users = [
        path
        for path in sorted((JPD / "rpc").rglob("*.py"))
        if path != allowed and "from pygls" in path.read_text(encoding="utf-8")
    ]
    assert any(path.name == "boundary.py" for path in users)
    found = [
        f"{path.relative_to(JPD.parent)}:{number}: {line.strip()}"
        for path in users
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if pattern.search(line)
    ]
    assert not found, "private pygls members outside jpd/rpc/pygls_private.py:\n" + "\n".join(found)
