"""The peer rule with the daemon and its client running as an unprivileged user
(protocol.md 2.1): the command it is asked to run cannot use the daemon's socket,
whether it runs sandboxed or not."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.e2e.sockets import ROOT, add_config, socket_env, wait_for
from tests.e2e.test_peer_rule import SANDBOX_OFF, UNATTENDED, assert_refused, attacker

OTHER = 65534  # nobody

# The user's own client: initialize, then `tool/call run_command COMMAND` in WORKSPACE.
CLIENT = r"""
import json, socket, sys
path, workspace, command = sys.argv[1:4]
def frame(obj):
    body = json.dumps(obj).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body
def read(sock):
    data = b""
    while b"\r\n\r\n" not in data:
        data += sock.recv(65536)
    head, _, rest = data.partition(b"\r\n\r\n")
    size = int(head.split(b":")[1])
    while len(rest) < size:
        rest += sock.recv(65536)
    return json.loads(rest[:size])
sock = socket.socket(socket.AF_UNIX)
sock.connect(path)
init = {"protocolVersion": 1, "clientInfo": {"name": "user"}, "workspaceRoot": workspace}
sock.sendall(frame({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init}))
read(sock)
call = {"name": "run_command", "arguments": {"command": command, "timeout_secs": 60}}
sock.sendall(frame({"jsonrpc": "2.0", "id": 2, "method": "tool/call", "params": call}))
print(json.dumps(read(sock)))
"""


def _drop() -> None:  # pragma: no cover - runs in the child
    os.setgroups([])
    os.setgid(OTHER)
    os.setuid(OTHER)


def _python_for_other(env: dict[str, str]) -> str | None:
    """An interpreter of this Python version that the other user can run with this
    tree's packages (the venv's may live under a home only root can enter)."""
    minor = f"python3.{sys.version_info.minor}"
    for candidate in (sys.executable, f"/usr/bin/{minor}", f"/usr/local/bin/{minor}"):
        try:
            done = subprocess.run(
                [candidate, "-c", "import jpd.server, jpcli"],
                env=env,
                preexec_fn=_drop,
                capture_output=True,
                check=False,
                timeout=60,
            )
        except OSError:
            continue
        if done.returncode == 0:
            return candidate
    return None


def _prepare(home: Path, sandbox: str) -> tuple[dict[str, str], Path, str | None]:
    """The unprivileged user's files under `home`: its environment, its workspace (with
    the attacker's script) and a Python it can run (None: none)."""
    env = socket_env(home)
    add_config(env, UNATTENDED + (SANDBOX_OFF if sandbox == "off" else ""))
    packages = [p for p in sys.path if p.endswith("site-packages") and "/root" not in p]
    env.update(
        HOME=str(home),
        PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "clients"), *packages]),
    )
    env.pop("XDG_RUNTIME_DIR", None)
    workspace = home / "ws"
    workspace.mkdir()
    attacker(workspace)
    (home / "client.py").write_text(CLIENT)
    (home / "logs").mkdir()
    subprocess.run(["chown", "-R", f"{OTHER}:{OTHER}", str(home)], check=True)
    return env, workspace, _python_for_other(env)


def _spawn(python: str, env: dict[str, str], home: Path) -> subprocess.Popen[bytes]:
    with (home / "logs" / "stderr.txt").open("ab") as log:
        return subprocess.Popen(
            [python, "-m", "jpd", "--listen"],
            cwd=ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            preexec_fn=_drop,
        )


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to become an unprivileged user")
@pytest.mark.parametrize("sandbox", ["off", "default"])
async def test_an_unprivileged_users_command_cannot_use_the_daemon(sandbox: str) -> None:
    """The daemon and its client run as an unprivileged user; the command it is asked
    to run tries the daemon's socket, and is refused whatever the sandbox."""
    home = Path(tempfile.mkdtemp(prefix="jp-peer-"))
    daemon: subprocess.Popen[bytes] | None = None
    try:
        env, workspace, python = await asyncio.to_thread(_prepare, home, sandbox)
        if python is None:
            pytest.skip("no Python the unprivileged user can run with this tree's packages")
        daemon = await asyncio.to_thread(_spawn, python, env, home)
        socket_path = Path(env["JP_SOCKET"])
        await wait_for(socket_path.exists, "the unprivileged daemon to listen")
        out, target = workspace / "answers.json", home / "escaped"
        script = workspace / "attack.py"
        command = " ".join([python, str(script), str(socket_path), str(out), "-", str(target)])
        done = await asyncio.to_thread(
            subprocess.run,
            [python, str(home / "client.py"), str(socket_path), str(workspace), command],
            env=env,
            preexec_fn=_drop,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        result = json.loads(done.stdout)["result"]["content"]
        if "refused to run unsandboxed" in result:
            pytest.skip(f"the kernel cannot sandbox an unprivileged user here: {result}")
        assert result.startswith("exit code: 0"), result
        answers = json.loads(out.read_text())
        if "oserror" not in answers[0]:  # a cage that hides the socket is as good
            assert_refused(answers)
        assert not target.exists()
    finally:
        if daemon is not None:
            daemon.terminate()
            await asyncio.to_thread(daemon.wait, 30)
        shutil.rmtree(home, ignore_errors=True)
