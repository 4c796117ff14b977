"""`jp --remote HOST` / `$JP_REMOTE` over ssh, and `jp proxy` (protocol.md 2.2).

A stand-in `ssh` (tests/fixtures/fake_ssh.py) runs the remote command as another
machine: its own home, data dir, socket, config and PATH, none of this one's environment.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from acp import spawn_agent_process

from tests.e2e.acp_client import Editor
from tests.e2e.sockets import ROOT, Daemons, persisted, run_jp, run_jp_async, socket_env, wait_for
from tests.e2e.tools import SHIP_IT, add_tool, tool_call

FAKE_SSH = Path(__file__).parent.parent / "fixtures" / "fake_ssh.py"
SHOW_ENV = """
print(f"cwd={os.getcwd()} secret={os.environ.get('LAPTOP_SECRET', '-')}")
"""


def machines(
    tmp_path: Path, responses: list[dict[str, Any]] | None = None
) -> tuple[dict[str, str], dict[str, str]]:
    """(this machine's environment for `jp`, the environment of the machine `devbox`)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "ssh").symlink_to(FAKE_SSH)
    remote_home = tmp_path / "devbox"
    remote_home.mkdir()
    full = socket_env(remote_home, responses)
    remote = {k: v for k, v in full.items() if k.startswith(("JP_", "JPD_"))}
    remote.update(
        HOME=str(remote_home),
        PATH=f"{Path(sys.executable).parent}:/usr/bin:/bin",
        PYTHONPATH=str(ROOT),
    )
    machines_dir = tmp_path / "machines"
    machines_dir.mkdir()
    (machines_dir / "devbox.json").write_text(json.dumps(remote))
    local_home = tmp_path / "laptop"
    local_home.mkdir()
    local = socket_env(local_home)
    local.pop("JP_REMOTE", None)
    local.update(
        PATH=f"{bin_dir}:{Path(sys.executable).parent}:{local.get('PATH', '/usr/bin:/bin')}",
        FAKE_SSH_MACHINES=str(machines_dir),
        LAPTOP_SECRET="from-the-laptop",
    )
    return local, remote


async def test_every_command_runs_on_the_remote_machine(tmp_path: Path, daemons: Daemons) -> None:
    local, remote = machines(tmp_path)
    daemons.watch(remote)
    daemons.watch(local)
    done = await run_jp_async(local, "--remote", "devbox", "query", "hello")
    assert done.returncode == 0, done.stderr
    assert "ok" in done.stdout
    # The proxy started the daemon there; the turn and its data are there, none here.
    assert Path(remote["JP_SOCKET"]).with_suffix(".pid").exists()
    assert not Path(local["JP_SOCKET"]).exists()
    (conversation,) = os.listdir(Path(remote["JP_DATA_DIR"]) / "conversations")
    assert not (Path(local["JP_DATA_DIR"]) / "conversations").exists()

    env = local | {"JP_REMOTE": "devbox"}
    listed = await run_jp_async(env, "conversation", "ls")
    assert listed.returncode == 0 and conversation in listed.stdout, listed.stderr
    again = await run_jp_async(env, "query", "again")  # the remote's current conversation
    assert again.returncode == 0, again.stderr
    starts = [e for e in persisted(remote, conversation) if e["type"] == "turn_start"]
    assert len(starts) == 2
    attached = await run_jp_async(env, "attach", "--from-seq", "0")
    assert attached.returncode == 0 and "ok" in attached.stdout, attached.stderr
    for args in (("turn", "ls"), ("inquiry", "ls"), ("daemon", "status")):
        result = await run_jp_async(env, *args)
        assert result.returncode == 0, (args, result.stderr)
    stopped = await run_jp_async(env, "daemon", "stop")
    assert stopped.returncode == 0 and "jpd stopped" in stopped.stdout, stopped.stderr
    pid_file = Path(remote["JP_SOCKET"]).with_suffix(".pid")
    await wait_for(lambda: not pid_file.exists(), "the remote daemon to stop")


async def test_the_remote_workspace_and_environment_are_the_remotes(
    tmp_path: Path, daemons: Daemons
) -> None:
    local, remote = machines(tmp_path, [tool_call("show_env"), {"text": "done"}])
    add_tool(remote, "show_env", SHOW_ENV)
    daemons.watch(remote)
    app = tmp_path / "devbox" / "src" / "app"
    app.mkdir(parents=True)
    done = await run_jp_async(local, "--remote", f"devbox:{app}", "query", "-F", "json", "go")
    assert done.returncode == 0, done.stderr
    (conversation,) = os.listdir(Path(remote["JP_DATA_DIR"]) / "conversations")
    (result,) = [e for e in persisted(remote, conversation) if e["type"] == "tool_call_response"]
    # The tool ran in the named remote workspace, without this machine's variables.
    assert result["content"].strip() == f"cwd={app} secret=-"


def test_bad_remotes_are_refused_before_ssh_runs(tmp_path: Path) -> None:
    local, _ = machines(tmp_path)
    for spec, why in (
        ("-oProxyCommand=touch /tmp/x", "ssh option"),
        ("devbox:relative/path", "absolute path"),
        ("dev box", "unexpected characters"),
    ):
        result = run_jp(local, "--remote", spec, "conversation", "ls")
        assert result.returncode == 2 and why in result.stderr, (spec, result.stderr)
    both = run_jp(local, "--remote", "devbox", "--stdio", "conversation", "ls")
    assert both.returncode == 2 and "excludes --stdio" in both.stderr
    # The --stdio flag beats $JP_REMOTE: a private daemon here, no ssh.
    private = run_jp(local | {"JP_REMOTE": "nowhere"}, "--stdio", "conversation", "ls")
    assert private.returncode == 0, private.stderr


def test_an_unreachable_host_is_a_clear_error(tmp_path: Path) -> None:
    local, _ = machines(tmp_path)
    result = run_jp(local, "--remote", "nowhere", "conversation", "ls")
    assert result.returncode == 1
    assert "lost the connection to jpd on nowhere (ssh exited with code 255)" in result.stderr
    assert "Could not resolve hostname nowhere" in result.stderr  # ssh's own words


async def test_different_versions_on_the_two_machines_are_refused(
    tmp_path: Path, daemons: Daemons
) -> None:
    local, remote = machines(tmp_path)
    daemons.watch(remote)
    old_jp = tmp_path / "old-jp"
    old_jp.write_text(
        f"#!/bin/sh\nexec {sys.executable} -c "
        "\"import sys, jpcli.proxy as p; p.__version__ = '0.0.1'; sys.exit(p.main())\"\n"
    )
    old_jp.chmod(0o755)
    result = await run_jp_async(
        local | {"JP_REMOTE_JP": str(old_jp)}, "--remote", "devbox", "conversation", "ls"
    )
    assert result.returncode == 1
    assert "version mismatch: the client runs jp" in result.stderr
    assert "runs jp 0.0.1; install the same version on both machines" in result.stderr
    # Refused before anything reached the remote daemon: none was started.
    assert not Path(remote["JP_SOCKET"]).exists()


def test_the_proxy_refuses_another_version_with_a_json_rpc_error(tmp_path: Path) -> None:
    _, remote = machines(tmp_path)
    body = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 7,
            "method": "initialize",
            "params": {"protocolVersion": 1, "clientInfo": {"name": "jp", "version": "9.9.9"}},
        }
    ).encode()
    frame = b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
    done = subprocess.run(
        [sys.executable, "-m", "jpcli", "proxy"],
        input=frame,
        capture_output=True,
        env=remote,
        cwd=ROOT,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1
    reply = json.loads(done.stdout.split(b"\r\n\r\n", 1)[1])
    assert reply["id"] == 7 and reply["error"]["code"] == -32602
    assert "the client runs jp 9.9.9" in reply["error"]["message"]


async def test_an_editor_drives_a_remote_turn_through_jp_acp(
    tmp_path: Path, daemons: Daemons
) -> None:
    local, remote = machines(tmp_path)
    daemons.watch(remote)
    app = tmp_path / "devbox" / "app"
    app.mkdir()
    editor = Editor()
    with (tmp_path / "acp.log").open("ab") as stderr:
        async with spawn_agent_process(
            editor,
            sys.executable,
            "-m",
            "jpcli",
            "--remote",
            f"devbox:{app}",
            "acp",
            env=local,
            cwd=ROOT,
            transport_kwargs={"stderr": stderr.fileno()},
            use_unstable_protocol=True,
            observers=[editor.observe],
        ) as (conn, _process):
            await conn.initialize(protocol_version=1)
            # The editor's own directory means nothing there: the remote workspace is used.
            session = await conn.new_session(cwd=str(tmp_path / "laptop"), mcp_servers=[])
            response = await conn.prompt(
                session_id=session.session_id,
                prompt=[{"type": "text", "text": "hello"}],
            )
            assert response.stop_reason == "end_turn"
            assert "ok" in editor.text()
    (conversation,) = os.listdir(Path(remote["JP_DATA_DIR"]) / "conversations")
    assert conversation == session.session_id
    meta = json.loads(
        (Path(remote["JP_DATA_DIR"]) / "conversations" / conversation / "metadata.json").read_text()
    )
    assert meta.get("workspace") == str(app)


@pytest.fixture(autouse=True)
def _no_inherited_remote(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("JP_REMOTE", raising=False)


async def test_ctrl_c_cancels_the_remote_turn_over_the_same_connection(
    tmp_path: Path, daemons: Daemons
) -> None:
    """Ctrl-C reaches jp and ssh alike (one process group): ssh must survive it so that jp
    can still cancel the turn there."""
    local, remote = machines(tmp_path, [{"text": "tick " * 200, "chunk": 5, "delay_ms": 50}])
    daemons.watch(remote)
    process = await asyncio.to_thread(
        subprocess.Popen,
        [sys.executable, "-m", "jpcli", "--remote", "devbox", "query", "go"],
        cwd=ROOT,
        env=local,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,  # its own group, as a shell gives a foreground job
    )
    conversations = Path(remote["JP_DATA_DIR"]) / "conversations"

    def streaming() -> bool:
        found = list(conversations.glob("*/events.jsonl")) if conversations.exists() else []
        return bool(found) and "chat_checkpoint" in found[0].read_text()

    await wait_for(streaming, "the remote turn to stream")
    os.killpg(process.pid, signal.SIGINT)  # the terminal's Ctrl-C: the whole group
    _out, err = await asyncio.to_thread(process.communicate, timeout=60)
    assert process.returncode == 130, err
    (conversation,) = os.listdir(conversations)
    ends = [e for e in persisted(remote, conversation) if e["type"] == "turn_end"]
    assert [e["stop_reason"] for e in ends] == ["cancelled"]


async def test_a_question_waiting_there_is_listed_and_answered_from_here(
    tmp_path: Path, daemons: Daemons
) -> None:
    """A detached turn on devbox asks a question (deferred: nobody is attached); this
    machine lists it and answers it over ssh, and the turn goes on there."""
    local, remote = machines(tmp_path, [tool_call("asker"), {"text": "done"}])
    add_tool(remote, "asker", SHIP_IT)
    daemons.watch(remote)
    env = local | {"JP_REMOTE": "devbox"}
    started = await run_jp_async(env, "query", "--detach", "go")
    assert started.returncode == 0, started.stderr

    async def pending() -> str:
        listed = await run_jp_async(env, "inquiry", "ls")
        assert listed.returncode == 0, listed.stderr
        return listed.stdout

    for _ in range(100):
        if "call_1.q.1" in (listing := await pending()):
            break
        await asyncio.sleep(0.1)
    assert "Ship it?" in listing
    answered = await run_jp_async(env, "inquiry", "answer", "call_1.q.1", "true")
    assert answered.returncode == 0, answered.stderr
    (conversation,) = os.listdir(Path(remote["JP_DATA_DIR"]) / "conversations")

    def finished() -> bool:
        return any(e["type"] == "turn_end" for e in persisted(remote, conversation))

    await wait_for(finished, "the remote turn to end")
    (result,) = [e for e in persisted(remote, conversation) if e["type"] == "tool_call_response"]
    assert result["content"].strip() == "got=true"


def test_config_set_edits_the_remote_machines_files(tmp_path: Path) -> None:
    """`jp --remote HOST config set` runs `jp config set` there (its config, its
    workspace); nothing changes here."""
    local, remote = machines(tmp_path)
    workspace = Path(remote["HOME"]) / "app"
    workspace.mkdir()
    before_here = Path(local["JP_CONFIG"]).read_text()
    done = run_jp(local, "--remote", "devbox", "config", "set", "aliases.fast", "test/scripted")
    assert done.returncode == 0, done.stderr
    assert 'fast = "test/scripted"' in Path(remote["JP_CONFIG"]).read_text()
    assert Path(local["JP_CONFIG"]).read_text() == before_here

    at = f"devbox:{workspace}"
    done = run_jp(local, "--remote", at, "config", "set", "--workspace", "--", "aliases.x", "-y")
    assert done.returncode == 0, done.stderr
    assert 'x = "-y"' in (workspace / ".jp" / "config.toml").read_text()

    done = run_jp(local, "--remote", "devbox", "config", "unset", "aliases.fast")
    assert done.returncode == 0, done.stderr
    assert "fast" not in Path(remote["JP_CONFIG"]).read_text()
    missing = run_jp(local, "--remote", "devbox", "config", "unset", "aliases.fast")
    assert missing.returncode != 0 and "not set" in missing.stderr
