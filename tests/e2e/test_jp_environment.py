"""The shared daemon runs each turn with the environment of the `jp` that asked for it
(protocol.md 5.5 "Client environment"), and one daemon serves one data dir (2.1)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import pytest

from tests.e2e.harness import data_files, write_script
from tests.e2e.sockets import Daemons, RpcError, SocketClient, run_jp_async, socket_env
from tests.e2e.tools import make_tool, tool_toml

SECRET = "s3cr3t-value-never-stored"


def other_config(home: Path, text: str, extra: str = "") -> Path:
    """A second config file whose scripted model answers `text`."""
    home.mkdir(parents=True, exist_ok=True)
    script = write_script(home / "script.json", [{"text": text}] * 5)
    config = home / "config.toml"
    config.write_text(
        f'[assistant.model]\nid = "test/scripted"\n[providers.test]\nscript = "{script}"\n' + extra
    )
    return config


def run_jp_in(env: Mapping[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "jpcli", *args],
        cwd=cwd,
        env=dict(env),
        input="",
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


async def test_each_query_uses_its_own_jp_config(tmp_path: Path, daemons: Daemons) -> None:
    env = socket_env(tmp_path, [{"text": "from the first config"}] * 5)
    daemons.watch(env)
    first = await run_jp_async(env, "query", "--new", "hi")  # starts the daemon with env
    assert (first.returncode, first.stdout) == (0, "from the first config\n"), first.stderr
    pid = (Path(env["JP_SOCKET"]).with_suffix(".pid")).read_text()

    other = {**env, "JP_CONFIG": str(other_config(tmp_path / "b", "from the second config"))}
    second = await run_jp_async(other, "query", "--new", "hi")
    assert (second.returncode, second.stdout) == (0, "from the second config\n"), second.stderr
    again = await run_jp_async(env, "query", "--new", "hi")
    assert again.stdout == "from the first config\n"
    # The same daemon served all three.
    assert Path(env["JP_SOCKET"]).with_suffix(".pid").read_text() == pid


async def test_tools_get_the_clients_environment_and_cwd(tmp_path: Path, daemons: Daemons) -> None:
    env = socket_env(tmp_path)
    await daemons.start(env)  # the daemon's environment lacks JP17_VAR
    tool = make_tool(
        tmp_path,
        "envtool",
        'print(json.dumps({"type": "success", "content": '
        'os.environ.get("JP17_VAR", "unset") + " " + os.getcwd() + " "'
        ' + os.environ.get("DATABASE_URL", "no-db") + " "'
        ' + os.environ.get("SSH_AUTH_SOCK", "no-ssh")}))\n',
    )
    script = write_script(
        tmp_path / "tools-script.json",
        [{"tool_calls": [{"id": "c1", "name": "envtool", "arguments": {}}]}, {"text": "done"}],
    )
    config = tmp_path / "tools.toml"
    config.write_text(
        f'[assistant.model]\nid = "test/scripted"\n[providers.test]\nscript = "{script}"\n'
        # The allow-list: only what the tool's `env` names beyond PATH, HOME and the like.
        + tool_toml("envtool", tool, run='"unattended"', env="{ JP17_VAR = true }")
    )
    workspace = tmp_path / "ws"
    workspace.mkdir()
    client = {
        **env,
        "JP_CONFIG": str(config),
        "JP17_VAR": SECRET,
        "DATABASE_URL": "postgres://u:pw@db/x",  # no KEY/TOKEN in the name: still withheld
        "SSH_AUTH_SOCK": "/tmp/agent.sock",
    }
    result = run_jp_in(client, workspace, "query", "--new", "-F", "json", "go")
    assert result.returncode == 0, result.stderr
    events = [json.loads(line) for line in result.stdout.splitlines()]
    results = [e["event"] for e in events if e["event"]["kind"] == "tool_result"]
    assert [r["content"] for r in results] == [f"{SECRET} {workspace} no-db no-ssh"]

    # Used for the turn only: the variable is nowhere on disk but in the tool's output
    # that the conversation records, and never in the daemon's log.
    log = (Path(env["JP_LOG_DIR"]) / "jpd.log").read_text()
    assert SECRET not in log
    replay = Path(env["JP_DATA_DIR"]) / "replay"  # the same events, as sent live
    for path, content in data_files(Path(env["JP_DATA_DIR"])).items():
        if path.name != "events.jsonl" and path.parent != replay:
            assert SECRET.encode() not in content, path
    for path in replay.glob("*.jsonl"):
        lines = [json.loads(line) for line in path.read_text().splitlines()]
        carrying = [line["event"]["kind"] for line in lines if SECRET in json.dumps(line)]
        assert carrying == ["tool_result"]
    for path in (Path(env["JP_DATA_DIR"]) / "conversations").glob("*/events.jsonl"):
        lines = [json.loads(line) for line in path.read_text().splitlines()]
        carrying = [line["type"] for line in lines if SECRET in json.dumps(line)]
        assert carrying == ["tool_call_response"]
    # No other client sees it.
    listed = await run_jp_async(env, "turn", "ls", "-F", "json")
    assert SECRET not in listed.stdout


async def test_provider_keys_come_from_the_client(tmp_path: Path, daemons: Daemons) -> None:
    env = socket_env(tmp_path)
    await daemons.start({**env, "ANTHROPIC_API_KEY": "the-daemons-key"})
    client = {k: v for k, v in env.items() if k != "ANTHROPIC_API_KEY"}
    result = await run_jp_async(client, "query", "-m", "anthropic/claude-x", "hi")
    assert result.returncode == 1
    assert "no API key; set the ANTHROPIC_API_KEY environment variable" in result.stderr


def _runtime(tmp_path: Path) -> Path:
    runtime = tmp_path / "xdg-run"
    runtime.mkdir(mode=0o700, exist_ok=True)
    return runtime


async def test_one_daemon_per_data_dir(tmp_path: Path, daemons: Daemons) -> None:
    base = socket_env(tmp_path)
    base.pop("JP_SOCKET")
    base["XDG_RUNTIME_DIR"] = str(_runtime(tmp_path))
    one = {**base, "JP_DATA_DIR": str(tmp_path / "one"), "JP_LOG_DIR": str(tmp_path / "l1")}
    two = {**base, "JP_DATA_DIR": str(tmp_path / "two"), "JP_LOG_DIR": str(tmp_path / "l2")}
    sockets = {}
    for env in (one, two):
        done = await run_jp_async(env, "query", "--new", "hi")
        assert done.returncode == 0, done.stderr
        status = json.loads((await run_jp_async(env, "daemon", "status", "-F", "json")).stdout)
        sockets[env["JP_DATA_DIR"]] = status["socketPath"]
        daemons.watch({**env, "JP_SOCKET": status["socketPath"]})
        assert status["dataDir"] == env["JP_DATA_DIR"]
        assert status["configPath"] == env["JP_CONFIG"]
        assert status["logFile"] == str(Path(env["JP_LOG_DIR"]) / "jpd.log")
        text = (await run_jp_async(env, "daemon", "status")).stdout
        assert f"data:    {env['JP_DATA_DIR']}" in text
        assert f"log:     {status['logFile']}" in text
    assert len(set(sockets.values())) == 2
    assert all(Path(s).name.startswith("jpd-") for s in sockets.values())
    assert len(list((tmp_path / "one" / "conversations").iterdir())) == 1
    assert len(list((tmp_path / "two" / "conversations").iterdir())) == 1


async def test_a_client_of_another_data_dir_is_refused(tmp_path: Path, daemons: Daemons) -> None:
    env = socket_env(tmp_path)
    await daemons.start(env)
    client = await SocketClient.connect(Path(env["JP_SOCKET"]))
    try:
        with pytest.raises(RpcError) as refused:
            await client.initialize(dataDir=str(tmp_path / "elsewhere"))
        assert refused.value.code == -32006
        assert str(tmp_path / "data") in refused.value.error["message"]
        ok = await client.initialize(dataDir=env["JP_DATA_DIR"])
        assert ok["serverInfo"]["name"] == "jpd"
    finally:
        await client.close()
    # jp itself reaches the right daemon: its data dir matches.
    status = await run_jp_async(env, "daemon", "status")
    assert status.returncode == 0 and os.path.basename(env["JP_DATA_DIR"]) in status.stdout
