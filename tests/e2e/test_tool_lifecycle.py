"""A real `jpd --listen`: tools die with the daemon, and see no secrets unless configured."""

from __future__ import annotations

import json
import signal
import sys
from pathlib import Path

import pytest

from tests.e2e.sockets import Daemons, SocketClient, add_config, socket_env, wait_for
from tests.e2e.tools import add_tool, make_tool, tool_call, tool_toml


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


HANGER = """
child = __import__("subprocess").Popen([sys.executable, "-c", "import time; time.sleep(600)"])
with open(os.path.join(os.getcwd(), "pids.txt"), "w") as out:
    out.write(f"{os.getpid()} {child.pid}")
time.sleep(600)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc")
async def test_sigkill_of_the_daemon_kills_running_tools_and_their_children(
    tmp_path: Path, daemons: Daemons
) -> None:
    env = socket_env(tmp_path, [tool_call("hang"), {"text": "never"}])
    add_tool(env, "hang", HANGER)
    workspace = tmp_path / "ws"
    workspace.mkdir()
    daemon = await daemons.start(env)
    client = await SocketClient.connect(daemon.socket)
    await client.initialize(workspaceRoot=str(workspace))
    await client.request("turn/start", {"message": "hang"})
    pids = workspace / "pids.txt"
    await wait_for(lambda: pids.exists() and pids.read_text().strip(), "the tool to start")
    tool, child = map(int, pids.read_text().split())
    assert alive(tool) and alive(child)
    daemon.process.send_signal(signal.SIGKILL)
    await daemon.wait_exit()
    await client.close()
    await wait_for(lambda: not alive(tool) and not alive(child), "the tool group to die", 20)


ENV_PRINTER = """
names = ["PATH", "ANTHROPIC_API_KEY", "GITHUB_TOKEN", "DEPLOY_PASSWORD", "MODE"]
print("env=" + json.dumps({name: os.environ.get(name) for name in names}))
"""


async def test_tools_see_no_secrets_unless_their_config_passes_them(
    tmp_path: Path, daemons: Daemons
) -> None:
    calls = [
        {"tool_calls": [{"id": "call_1", "name": "plain", "arguments": {}}]},
        {"tool_calls": [{"id": "call_2", "name": "trusted", "arguments": {}}]},
        {"text": "done"},
    ]
    env = socket_env(tmp_path, calls)
    env.update(ANTHROPIC_API_KEY="sk-ant", GITHUB_TOKEN="ghp-1", DEPLOY_PASSWORD="pw")
    printer = make_tool(tmp_path, "printer", ENV_PRINTER)
    add_config(
        env,
        tool_toml("plain", printer, run='"unattended"')
        + tool_toml("trusted", printer, run='"unattended"')
        + 'env = { GITHUB_TOKEN = true, MODE = "ci" }\n',
    )
    daemon = await daemons.start(env)
    client = await SocketClient.connect(daemon.socket)
    await client.initialize()
    started = await client.request("turn/start", {"message": "print env"})
    await client.wait_event(started["turnId"], "turn_completed")
    results = [
        e["event"]["content"]
        for e in client.turn_events(started["turnId"])
        if e["event"]["kind"] == "tool_result"
    ]
    plain, trusted = (json.loads(text.removeprefix("env=")) for text in results)
    assert plain["PATH"]
    assert plain["ANTHROPIC_API_KEY"] is None
    assert plain["GITHUB_TOKEN"] is None
    assert plain["DEPLOY_PASSWORD"] is None
    assert trusted["GITHUB_TOKEN"] == "ghp-1"
    assert trusted["MODE"] == "ci"
    assert trusted["ANTHROPIC_API_KEY"] is None
    await client.close()
