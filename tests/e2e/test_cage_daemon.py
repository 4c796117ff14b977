"""The cage of `run_command` through a real `jpd --listen` (issue 35, items 1 and 6).

A command cannot reach the daemon's own socket, and nothing it starts (a `setsid`
double fork) outlives its call: not after the call ends, a turn cancel, `jp daemon stop`
or a SIGKILL of the daemon. Both cages: bubblewrap's namespaces, and the Landlock and
seccomp cage with the launcher as subreaper.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

import pytest

from tests.e2e.sockets import Daemons, SocketClient, add_config, run_jp_async, socket_env, wait_for
from tests.e2e.tools import tool_call

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux cage")

CAGES = ["auto", "landlock"]

DAEMONIZE = """import os, sys, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        with open("grandchild.pid", "w") as out:
            out.write(str(os.getpid()))
        time.sleep(600)
    os._exit(0)
print("started")
"""


def config(cage: str) -> str:
    return f'[conversation.tools.run_command]\nrun = "unattended"\noptions.cage = "{cage}"\n'


def survivors(token: str) -> list[int]:
    """Host pids of live processes whose command line holds `token`."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if token.encode() in (entry / "cmdline").read_bytes():
                    state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
                    if state not in ("Z", "X"):
                        found.append(int(entry.name))
            except OSError:
                continue
    return found


async def start(
    tmp_path: Path, daemons: Daemons, cage: str, command: str
) -> tuple[SocketClient, str, dict[str, str]]:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "daemonize.py").write_text(DAEMONIZE)
    env = socket_env(tmp_path, [tool_call("run_command", command=command), {"text": "done"}])
    add_config(env, config(cage))
    daemon = await daemons.start(env)
    client = await SocketClient.connect(daemon.socket)
    await client.initialize(workspaceRoot=str(workspace))
    started = await client.request("turn/start", {"message": "go"})
    return client, started["turnId"], env


def result_of(client: SocketClient, turn_id: str) -> str:
    [result] = [
        e["event"]["content"]
        for e in client.turn_events(turn_id)
        if e["event"]["kind"] == "tool_result"
    ]
    return str(result)


@pytest.mark.parametrize("cage", CAGES)
async def test_a_command_cannot_reach_the_daemons_socket(
    tmp_path: Path, daemons: Daemons, cage: str
) -> None:
    socket_path = tmp_path / "run" / "jpd.sock"
    code = (
        "import socket, sys; s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]);"
        " s.sendall(b'Content-Length: 2\\r\\n\\r\\n{}'); print('CONNECTED')"
    )
    client, turn_id, _ = await start(
        tmp_path, daemons, cage, f'python3 -c "{code}" {socket_path}; ls {tmp_path / "data"}'
    )
    await client.wait_event(turn_id, "turn_completed")
    out = result_of(client, turn_id)
    assert "CONNECTED" not in out and "Operation not permitted" in out, out
    if cage != "landlock":  # the landlock cage hides no folder (README, "Sandbox")
        assert "conversations" not in out
    status = await client.request("daemon/status")
    assert status["clients"] == 1
    await client.close()


@pytest.mark.parametrize("cage", CAGES)
async def test_nothing_outlives_a_finished_call(
    tmp_path: Path, daemons: Daemons, cage: str
) -> None:
    token = f"jpd-e2e-finished-{os.getpid()}-{cage}"
    client, turn_id, _ = await start(tmp_path, daemons, cage, f"python3 daemonize.py {token}")
    await client.wait_event(turn_id, "turn_completed")
    assert "started" in result_of(client, turn_id)
    assert (tmp_path / "ws" / "grandchild.pid").exists()
    assert survivors(token) == []
    await client.close()


@pytest.mark.parametrize("cage", CAGES)
@pytest.mark.parametrize("how", ["cancel", "daemon stop", "SIGKILL"])
async def test_nothing_outlives_a_cancel_or_the_daemon(
    tmp_path: Path, daemons: Daemons, cage: str, how: str
) -> None:
    token = f"jpd-e2e-{how.replace(' ', '-')}-{os.getpid()}-{cage}"
    command = f"python3 daemonize.py {token}; python3 -c 'import time; time.sleep(600)' {token}"
    client, turn_id, env = await start(tmp_path, daemons, cage, command)
    await wait_for(lambda: len(survivors(token)) >= 2, "the command and its grandchild")
    if how == "cancel":
        await client.request("turn/cancel", {"turnId": turn_id})
        await client.wait_event(turn_id, "turn_completed")
    elif how == "daemon stop":
        done = await run_jp_async(env, "daemon", "stop")
        assert done.returncode == 0, done.stderr
    else:
        pid = (await client.request("daemon/status"))["pid"]
        os.kill(pid, signal.SIGKILL)
    await wait_for(lambda: survivors(token) == [], f"no process left after {how}", 20)
    await client.close()
    await asyncio.sleep(0)
