"""A pytest-lsp client around a real `jpd` subprocess, with helpers for turns."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

from lsprotocol.converters import get_converter
from pygls.client import JsonRPCClient
from pytest_lsp import ClientServerConfig

INIT_PARAMS = {"protocolVersion": 1, "clientInfo": {"name": "e2e", "version": "1"}}


def data_files(root: Path) -> dict[Path, bytes]:
    """Every file under `root` and its bytes, read while a daemon may still write there.

    A conversation's `metadata.json` is replaced through a temporary file when the
    conversation goes idle, just after `turn_completed`: a file gone between listing
    and reading makes the whole read start over, until the directory holds still.
    """
    for _ in range(100):
        try:
            return {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}
        except FileNotFoundError:
            time.sleep(0.01)
    raise AssertionError(f"{root} kept changing")


def write_script(path: Path, responses: list[dict[str, Any]]) -> Path:
    """Write a scripted-provider script file."""
    path.write_text(json.dumps({"responses": responses}))
    return path


class Jpd:
    """One running daemon and a test client connected to it on stdio."""

    def __init__(self, client: JsonRPCClient) -> None:
        self.client = client
        self.events: list[dict[str, Any]] = []
        self.prompts: list[dict[str, Any]] = []
        self.permissions: list[dict[str, Any]] = []
        self.resolved: list[dict[str, Any]] = []
        # Tests set these to answer server-to-client requests.
        self.on_prompt: Callable[[dict[str, Any]], Awaitable[Any]] | None = None
        self.on_permission: Callable[[dict[str, Any]], Awaitable[Any]] | None = None
        self._changed = asyncio.Condition()
        self.stderr = bytearray()

    @property
    def process(self) -> asyncio.subprocess.Process:
        server = self.client._server
        assert server is not None
        return server

    async def request(self, method: str, params: Any = None) -> Any:
        """Send a request and await its result (raises JsonRpcException on error)."""
        return await asyncio.wait_for(self.client.protocol.send_request_async(method, params), 60)

    def notify(self, method: str, params: Any = None) -> None:
        self.client.protocol.notify(method, params)

    async def initialize(self, **extra: Any) -> Any:
        result = await self.request("initialize", {**INIT_PARAMS, **extra})
        self.notify("initialized", {})
        return result

    async def _on_event(self, params: dict[str, Any]) -> None:
        async with self._changed:
            self.events.append(params)
            self._changed.notify_all()

    async def wait_event(self, turn_id: str, kind: str, timeout: float = 120) -> dict[str, Any]:
        """Wait until an event of `kind` arrives for `turn_id`; returns its params."""

        def found() -> dict[str, Any] | None:
            for e in self.events:
                if e["turnId"] == turn_id and e["event"]["kind"] == kind:
                    return e
            return None

        async with asyncio.timeout(timeout), self._changed:
            await self._changed.wait_for(lambda: found() is not None)
        result = found()
        assert result is not None
        return result

    async def run_turn(self, message: str, **params: Any) -> tuple[dict[str, Any], list[dict]]:
        """Start a turn, wait for its end; returns (turn/start result, its events)."""
        started = await self.request("turn/start", {"message": message, **params})
        await self.wait_event(started["turnId"], "turn_completed")
        return started, self.turn_events(started["turnId"])

    def turn_events(self, turn_id: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e["turnId"] == turn_id]

    def write_raw(self, data: bytes) -> None:
        stdin = self.process.stdin
        assert stdin is not None
        stdin.write(data)

    async def stop(self) -> int:
        """shutdown + exit if still running; returns the exit code."""
        if self.process.returncode is None:
            try:
                await asyncio.wait_for(self.request("shutdown"), 10)
                self.notify("exit")
            except Exception:  # the test may have broken the connection on purpose
                pass
            try:
                await asyncio.wait_for(self.process.wait(), 20)
            except TimeoutError:
                self.process.kill()
        await self.client.stop()
        return self.process.returncode or 0


async def start_jpd(env: Mapping[str, str]) -> Jpd:
    """Start `python -m jpd` with `env` added to this process's environment."""
    client = JsonRPCClient(converter_factory=get_converter)
    jpd = Jpd(client)

    @client.feature("turn/event")
    async def on_event(params: Any) -> None:
        await jpd._on_event(params)

    @client.feature("inquiry/resolved")
    async def on_resolved(params: Any) -> None:
        jpd.resolved.append(params)

    @client.feature("inquiry/prompt")
    async def on_prompt(params: Any) -> Any:
        jpd.prompts.append(params)
        assert jpd.on_prompt is not None, "unexpected inquiry/prompt"
        return await jpd.on_prompt(params)

    @client.feature("tool/permission")
    async def on_permission(params: Any) -> Any:
        jpd.permissions.append(params)
        assert jpd.on_permission is not None, "unexpected tool/permission"
        return await jpd.on_permission(params)

    config = ClientServerConfig(
        server_command=[sys.executable, "-m", "jpd"],
        client_factory=lambda: client,
        server_env={**os.environ, **env},
    )
    await config.start()

    async def drain_stderr() -> None:
        stream = jpd.process.stderr
        assert stream is not None
        while chunk := await stream.read(65536):
            jpd.stderr.extend(chunk)

    client._async_tasks.append(asyncio.create_task(drain_stderr()))
    return jpd
