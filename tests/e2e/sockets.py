"""Helpers for tests of `jpd --listen`: the daemon as a subprocess, an asyncio client on
its socket, and `jp` runs against it. Every daemon started here is stopped by `Daemons`."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from tests.e2e.harness import INIT_PARAMS, write_script

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 60.0


def socket_env(
    home: Path,
    responses: list[dict[str, Any]] | None = None,
    *,
    idle_timeout: float = 0,
    socket: Path | None = None,
) -> dict[str, str]:
    """Environment for a daemon (and `jp`) with a scripted model, all under `home`."""
    (home / "data").mkdir(exist_ok=True)
    script = write_script(home / "script.json", responses or [{"text": "ok"}] * 20)
    config = home / "config.toml"
    config.write_text(
        '[assistant.model]\nid = "test/scripted"\n'
        f'[providers.test]\nscript = "{script}"\n'
        f"[daemon]\nidle_timeout = {idle_timeout}\n"
    )
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("JPD_COMMAND", "NO_COLOR", "JPD_LOG_LEVEL")
    }
    env.update(
        JP_CONFIG=str(config),
        JP_DATA_DIR=str(home / "data"),
        JP_LOG_DIR=str(home / "logs"),
        JP_SOCKET=str(socket or home / "run" / "jpd.sock"),
        JP_STATE_DIR=str(home / "state"),
        JPD_LOG_LEVEL="INFO",
    )
    return env


def add_config(env: Mapping[str, str], toml: str) -> None:
    """Append raw TOML to the config file of `env` (made by `socket_env`)."""
    config = Path(env["JP_CONFIG"])
    config.write_text(config.read_text() + toml)


def persisted(env: Mapping[str, str], conversation_id: str) -> list[dict[str, Any]]:
    """The events the daemon recorded for a conversation (its JSONL log), in order."""
    path = Path(env["JP_DATA_DIR"]) / "conversations" / conversation_id / "events.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def pid_alive(pid: int) -> bool:
    """True while `pid` runs (a zombie left to a non-reaping init counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, IndexError):
        return False


async def wait_for(predicate: Any, what: str, limit: float = TIMEOUT) -> None:
    """Poll `predicate()` until true; fail naming `what` after `limit` seconds."""
    deadline = time.monotonic() + limit
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)


def run_jp(
    env: Mapping[str, str], *args: str, stdin: str | None = None, timeout: float = TIMEOUT
) -> subprocess.CompletedProcess[str]:
    """Run `jp` (blocking) and return its result."""
    return subprocess.run(
        [sys.executable, "-m", "jpcli", *args],
        cwd=ROOT,
        env=dict(env),
        input=stdin if stdin is not None else "",
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


async def run_jp_async(env: Mapping[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """`run_jp` in a worker thread, so the test's event loop keeps serving clients."""
    return await asyncio.to_thread(run_jp, env, *args)


class Listening:
    """One `jpd --listen` subprocess."""

    def __init__(self, env: Mapping[str, str], process: subprocess.Popen[bytes]) -> None:
        self.env = dict(env)
        self.process = process
        self.socket = Path(env["JP_SOCKET"])

    @property
    def pid_file(self) -> Path:
        return self.socket.with_suffix(".pid")

    async def wait_exit(self, limit: float = TIMEOUT) -> int:
        return await asyncio.to_thread(self.process.wait, limit)

    async def stop(self) -> int:
        """SIGTERM (a clean stop), then kill if it lingers; returns the exit code."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                return await self.wait_exit(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
        return self.process.wait()


class Daemons:
    """Starts daemons for a test and makes sure none is left running afterwards
    (including daemons that `jp` started in the background: found by their pid file)."""

    def __init__(self) -> None:
        self.started: list[Listening] = []
        self.pid_files: list[Path] = []

    def spawn(
        self,
        env: Mapping[str, str],
        *extra: str,
        preexec_fn: Callable[[], object] | None = None,
    ) -> Listening:
        """Start `jpd --listen` without waiting for it."""
        log = Path(env["JP_LOG_DIR"])
        log.mkdir(parents=True, exist_ok=True)
        with open(log / "stderr.txt", "ab") as stderr:
            process = subprocess.Popen(
                [sys.executable, "-m", "jpd", "--listen", *extra],
                cwd=ROOT,
                env=dict(env),
                stdin=subprocess.DEVNULL,
                stdout=stderr,
                stderr=stderr,
                preexec_fn=preexec_fn,
            )
        daemon = Listening(env, process)
        self.started.append(daemon)
        return daemon

    async def start(
        self, env: Mapping[str, str], preexec_fn: Callable[[], object] | None = None
    ) -> Listening:
        """Start `jpd --listen` and wait until its socket accepts connections."""
        daemon = self.spawn(env, preexec_fn=preexec_fn)
        deadline = time.monotonic() + TIMEOUT
        while True:
            assert daemon.process.poll() is None, "jpd --listen exited at start"
            try:
                client = await SocketClient.connect(daemon.socket)
            except (FileNotFoundError, ConnectionRefusedError):
                assert time.monotonic() < deadline, "jpd --listen did not listen in time"
                await asyncio.sleep(0.02)
                continue
            await client.close()
            return daemon

    def watch(self, env: Mapping[str, str]) -> None:
        """Also stop, at the end, a daemon `jp` may start on this environment's socket."""
        self.pid_files.append(Path(env["JP_SOCKET"]).with_suffix(".pid"))

    async def stop_all(self) -> None:
        for daemon in self.started:
            await daemon.stop()
        for pid_file in self.pid_files:
            with contextlib.suppress(FileNotFoundError, ValueError):
                pid = int(pid_file.read_text().strip())
                os.kill(pid, signal.SIGTERM)
                with contextlib.suppress(AssertionError):
                    await wait_for(lambda pid=pid: not pid_alive(pid), "jpd to stop", 30)
                if pid_alive(pid):
                    os.kill(pid, signal.SIGKILL)


class RpcError(Exception):
    def __init__(self, error: dict[str, Any]) -> None:
        super().__init__(error.get("message"))
        self.code = error.get("code")
        self.error = error


class SocketClient:
    """A JSON-RPC client on the daemon's socket; records every `turn/event` it gets."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.events: list[dict[str, Any]] = []
        self.completed: dict[str, dict[str, Any]] = {}  # turnId -> its turn_completed
        self.notifications: list[dict[str, Any]] = []
        # method -> async handler(params) returning a result or raising RpcError.
        self.handlers: dict[str, Any] = {}
        self.closed = asyncio.Event()
        self.reattach_on_lag = False
        """Re-attach from `fromSeq` on `turn/lagged`, as a conforming client does."""
        self._next_id = 1
        self._pending: dict[int, asyncio.Future[Any]] = {}
        self._changed = asyncio.Condition()
        self._task = asyncio.create_task(self._read_loop())

    @classmethod
    async def connect(cls, path: Path) -> SocketClient:
        reader, writer = await asyncio.open_unix_connection(str(path))
        return cls(reader, writer)

    async def request(self, method: str, params: Any = None) -> Any:
        """Send a request; returns its result or raises `RpcError`."""
        request_id = self._next_id
        self._next_id += 1
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = future
        self._send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        return await asyncio.wait_for(future, TIMEOUT)

    def notify(self, method: str, params: Any = None) -> None:
        self._send({"jsonrpc": "2.0", "method": method, "params": params})

    async def initialize(self, **extra: Any) -> Any:
        result = await self.request("initialize", {**INIT_PARAMS, **extra})
        self.notify("initialized", {})
        return result

    async def wait_event(self, turn_id: str, kind: str) -> dict[str, Any]:
        """Wait until an event of `kind` for `turn_id` has arrived; returns its params."""

        def found() -> dict[str, Any] | None:
            return next(
                (e for e in self.events if e["turnId"] == turn_id and e["event"]["kind"] == kind),
                None,
            )

        async with asyncio.timeout(TIMEOUT), self._changed:
            await self._changed.wait_for(lambda: found() is not None)
        event = found()
        assert event is not None
        return event

    async def wait_completed(self, turn_id: str) -> dict[str, Any]:
        """Wait for a turn's `turn_completed` (cheap with many turns in flight)."""
        async with asyncio.timeout(TIMEOUT), self._changed:
            await self._changed.wait_for(lambda: turn_id in self.completed)
        return self.completed[turn_id]

    def turn_events(self, turn_id: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e["turnId"] == turn_id]

    async def close(self) -> None:
        self.writer.close()
        with contextlib.suppress(OSError):
            await self.writer.wait_closed()
        await self._stop_reading()

    async def pause_reading(self) -> None:
        """Stop reading the socket (a stuck client): the daemon's writes back up."""
        await self._stop_reading()

    def resume_reading(self) -> None:
        """Read again after `pause_reading`."""
        self._task = asyncio.create_task(self._read_loop())

    async def wait_notification(self, method: str) -> dict[str, Any]:
        """Wait until a notification `method` (not `turn/event`) arrives; returns it."""

        def found() -> dict[str, Any] | None:
            return next((n for n in self.notifications if n["method"] == method), None)

        async with asyncio.timeout(TIMEOUT), self._changed:
            await self._changed.wait_for(lambda: found() is not None)
        message = found()
        assert message is not None
        return message

    async def _stop_reading(self) -> None:
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task

    def _send(self, message: dict[str, Any]) -> None:
        body = json.dumps(message).encode()
        self.writer.write(b"Content-Length: %d\r\n\r\n%s" % (len(body), body))

    async def _read_loop(self) -> None:
        try:
            while True:
                header = await self.reader.readuntil(b"\r\n\r\n")
                length = int(header.split(b":")[1].split(b"\r\n")[0])
                message = json.loads(await self.reader.readexactly(length))
                await self._route(message)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            self.closed.set()
            for future in self._pending.values():
                if not future.done():
                    future.set_exception(ConnectionError("connection closed"))

    async def _answer(self, message: dict[str, Any]) -> None:
        handler = self.handlers.get(message["method"])
        reply: dict[str, Any] = {"jsonrpc": "2.0", "id": message["id"]}
        try:
            if handler is None:
                raise RpcError({"code": -32601, "message": f"no handler for {message['method']}"})
            reply["result"] = await handler(message["params"])
        except RpcError as exc:
            reply["error"] = exc.error
        if not self.writer.is_closing():
            self._send(reply)

    async def _route(self, message: dict[str, Any]) -> None:
        if "method" in message and "id" in message:
            # Answer server-to-client requests concurrently with reading.
            asyncio.get_running_loop().create_task(self._answer(message))
            return
        if message.get("method") == "turn/lagged" and self.reattach_on_lag:
            params = {k: message["params"][k] for k in ("conversationId", "fromSeq")}
            asyncio.get_running_loop().create_task(self.request("turn/attach", params))
        if "method" in message and message["method"] != "turn/event":
            async with self._changed:
                self.notifications.append(message)
                self._changed.notify_all()
            return
        if message.get("method") == "turn/event":
            async with self._changed:
                self.events.append(message["params"])
                if message["params"]["event"]["kind"] == "turn_completed":
                    self.completed[message["params"]["turnId"]] = message["params"]
                self._changed.notify_all()
            return
        future = self._pending.pop(message.get("id"), None) if "method" not in message else None
        if future is not None and not future.done():
            if "error" in message:
                future.set_exception(RpcError(message["error"]))
            else:
                future.set_result(message.get("result"))
