"""The rpc boundary on in-memory streams: lifecycle gating, param validation, typed error
mapping, server-to-client requests through the client port, cancellation, closing.

No subprocess: `serve_connection` runs in this event loop against a fake daemon core, so
each test exercises exactly the boundary's rules.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest

from jpd.protocol import method_table as mt
from jpd.protocol.errors import (
    ClientError,
    ConnectionLost,
    InvalidClientResult,
    NotFound,
    RequestCancelled,
)
from jpd.protocol.question import BooleanAnswer, Question
from jpd.protocol.server_requests import (
    InquiryPromptParams,
    InquiryPromptResult,
    InquiryResolvedParams,
    SourceWire,
)
from jpd.rpc.boundary import serve_connection
from jpd.rpc.framing import Malformed, encode_frame, read_frames
from jpd.rpc.methods import HANDLERS
from jpd.rpc.session import Session

SECRET_PATH = "/home/someone/.local/share/jp/conversations/c-1/events.jsonl"
INIT = {"protocolVersion": 1, "clientInfo": {"name": "unit"}}


class NoInquiries:
    """The daemon's `inquiries` (jpd.core.inquiries) with none pending."""

    def pending_here(self) -> list[Any]:
        return []

    async def pending(self) -> list[Any]:
        return []

    def close_turn(self, turn_id: str) -> None:
        pass


class FakeDaemon:
    """The parts of the daemon core the boundary and these handlers touch."""

    def __init__(self) -> None:
        self.sessions: list[Session] = []
        self.gone: list[Session] = []
        self.waiting = anyio.Event()
        self.recovered = True
        self.listed = 0
        """How often `turn/list` was answered at once (`listed_turns`)."""
        self.queue = None
        """Not a fleet member: a turn not running here is not running anywhere."""
        self.inquiries: NoInquiries = NoInquiries()

    def connected(self, session: Session) -> None:
        self.sessions.append(session)

    def disconnected(self, session: Session) -> None:
        self.gone.append(session)

    def client_ready(self, session: Session) -> None:
        pass

    async def list_turns(self) -> list[Any]:
        return []

    def listed_turns(self) -> list[Any] | None:
        if not self.recovered:
            return None  # the boundary then takes the usual way: `list_turns`
        self.listed += 1
        return []

    def running_turns(self) -> list[Any]:
        return []

    async def list_conversations(self, params: Any = None) -> list[Any]:
        raise FileNotFoundError(2, "No such file or directory", SECRET_PATH)

    async def get_conversation(self, conversation_id: str) -> list[Any]:
        raise NotFound(f"no conversation {conversation_id}")

    async def wait_turn(self, turn_id: str) -> str:
        self.waiting.set()
        await anyio.sleep_forever()
        raise AssertionError("unreachable")


class Client:
    """A JSON-RPC client on the other end of two in-memory byte streams."""

    def __init__(self, out: Any, frames: AsyncIterator[bytes | Malformed]) -> None:
        self._out = out
        self._frames = frames
        self._next_id = 0
        self.ended = anyio.Event()
        self.exit_code: int | None = None

    async def exit_code_when_ended(self) -> int | None:
        with anyio.fail_after(5):
            await self.ended.wait()
        return self.exit_code

    async def send(self, message: dict[str, Any]) -> None:
        await self._out.send(encode_frame(json.dumps(message).encode()))

    async def send_raw(self, data: bytes) -> None:
        await self._out.send(data)

    async def receive(self) -> dict[str, Any]:
        with anyio.fail_after(10):
            frame = await anext(self._frames)
        assert isinstance(frame, bytes), frame
        message: dict[str, Any] = json.loads(frame)
        return message

    async def call(self, method: str, params: Any = None) -> dict[str, Any]:
        """Send a request and return its whole response (result or error)."""
        self._next_id += 1
        await self.send({"jsonrpc": "2.0", "id": self._next_id, "method": method, "params": params})
        response = await self.receive()
        assert response["id"] == self._next_id, response
        return response

    async def initialize(self, capabilities: dict[str, Any] | None = None) -> None:
        response = await self.call("initialize", {**INIT, "capabilities": capabilities or {}})
        assert "result" in response, response

    async def close(self) -> None:
        await self._out.aclose()


@asynccontextmanager
async def connect(daemon: FakeDaemon | None = None) -> AsyncIterator[tuple[Client, FakeDaemon]]:
    """Serve one in-memory connection; the exit code is checked by the tests that end it."""
    core = daemon or FakeDaemon()
    to_daemon, daemon_in = anyio.create_memory_object_stream[bytes](100)
    daemon_out, from_daemon = anyio.create_memory_object_stream[bytes](100)

    async def receive() -> bytes:
        try:
            return await daemon_in.receive()
        except anyio.EndOfStream:
            return b""

    async def client_receive() -> bytes:
        try:
            return await from_daemon.receive()
        except anyio.EndOfStream:
            return b""

    client = Client(to_daemon, read_frames(client_receive))
    async with anyio.create_task_group() as tg:

        async def serve() -> None:
            client.exit_code = await serve_connection(core, receive, daemon_out.send)  # type: ignore[arg-type]
            client.ended.set()

        tg.start_soon(serve)
        yield client, core
        await client.close()


def _prompt() -> InquiryPromptParams:
    return InquiryPromptParams(
        inquiry_id="c1.q.1",
        conversation_id="c-1",
        turn_id="t-1",
        tool_name="asker",
        source=SourceWire(type="tool", name="asker"),
        question=Question(id="q", text="Proceed?", answer_type=BooleanAnswer()),
    )


# --- the table and the handlers ---------------------------------------------------------


def test_every_client_method_of_the_table_has_one_handler() -> None:
    incoming = {
        m.name for m in mt.TABLE.values() if isinstance(m, mt.ClientRequest | mt.ClientNotification)
    }
    assert {m.name for m in HANDLERS} == incoming - {"$/cancelRequest"}
    assert all(mt.TABLE[m.name] is m for m in HANDLERS)


async def test_initialize_lists_the_handled_methods() -> None:
    async with connect() as (client, _):
        response = await client.call("initialize", INIT)
    assert response["result"]["capabilities"]["methods"] == sorted(m.name for m in HANDLERS)


async def test_turn_list_is_answered_in_the_read_step_or_the_usual_way_during_recovery() -> None:
    async with connect() as (client, core):
        await client.initialize()
        answer = await client.call("turn/list")
        assert answer["result"] == {"turns": [], "inquiries": []} and core.listed == 1
        core.recovered = False  # `listed_turns` cannot answer: the handler does
        assert (await client.call("turn/list"))["result"] == answer["result"]
        assert core.listed == 1
        bad = await client.call("turn/list", {"unexpected": 1})
        assert bad["error"]["code"] == -32602  # params are checked as on the usual way


# --- lifecycle gating -------------------------------------------------------------------


async def test_requests_before_initialize_get_32002_and_the_connection_serves_on() -> None:
    async with connect() as (client, _):
        early = await client.call("turn/list")
        assert early["error"]["code"] == -32002
        assert "initialize" in early["error"]["message"]
        await client.initialize()
        assert "result" in await client.call("turn/list")


async def test_after_shutdown_requests_get_32600_and_exit_ends_with_code_0() -> None:
    async with connect() as (client, _):
        await client.initialize()
        assert (await client.call("shutdown"))["result"] is None
        refused = await client.call("turn/list")
        assert refused["error"]["code"] == -32600
        await client.send({"jsonrpc": "2.0", "method": "exit"})
        code = await client.exit_code_when_ended()
    assert code == 0


async def test_end_of_input_without_exit_ends_with_code_1() -> None:
    async with connect() as (client, core):
        await client.initialize()
        await client.close()
        code = await client.exit_code_when_ended()
    assert code == 1
    assert core.gone == core.sessions


# --- params and errors ------------------------------------------------------------------


async def test_invalid_params_get_32602_naming_the_field_with_details() -> None:
    async with connect() as (client, _):
        await client.initialize()
        response = await client.call("turn/start", {"message": 5, "bogus": True})
    error = response["error"]
    assert error["code"] == -32602
    assert error["message"].startswith("invalid params for turn/start: ")
    assert {tuple(e["loc"]) for e in error["data"]} == {("message",), ("bogus",)}


async def test_a_typed_error_keeps_its_code_and_message() -> None:
    async with connect() as (client, _):
        await client.initialize()
        response = await client.call("conversation/get", {"conversationId": "c-x"})
    assert response["error"] == {"code": NotFound.code, "message": "no conversation c-x"}


async def test_an_unexpected_error_is_32603_without_path_or_traceback() -> None:
    async with connect() as (client, _):
        await client.initialize()
        response = await client.call("conversation/list")
        assert "result" in await client.call("turn/list")  # still serving
    error = response["error"]
    error_id = error["data"]["errorId"]
    assert error == {
        "code": -32603,
        "message": f"internal error in conversation/list: FileNotFoundError "
        f"(error id {error_id}; details in the daemon log)",
        "data": {"errorId": error_id},
    }
    assert "jp/conversations" not in json.dumps(response)


async def test_unknown_method_gets_32601() -> None:
    async with connect() as (client, _):
        await client.initialize()
        response = await client.call("no/such")
    assert response["error"]["code"] == -32601


async def test_bad_frames_and_json_get_32700_and_the_connection_serves_on() -> None:
    async with connect() as (client, _):
        await client.initialize()
        await client.send_raw(encode_frame(b"{not json"))
        parse = await client.receive()
        assert parse["id"] is None and parse["error"]["code"] == -32700
        await client.send_raw(encode_frame(b"[1, 2]"))
        batch = await client.receive()
        assert batch["error"]["code"] == -32600
        assert "result" in await client.call("turn/list")


# --- cancellation -----------------------------------------------------------------------


async def test_cancel_request_answers_32800_and_stops_the_handler() -> None:
    async with connect() as (client, core):
        await client.initialize()
        await client.send(
            {"jsonrpc": "2.0", "id": 99, "method": "turn/wait", "params": {"turnId": "t"}}
        )
        with anyio.fail_after(5):
            await core.waiting.wait()
        await client.send({"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": 99}})
        response = await client.receive()
    assert response["id"] == 99 and response["error"]["code"] == RequestCancelled.code


# --- server-to-client requests through the port -----------------------------------------


async def _ask(client: Client, session: Session, reply: dict[str, Any]) -> Any:
    """Ask `inquiry/prompt` through the port; answer with `reply`; return or raise."""
    outcome: dict[str, Any] = {}

    async def ask() -> None:
        try:
            outcome["result"] = await session.request(mt.INQUIRY_PROMPT, _prompt())
        except Exception as exc:
            outcome["error"] = exc

    async with anyio.create_task_group() as tg:
        tg.start_soon(ask)
        request = await client.receive()
        assert request["method"] == "inquiry/prompt"
        assert request["params"]["question"]["answerType"] == {"type": "boolean"}
        await client.send({"jsonrpc": "2.0", "id": request["id"], **reply})
    if "error" in outcome:
        raise outcome["error"]
    return outcome["result"]


async def test_port_request_returns_the_validated_result_model() -> None:
    async with connect() as (client, core):
        await client.initialize()
        result = await _ask(
            client, core.sessions[0], {"result": {"answer": True, "remember": True}}
        )
    assert result == InquiryPromptResult(answer=True, remember=True)


async def test_port_request_rejects_a_result_that_does_not_fit() -> None:
    async with connect() as (client, core):
        await client.initialize()
        with pytest.raises(InvalidClientResult, match="invalid result for inquiry/prompt: extra"):
            await _ask(client, core.sessions[0], {"result": {"answer": 1, "extra": 2}})


async def test_port_request_maps_client_errors_to_typed_errors() -> None:
    async with connect() as (client, core):
        await client.initialize()
        session = core.sessions[0]
        cancelled = {"error": {"code": -32800, "message": "user pressed Ctrl-C"}}
        with pytest.raises(RequestCancelled, match="Ctrl-C"):
            await _ask(client, session, cancelled)
        failed = {"error": {"code": -32000, "message": "no terminal"}}
        with pytest.raises(ClientError, match="inquiry/prompt with error -32000: no terminal"):
            await _ask(client, session, failed)


async def test_port_request_fails_with_connection_lost_when_the_client_goes() -> None:
    outcome: list[BaseException] = []
    async with connect() as (client, core):
        await client.initialize()
        session = core.sessions[0]

        async def ask() -> None:
            try:
                await session.request(mt.INQUIRY_PROMPT, _prompt())
            except Exception as exc:
                outcome.append(exc)

        async with anyio.create_task_group() as tg:
            tg.start_soon(ask)
            await client.receive()  # the prompt arrived: leave without answering
            await client.close()
    assert len(outcome) == 1 and isinstance(outcome[0], ConnectionLost)


async def test_port_notify_frames_the_params_model() -> None:
    async with connect() as (client, core):
        await client.initialize()
        resolved = InquiryResolvedParams(
            inquiry_id="c1.q.1", conversation_id="c-1", outcome="answered", answered_by="client-1"
        )
        core.sessions[0].notify(mt.INQUIRY_RESOLVED, resolved)
        message = await client.receive()
    assert message == {"jsonrpc": "2.0", "method": "inquiry/resolved", "params": resolved.to_wire()}


# --- closing ----------------------------------------------------------------------------


async def test_daemon_stop_answer_is_delivered_before_the_connection_ends() -> None:
    async with connect() as (client, _):
        await client.initialize()
        response = await client.call("daemon/stop")
        code = await client.exit_code_when_ended()
    assert response["result"] == {"stopping": True, "cancelledTurns": []}
    assert code == 0
