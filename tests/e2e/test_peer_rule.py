"""The peer rule through a real `jpd --listen` (protocol.md 2.1): what a tool process
(or anything it started) sends to the daemon's own socket is refused, whatever the
sandbox; the user's `jp` keeps working; a client the daemon cannot vouch for cannot
pick a config with the sandbox off through `environment.env`."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.sockets import (
    Daemons,
    RpcError,
    SocketClient,
    add_config,
    run_jp_async,
    socket_env,
    wait_for,
)

UNATTENDED = '[conversation.tools.run_command]\nrun = "unattended"\n'
SANDBOX_OFF = '[conversation.tools.run_command.options]\nsandbox = "off"\nnetwork = true\n'

# What a hostile command runs: connect to jpd's socket, send `initialize`, then (if
# served) `tool/call run_command` writing a file outside the workspace; print what came back.
ATTACKER = r"""
import json, os, socket, sys, time
path, out, trigger, target = sys.argv[1:5]
if sys.argv[5:] in (["detach"], ["setsid"]):
    # Leave the command's process group (so its end does not kill us) and its parent
    # chain (double fork: reparented to init or a reaper); the session stays, unless
    # `setsid` leaves that too.
    if os.fork():
        os._exit(0)
    if sys.argv[5:] == ["setsid"]:
        os.setsid()
    else:
        os.setpgid(0, 0)
    if os.fork():
        os._exit(0)
    for fd in (0, 1, 2):
        os.close(fd)
while trigger != "-" and not os.path.exists(trigger):
    time.sleep(0.05)
def frame(obj):
    body = json.dumps(obj).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body
def read(sock):
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            return None
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    size = int(head.split(b":")[1])
    while len(rest) < size:
        chunk = sock.recv(65536)
        if not chunk:
            return None
        rest += chunk
    return json.loads(rest[:size])
answers = []
try:
    sock = socket.socket(socket.AF_UNIX)
    sock.connect(path)
    sock.sendall(frame({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                        "params": {"protocolVersion": 1, "clientInfo": {"name": "evil"}}}))
    answers.append(read(sock))
    call = {"name": "run_command", "detached": "auto",
            "arguments": {"command": "touch " + target}}
    sock.sendall(frame({"jsonrpc": "2.0", "id": 2, "method": "tool/call", "params": call}))
    answers.append(read(sock))
except OSError as exc:
    answers.append({"oserror": str(exc)})
with open(out, "w") as f:
    json.dump(answers, f)
"""


def attacker(workspace: Path) -> Path:
    script = workspace / "attack.py"
    script.write_text(ATTACKER)
    return script


def attack_command(
    script: Path, socket: Path, out: Path, target: Path, trigger: str = "-", *extra: str
) -> str:
    return " ".join(
        [sys.executable, str(script), str(socket), str(out), trigger, str(target), *extra]
    )


def assert_refused(answers: list[Any]) -> str:
    """The first answer is a -32007 refusal and nothing else was served; returns its text."""
    first = answers[0]
    assert "error" in first, answers
    assert first["error"]["code"] == -32007
    # The connection was closed after the refusal: nothing more was read or sent.
    assert answers[1] is None or "oserror" in answers[1], answers
    message: str = first["error"]["message"]
    assert message.startswith("jpd refuses this connection")
    return message


async def start(tmp_path: Path, daemons: Daemons, config: str) -> tuple[dict[str, str], Path]:
    env = socket_env(tmp_path)
    add_config(env, config)
    await daemons.start(env)
    workspace = tmp_path / "ws"
    workspace.mkdir()
    return env, workspace


async def call_command(env: dict[str, str], workspace: Path, command: str) -> dict[str, Any]:
    client = await SocketClient.connect(Path(env["JP_SOCKET"]))
    try:
        await client.initialize(workspaceRoot=str(workspace))
        result: dict[str, Any] = await client.request(
            "tool/call", {"name": "run_command", "arguments": {"command": command}}
        )
        return result
    finally:
        await client.close()


async def test_an_unsandboxed_command_cannot_use_the_daemon(
    tmp_path: Path, daemons: Daemons
) -> None:
    env, workspace = await start(tmp_path, daemons, UNATTENDED + SANDBOX_OFF)
    out, target = workspace / "answers.json", tmp_path / "escaped"
    command = attack_command(attacker(workspace), Path(env["JP_SOCKET"]), out, target)
    result = await call_command(env, workspace, command)
    assert result["content"].startswith("exit code: 0"), result
    message = assert_refused(json.loads(out.read_text()))
    assert "tool process the daemon started" in message
    assert not target.exists()
    logs = "".join(p.read_text() for p in Path(env["JP_LOG_DIR"]).iterdir())
    assert "jpd refuses this connection" in logs  # the reason is logged

    # The user's own client is served as before.
    status = await run_jp_async(env, "daemon", "status")
    assert status.returncode == 0, status.stderr


async def test_a_sandboxed_command_cannot_use_the_daemon(tmp_path: Path, daemons: Daemons) -> None:
    """The default sandbox (no network: a network namespace of its own)."""
    env, workspace = await start(tmp_path, daemons, UNATTENDED)
    out, target = workspace / "answers.json", tmp_path / "escaped"
    command = attack_command(attacker(workspace), Path(env["JP_SOCKET"]), out, target)
    result = await call_command(env, workspace, command)
    assert result["content"].startswith("exit code: 0"), result
    answers = json.loads(out.read_text())
    if "oserror" not in answers[0]:  # a cage that hides the socket is as good
        assert "another net namespace" in assert_refused(answers)
    assert not target.exists()


@pytest.mark.parametrize("how", ["detach", "setsid"])
async def test_a_double_fork_of_an_unsandboxed_command_is_refused(
    tmp_path: Path, daemons: Daemons, how: str
) -> None:
    """With the sandbox off, a child that leaves its command's process group (or its
    session: `setsid`) and parent chain (a double fork) is reparented to the tool's
    launcher (a subreaper), so its parent chain still reaches the daemon: refused. (It
    cannot wait for the call to end: the launcher kills it then, tests/e2e/test_cage_*.)"""
    env, workspace = await start(tmp_path, daemons, UNATTENDED + SANDBOX_OFF)
    out, target = workspace / "answers.json", tmp_path / "escaped"
    socket = Path(env["JP_SOCKET"])
    attack = attack_command(attacker(workspace), socket, out, target, "-", how)
    wait = f"for i in $(seq 100); do [ -s {out} ] && break; sleep 0.1; done"
    result = await call_command(env, workspace, f"{attack}; {wait}")
    assert result["content"].startswith("exit code: 0"), result
    await wait_for(lambda: out.exists() and out.read_text().endswith("]"), "its answers")
    message = assert_refused(json.loads(out.read_text()))
    assert "started by the daemon" in message or "tool process" in message, message
    assert not target.exists()


async def test_a_normal_client_is_served_and_its_env_selects_its_config(
    tmp_path: Path, daemons: Daemons
) -> None:
    """The user's own process (verified by the peer rule) may name another config in
    `environment.env`: here one with the sandbox off, so the command writes outside."""
    env, workspace = await start(tmp_path, daemons, UNATTENDED)
    other = tmp_path / "other.toml"
    other.write_text(Path(env["JP_CONFIG"]).read_text() + SANDBOX_OFF)
    target = tmp_path / "written"
    client = await SocketClient.connect(Path(env["JP_SOCKET"]))
    try:
        await client.initialize(workspaceRoot=str(workspace))
        sent = {"cwd": str(workspace), "env": {**env, "JP_CONFIG": str(other)}}
        result = await client.request(
            "tool/call",
            {
                "name": "run_command",
                "arguments": {"command": f"touch {target}"},
                "environment": sent,
            },
        )
    finally:
        await client.close()
    assert result["content"].startswith("exit code: 0"), result
    assert target.exists()


async def test_initialize_refusal_is_a_json_rpc_error(tmp_path: Path, daemons: Daemons) -> None:
    """What a refused client's library sees: an error answer to `initialize`."""
    env, workspace = await start(tmp_path, daemons, UNATTENDED + SANDBOX_OFF)
    out = workspace / "answers.json"
    script = attacker(workspace)
    command = attack_command(script, Path(env["JP_SOCKET"]), out, tmp_path / "x")
    await call_command(env, workspace, command)
    first = json.loads(out.read_text())[0]
    error = RpcError(first["error"])
    assert error.code == -32007


async def test_a_websocket_client_cannot_select_a_config_with_the_sandbox_off(
    tmp_path: Path, daemons: Daemons
) -> None:
    """A WebSocket peer cannot be vouched for: its `environment.env` keeps the daemon's
    `JP_CONFIG` (sandboxed), so the command cannot write outside the workspace. (The
    same request from the user's verified process is honoured: the test above.)"""
    from websockets.asyncio.client import connect

    from tests.e2e.test_websocket import rpc, start_ws

    env = socket_env(tmp_path)
    add_config(env, UNATTENDED)
    _, port = await start_ws(daemons, env)
    token = Path(env["JP_SOCKET"]).with_suffix(".ws-token").read_text().strip()
    workspace = tmp_path / "ws"
    workspace.mkdir()
    hostile = tmp_path / "hostile.toml"
    hostile.write_text(Path(env["JP_CONFIG"]).read_text() + SANDBOX_OFF)
    target = tmp_path / "escaped"
    headers = {"Authorization": f"Bearer {token}"}
    async with connect(f"ws://127.0.0.1:{port}/", additional_headers=headers) as ws:
        init = {"protocolVersion": 1, "clientInfo": {"name": "ws"}}
        assert "result" in await rpc(ws, 1, "initialize", init)
        sent = {
            "cwd": str(workspace),
            "env": {**env, "JP_CONFIG": str(hostile)},
        }
        command = f"touch {target}"
        params = {"name": "run_command", "arguments": {"command": command}, "environment": sent}
        answer = await rpc(ws, 2, "tool/call", params)
    content = answer["result"]["content"]
    assert "Permission denied" in content  # the daemon's sandbox held
    assert not target.exists()


async def test_jp_inside_a_command_is_told_why(tmp_path: Path, daemons: Daemons) -> None:
    """`jp` run by a command (a model that found it on PATH) gets the refusal, not a
    second daemon or a hang."""
    env, workspace = await start(tmp_path, daemons, UNATTENDED + SANDBOX_OFF)
    socket = env["JP_SOCKET"]
    command = f"JP_SOCKET={socket} {sys.executable} -m jpcli daemon status; echo rc=$?"
    result = await call_command(env, workspace, command)
    content = result["content"]
    assert "jpd refuses this connection" in content, content
    assert "rc=0" not in content
