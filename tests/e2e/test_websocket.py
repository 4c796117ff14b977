"""`jpd --listen --listen-ws ws://127.0.0.1:PORT` (jpd.rpc.websocket): the protocol on a
WebSocket, and every refusal that keeps it no weaker than the 0600 Unix socket: no token,
a wrong token, any Origin, a foreign Host, a non-loopback address without a token file,
a token file others can read."""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

from websockets.asyncio.client import connect

from tests.e2e.sockets import ROOT, Daemons, Listening, socket_env, wait_for


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def start_ws(
    daemons: Daemons, env: dict[str, str], *extra: str, host: str = "127.0.0.1"
) -> tuple[Listening, int]:
    port = free_port()
    daemon = daemons.spawn(env, "--listen-ws", f"ws://{host}:{port}", *extra)

    def up() -> bool:
        assert daemon.process.poll() is None, "jpd exited at start"
        with socket.socket() as s:
            return s.connect_ex(("127.0.0.1", port)) == 0

    await wait_for(up, "the WebSocket to listen")
    return daemon, port


async def upgrade_status(port: int, headers: dict[str, str]) -> str:
    """The status line the daemon answers a raw upgrade request with."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    lines = [
        "GET / HTTP/1.1",
        "Upgrade: websocket",
        "Connection: Upgrade",
        "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==",
        "Sec-WebSocket-Version: 13",
        *(f"{k}: {v}" for k, v in headers.items()),
    ]
    writer.write(("\r\n".join(lines) + "\r\n\r\n").encode())
    status = (await reader.readline()).decode().strip()
    writer.close()
    return status


async def rpc(
    ws: Any, request_id: int, method: str, params: Any, seen: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    """Send a request and return its response; what comes before it goes to `seen`."""
    await ws.send(
        json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
    )
    while True:
        message = json.loads(await ws.recv())
        if message.get("id") == request_id:
            return message
        if seen is not None:
            seen.append(message)


async def test_a_client_with_the_token_runs_a_turn(tmp_path: Path, daemons: Daemons) -> None:
    env = socket_env(tmp_path)
    daemon, port = await start_ws(daemons, env)
    token_file = Path(env["JP_SOCKET"]).with_suffix(".ws-token")
    assert token_file.stat().st_mode & 0o777 == 0o600  # generated, for this user only
    token = token_file.read_text().strip()
    headers = {"Authorization": f"Bearer {token}"}
    async with connect(f"ws://127.0.0.1:{port}/", additional_headers=headers) as ws:
        init = await rpc(ws, 1, "initialize", {"protocolVersion": 1, "clientInfo": {"name": "t"}})
        assert init["result"]["serverInfo"]["name"] == "jpd"
        notes: list[dict[str, Any]] = []
        started = (await rpc(ws, 2, "turn/start", {"message": "hi"}, notes))["result"]
        kinds = [n["params"]["event"]["kind"] for n in notes if n.get("method") == "turn/event"]
        while "turn_completed" not in kinds:
            note = json.loads(await ws.recv())
            if note.get("method") == "turn/event":
                kinds.append(note["params"]["event"]["kind"])
        assert kinds[0] == "turn_started"
        # A bad message gets a JSON-RPC error and the connection keeps serving.
        await ws.send("{not json")
        assert json.loads(await ws.recv())["error"]["code"] == -32700
        listed = await rpc(ws, 3, "conversation/list", {})
        assert started["conversationId"] in json.dumps(listed["result"])
    assert await daemon.stop() == 0
    assert not token_file.exists()  # a generated token dies with its daemon


async def test_every_unsafe_upgrade_is_refused(tmp_path: Path, daemons: Daemons) -> None:
    env = socket_env(tmp_path)
    daemon, port = await start_ws(daemons, env)
    token = Path(env["JP_SOCKET"]).with_suffix(".ws-token").read_text().strip()
    good = {"Host": f"127.0.0.1:{port}", "Authorization": f"Bearer {token}"}
    assert (await upgrade_status(port, good)).startswith("HTTP/1.1 101")
    refused = {
        "no token": ({"Host": f"127.0.0.1:{port}"}, "401"),
        "wrong token": (good | {"Authorization": "Bearer " + "x" * len(token)}, "401"),
        "another scheme": (good | {"Authorization": f"Basic {token}"}, "401"),
        "a browser page": (good | {"Origin": f"http://127.0.0.1:{port}"}, "403"),
        "a null origin": (good | {"Origin": "null"}, "403"),
        "DNS rebinding": (good | {"Host": f"evil.example:{port}"}, "403"),
    }
    for what, (headers, code) in refused.items():
        status = await upgrade_status(port, headers)
        assert status.startswith(f"HTTP/1.1 {code}"), (what, status)
    assert daemon.process.poll() is None  # refusals never hurt the daemon
    assert await daemon.stop() == 0


def run_jpd(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "jpd", "--listen", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_unsafe_configurations_do_not_start(tmp_path: Path) -> None:
    env = socket_env(tmp_path)
    port = free_port()
    wide = run_jpd(env, "--listen-ws", f"ws://0.0.0.0:{port}")
    assert wide.returncode == 1
    assert "refusing to listen on 0.0.0.0 without --ws-token-file" in wide.stderr
    readable = tmp_path / "token"
    readable.write_text("t" * 40)
    readable.chmod(0o644)
    shared = run_jpd(env, "--listen-ws", f"ws://0.0.0.0:{port}", "--ws-token-file", str(readable))
    assert shared.returncode == 1 and "others could read it" in shared.stderr
    readable.write_text("short")
    readable.chmod(0o600)
    short = run_jpd(env, "--listen-ws", f"ws://127.0.0.1:{port}", "--ws-token-file", str(readable))
    assert short.returncode == 1 and "under 32 chars" in short.stderr
    for url in ("http://127.0.0.1:1", "ws://127.0.0.1", "ws://127.0.0.1:1/x?y=1"):
        bad = run_jpd(env, "--listen-ws", url)
        assert bad.returncode == 1 and "expected ws://HOST:PORT" in bad.stderr, url


async def test_a_token_file_allows_another_address(tmp_path: Path, daemons: Daemons) -> None:
    env = socket_env(tmp_path)
    token_file = tmp_path / "token"
    token_file.write_text("k" * 48 + "\n")
    token_file.chmod(0o600)
    daemon, port = await start_ws(daemons, env, "--ws-token-file", str(token_file), host="0.0.0.0")
    # Not loopback-only any more: no Host check, but the token still is required.
    ok = {"Host": f"devbox.internal:{port}", "Authorization": "Bearer " + "k" * 48}
    assert (await upgrade_status(port, ok)).startswith("HTTP/1.1 101")
    assert (await upgrade_status(port, {"Host": "devbox.internal"})).startswith("HTTP/1.1 401")
    assert not Path(env["JP_SOCKET"]).with_suffix(".ws-token").exists()
    assert await daemon.stop() == 0


async def test_on_loopback_a_token_file_keeps_the_host_check(
    tmp_path: Path, daemons: Daemons
) -> None:
    env = socket_env(tmp_path)
    token_file = tmp_path / "token"
    token_file.write_text("k" * 48)
    token_file.chmod(0o600)
    daemon, port = await start_ws(daemons, env, "--ws-token-file", str(token_file))
    auth = {"Authorization": "Bearer " + "k" * 48}
    assert (await upgrade_status(port, auth | {"Host": f"localhost:{port}"})).startswith(
        "HTTP/1.1 101"
    )
    rebound = await upgrade_status(port, auth | {"Host": f"evil.example:{port}"})
    assert rebound.startswith("HTTP/1.1 403")
    assert await daemon.stop() == 0


async def test_a_client_vanishing_mid_turn_leaves_the_daemon_and_turn_running(
    tmp_path: Path, daemons: Daemons
) -> None:
    env = socket_env(tmp_path, [{"text": "tick " * 100, "chunk": 5, "delay_ms": 20}])
    daemon, port = await start_ws(daemons, env)
    token = Path(env["JP_SOCKET"]).with_suffix(".ws-token").read_text().strip()
    headers = {"Authorization": f"Bearer {token}"}
    init = {"protocolVersion": 1, "clientInfo": {"name": "t"}}
    async with connect(f"ws://127.0.0.1:{port}/", additional_headers=headers) as ws:
        await rpc(ws, 1, "initialize", init)
        started = (await rpc(ws, 2, "turn/start", {"message": "hi"}))["result"]
        await ws.recv()  # streaming: now hang up in the middle
    async with connect(f"ws://127.0.0.1:{port}/", additional_headers=headers) as ws:
        await rpc(ws, 1, "initialize", init)
        waited = await rpc(ws, 2, "turn/wait", {"turnId": started["turnId"]})
        assert waited["result"]["stopReason"] == "end_turn"
    assert daemon.process.poll() is None
    assert await daemon.stop() == 0
    log = (Path(env["JP_LOG_DIR"]) / "jpd.log").read_text()
    assert "connection failed" not in log and "Traceback" not in log
