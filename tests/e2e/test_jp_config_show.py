"""`jp config show` against a real `jpd --listen`: each effective key with the layer it
came from (default, user file, workspace file, -c), credentials never printed."""

from __future__ import annotations

import functools
import json
import subprocess
import sys
from pathlib import Path

import anyio

from tests.e2e.sockets import Daemons, add_config, run_jp, socket_env

SECRET = "hdr-s3cret-5b1e"


async def test_config_show_names_each_origin_and_hides_secrets(
    tmp_path: Path, daemons: Daemons
) -> None:
    env = socket_env(tmp_path)
    config = Path(env["JP_CONFIG"])
    add_config(
        env,
        '[mcp.servers.web]\nurl = "http://127.0.0.1:9/mcp"\nenable = false\n'
        + f'headers = {{ Authorization = "Bearer {SECRET}" }}\n',
    )
    await daemons.start(env)
    shown = run_jp(env, "config", "show", "-c", "assistant.system_prompt=terse")
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert 'assistant.model.id = "test/scripted"  # ' + str(config) in lines
    assert 'assistant.system_prompt = "terse"  # -c' in lines
    assert "daemon.replay_buffer = 10000  # default" in lines
    assert f"mcp.servers.web.headers.Authorization = <redacted>  # {config}" in lines
    assert SECRET not in shown.stdout

    as_json = run_jp(env, "config", "show", "-F", "json")
    assert as_json.returncode == 0, as_json.stderr
    entries = {e["key"]: e for e in json.loads(as_json.stdout)["entries"]}
    assert entries["mcp.servers.web.headers.Authorization"]["redacted"] is True
    assert entries["assistant.system_prompt"]["origin"] == "default"
    assert SECRET not in as_json.stdout

    bad = run_jp(env, "config", "show", "-c", "daemon.replay_buffer=lots")
    assert bad.returncode == 1 and "daemon.replay_buffer" in bad.stderr


async def test_workspace_file_overrides_the_user_file(tmp_path: Path, daemons: Daemons) -> None:
    env = socket_env(tmp_path)
    await daemons.start(env)
    workspace = tmp_path / "ws"
    (workspace / ".jp").mkdir(parents=True)
    ws_config = workspace / ".jp" / "config.toml"
    ws_config.write_text('[assistant]\nsystem_prompt = "from the workspace"\n')
    command = [sys.executable, "-m", "jpcli", "config", "show"]
    run = functools.partial(
        subprocess.run, command, cwd=workspace, env=env, capture_output=True, text=True
    )
    untrusted = await anyio.to_thread.run_sync(run)
    assert untrusted.returncode == 0, untrusted.stderr
    assert "from the workspace" not in untrusted.stdout
    assert f"untrusted workspace config {ws_config}" in untrusted.stderr
    assert "jp trust" in untrusted.stderr

    trust = [sys.executable, "-m", "jpcli", "trust"]
    trusted = await anyio.to_thread.run_sync(
        functools.partial(
            subprocess.run, trust, cwd=workspace, env=env, capture_output=True, text=True
        )
    )
    assert trusted.returncode == 0, trusted.stderr
    shown = await anyio.to_thread.run_sync(run)
    assert shown.returncode == 0, shown.stderr
    assert f'assistant.system_prompt = "from the workspace"  # {ws_config}' in shown.stdout
    assert "untrusted" not in shown.stderr

    # A changed file (a `git pull`) needs trust again.
    ws_config.write_text('[assistant]\nsystem_prompt = "changed"\n')
    changed = await anyio.to_thread.run_sync(run)
    assert "changed" not in changed.stdout and "untrusted" in changed.stderr
