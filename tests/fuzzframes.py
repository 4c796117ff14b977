"""Hostile-frame fuzzing of the real connection code (protocol.md sections 2 and 3):
a daemon and `serve_connection` run in-process on a background event loop, fed bytes
by hypothesis strategies. Shared by `tests/unit/test_fuzz_frames.py` (about a minute in
the test command) and `bench/bench_fuzz.py` (the long run)."""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import anyio.from_thread
from hypothesis import strategies as st

from jpd.core.daemon import Daemon
from jpd.protocol.method_table import TABLE, ClientNotification, ClientRequest
from jpd.rpc.boundary import serve_connection
from jpd.settings import Settings

INIT = {"protocolVersion": 1, "clientInfo": {"name": "fuzz", "version": "1"}}
# These end or freeze the shared connection; `test_hostile_frames.py` covers them.
ENDING = ("exit", "shutdown", "daemon/stop")
METHODS = {
    name: m for name, m in TABLE.items() if isinstance(m, ClientRequest | ClientNotification)
}
"""What a client may send, per the method table."""
FUZZED_METHODS = [*sorted(set(METHODS) - set(ENDING)), "$/x", "no/such", "turn/event"]
LEAK = re.compile(rb'Traceback|File "|\.py\b|/jpd/')


def frame(message: Any) -> bytes:
    body = json.dumps(message).encode()
    return b"Content-Length: %d\r\n\r\n%s" % (len(body), body)


def home_env(home: Path) -> dict[str, str]:
    """A scripted model that always answers, and tools that never wait for a human."""
    script = home / "script.json"
    script.write_text(json.dumps({"responses": [{"text": "ok"}] * 100_000}))
    config = home / "config.toml"
    config.write_text(
        f'[assistant.model]\nid = "test/scripted"\n[providers.test]\nscript = "{script}"\n'
        "[conversation.tools.'*']\ndetached = \"deny\"\n"
    )
    (home / "data").mkdir(exist_ok=True)
    return {"JP_CONFIG": str(config), "JP_DATA_DIR": str(home / "data")}


class _Wire:
    """Bytes from the daemon, split into decoded messages."""

    def __init__(self) -> None:
        self.buffer = b""
        self.messages: list[dict[str, Any]] = []
        self.raw: list[bytes] = []
        self.changed = anyio.Event()
        self.ended = anyio.Event()
        self.exit_code: int | None = None

    async def send(self, data: bytes) -> None:
        self.buffer += data
        while (end := self.buffer.find(b"\r\n\r\n")) >= 0:
            length = int(self.buffer[:end].split(b":")[1])
            if len(self.buffer) < end + 4 + length:
                break
            body = self.buffer[end + 4 : end + 4 + length]
            self.buffer = self.buffer[end + 4 + length :]
            self.raw.append(body)
            self.messages.append(json.loads(body))
        self.changed.set()
        self.changed = anyio.Event()


class Harness:
    """A daemon on a background loop; `exchange` runs one fuzz case on a connection."""

    def __init__(self, portal: anyio.from_thread.BlockingPortal, daemon: Daemon) -> None:
        self.portal = portal
        self.daemon = daemon
        self.outcomes: Counter[str] = Counter()
        self._shared: tuple[Any, _Wire] | None = None
        self._sentinel = 0

    async def _open(self) -> tuple[Any, _Wire]:
        to_daemon, from_client = anyio.create_memory_object_stream[bytes](1000)
        wire = _Wire()

        async def serve() -> None:
            try:
                wire.exit_code = await serve_connection(self.daemon, receive, wire.send)
            finally:
                wire.ended.set()

        async def receive() -> bytes:
            try:
                return await from_client.receive()
            except anyio.EndOfStream:
                return b""

        self._tg.start_soon(serve)
        await to_daemon.send(
            frame({"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": INIT})
        )
        await self._until(wire, "init")
        return to_daemon, wire

    async def _until(self, wire: _Wire, msg_id: Any, limit: float = 30) -> dict[str, Any]:
        with anyio.fail_after(limit):
            while True:
                for message in wire.messages:
                    if message.get("id") == msg_id and "method" not in message:
                        return message
                await wire.changed.wait()

    async def _structured(self, body: bytes, answer_id: Any) -> list[bytes]:
        if self._shared is None:
            self._shared = await self._open()
        to_daemon, wire = self._shared
        start = len(wire.raw)
        self._sentinel += 1
        sentinel = f"sentinel-{self._sentinel}"
        await to_daemon.send(b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
        await to_daemon.send(frame({"jsonrpc": "2.0", "id": sentinel, "method": "turn/list"}))
        await self._until(wire, sentinel)
        if answer_id is not None:
            answer = await self._until(wire, answer_id)
            self.outcomes[_outcome(answer)] += 1
        else:
            self.outcomes["notification or invalid"] += 1
        return wire.raw[start:]

    async def _bytes(self, data: bytes) -> list[bytes]:
        to_daemon, wire = await self._open()
        start = len(wire.raw)
        await to_daemon.send(data)
        await to_daemon.aclose()  # end of input: the connection must end, not hang
        with anyio.fail_after(30):
            await wire.ended.wait()
        self.outcomes[f"bytes: {min(len(wire.raw) - start, 3)} replies"] += 1
        return wire.raw[start:]

    def structured(self, case: tuple[bytes, Any]) -> list[bytes]:
        """Send one message on the shared connection; returns every reply it caused."""
        return self.portal.call(self._structured, *case)

    def raw_bytes(self, data: bytes) -> list[bytes]:
        """Send arbitrary bytes on a fresh connection, then end its input."""
        return self.portal.call(self._bytes, data)

    def still_serves(self) -> bool:
        """The shared connection, and a new one, still answer a normal request."""

        async def check() -> bool:
            if self._shared is None:
                self._shared = await self._open()
            to_daemon, wire = self._shared
            await to_daemon.send(frame({"jsonrpc": "2.0", "id": "last", "method": "turn/list"}))
            shared = "result" in await self._until(wire, "last")
            fresh_to, fresh = await self._open()
            await fresh_to.send(frame({"jsonrpc": "2.0", "id": "x", "method": "conversation/list"}))
            return shared and "result" in await self._until(fresh, "x")

        return self.portal.call(check)


@contextmanager
def running_harness(home: Path) -> Iterator[Harness]:
    """Start a daemon (data under `home`) on a background event loop."""
    settings = Settings.from_env(home_env(home))
    with anyio.from_thread.start_blocking_portal() as portal:
        ready: list[Harness] = []
        stop = anyio.Event()

        async def serve(task_status: Any = anyio.TASK_STATUS_IGNORED) -> None:
            async with anyio.create_task_group() as tg:
                harness = Harness(portal, Daemon(settings, tg))
                harness._tg = tg
                ready.append(harness)
                task_status.started()
                await stop.wait()
                await harness.daemon.aclose()
                tg.cancel_scope.cancel()

        future, _ = portal.start_task(serve)
        try:
            yield ready[0]
        finally:
            portal.call(stop.set)
            future.result(timeout=60)


def _valid_id(value: object) -> bool:
    return isinstance(value, str | int) and not isinstance(value, bool)


def _outcome(answer: dict[str, Any]) -> str:
    if "error" in answer:
        return f"error {answer['error']['code']}"
    return "result"


# --- strategies -------------------------------------------------------------------------

scalars = (
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20)
)
json_values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4)
    ),
    max_leaves=16,
)
ids = (
    st.integers()
    | st.text(max_size=12)
    | st.floats()
    | st.booleans()
    | st.none()
    | st.lists(st.integers(), max_size=2)
    | st.dictionaries(st.text(max_size=3), st.integers(), max_size=2)
)


def _field_names(method: str) -> list[str]:
    entry = METHODS.get(method)
    if entry is None:
        return ["id", "x"]
    return [f.alias or name for name, f in entry.params.model_fields.items()] or ["x"]


@st.composite
def params_for(draw: st.DrawFn, method: str) -> Any:
    """Mostly objects with the method's own field names (to reach the handlers)."""
    if draw(st.integers(0, 3)) == 0:
        return draw(json_values)
    names = _field_names(method)
    keys = draw(st.lists(st.sampled_from(names) | st.text(max_size=6), max_size=len(names) + 1))
    return {key: draw(json_values) for key in keys}


NESTED = "\u0000nested\u0000"
"""Stands for deeply nested params in a message; spliced in as text when encoded (a
nested Python value would overflow the recursion of `json.dumps` and of reporting)."""


def encode(message: Any, depth: int = 0) -> bytes:
    """The JSON body of a generated message, with `NESTED` replaced by `depth` levels."""
    text = json.dumps(message)
    nested = '{"k": ' * (depth // 2) + "[" * (depth - depth // 2) + "1"
    nested += "]" * (depth - depth // 2) + "}" * (depth // 2)
    return text.replace(json.dumps(NESTED), nested).encode()


@st.composite
def messages(draw: st.DrawFn) -> tuple[bytes, Any]:
    """A structured message (body, and the id it must be answered under, or None): a
    request or notification per method, with odd ids, params and nesting."""
    message = draw(_messages())
    depth = draw(st.integers(50, 3000)) if NESTED in json.dumps(message) else 0
    answer_id = None
    if isinstance(message, dict) and "method" in message and _valid_id(message.get("id")):
        answer_id = message["id"]
    return encode(message, depth), answer_id


@st.composite
def _messages(draw: st.DrawFn) -> Any:
    method = draw(st.sampled_from(FUZZED_METHODS))
    message: dict[str, Any] = {}
    if draw(st.integers(0, 9)):
        message["jsonrpc"] = "2.0"
    else:
        message["jsonrpc"] = draw(scalars)
    message["method"] = method if draw(st.integers(0, 15)) else draw(json_values)
    shape = draw(st.integers(0, 9))
    if shape < 6:
        message["id"] = draw(st.integers(0, 2**31) | st.text(min_size=1, max_size=8))
    elif shape < 8:
        message["id"] = draw(ids)
    if draw(st.integers(0, 9)):
        message["params"] = NESTED if draw(st.integers(0, 20)) == 0 else draw(params_for(method))
    if draw(st.integers(0, 30)) == 0:
        return [message]
    return message


@st.composite
def byte_frames(draw: st.DrawFn) -> bytes:
    """Byte-level input: valid frames cut, mutated, mislabelled, or plain noise."""
    body, _ = draw(messages())
    kind = draw(st.integers(0, 5))
    if kind == 0:
        return draw(st.binary(max_size=300))
    if kind == 1:  # a wrong length, smaller or larger than the body
        length = draw(st.integers(0, 2 * len(body) + 10))
        return b"Content-Length: %d\r\n\r\n%s" % (length, body)
    if kind == 2:  # header noise
        header = draw(
            st.sampled_from(
                [
                    b"content-length:  %d",
                    b"Content-Length:%d\r\nContent-Type: x",
                    b"X: y\r\nContent-Length: %d",
                    b"Content-Length: -%d",
                    b"Content-Length: %d0000000000",
                ]
            )
        )
        return header % len(body) + b"\r\n\r\n" + body
    if kind == 3:  # a byte flipped or cut somewhere
        data = bytearray(b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
        at = draw(st.integers(0, len(data) - 1))
        if draw(st.booleans()):
            data[at] = draw(st.integers(0, 255))
        else:
            del data[at:]
        return bytes(data)
    if kind == 4:  # invalid UTF-8 or JSON inside a valid frame
        junk = draw(st.binary(max_size=100))
        return b"Content-Length: %d\r\n\r\n%s" % (len(junk), junk)
    return b"Content-Length: %d\r\n\r\n%s" % (len(body), body) * draw(st.integers(1, 3))
