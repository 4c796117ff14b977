"""The attacks of issue 35 (items 6 and 7) from inside `run_command`, as an unprivileged
user, in both cages: each must get nothing.

The victim is a real user made with `useradd` (so the test needs root), with a home,
an ssh key, a runtime dir holding jpd's socket, an ssh-agent style socket, an abstract
socket and another process of theirs. The call runs in a forked child that has become
that user, through the real machinery (launcher, bubblewrap, sandbox_exec.py); the
in-cage scripts run with the system Python, since the test's own interpreter may lie
under root's private home.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import anyio
import pytest

from jpd.process_groups import ToolProcesses
from jpd.tools import namespace_launcher
from jpd.tools.builtin import BuiltinContext
from jpd.tools.builtin.run_command import RunCommand
from jpd.tools.outcome import Failure, Success
from tests.cage_victim import (
    DAEMONIZE,
    NEEDS_VICTIM,
    PATH,
    SYSTEM_PYTHON,
    Victim,
    survivors,
    victim,
)

__all__ = ["victim"]  # the fixture
pytestmark = NEEDS_VICTIM


def _warm_up(cage: str) -> None:
    """Run once as root first: the child cannot import modules from root's home later."""
    base = Path(tempfile.mkdtemp(prefix="jpd-warm-"))
    (base / "ws").mkdir()
    ctx = BuiltinContext(
        conversation_id=None,
        tool_docs={},
        root=base / "ws",
        options={"cage": cage},
        env={"PATH": PATH},
        processes=ToolProcesses(base / "data"),
    )
    try:
        outcome = anyio.run(RunCommand().run, {"command": "true"}, {}, ctx)
        assert isinstance(outcome, Success), outcome
    finally:
        assert ctx.processes is not None
        ctx.processes.close()
        shutil.rmtree(base, ignore_errors=True)


def run_as(victim: Victim, command: str, options: dict[str, Any]) -> tuple[bool, str]:
    """`run_command` as the victim: (succeeded, content or message)."""
    _warm_up(options.get("cage", "auto"))
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            os.close(read_fd)
            os.setgroups([])
            os.setgid(victim.gid)
            os.setuid(victim.uid)
            os.environ.clear()
            os.environ.update(victim.env())
            os.chdir(victim.home)
            sys.executable = SYSTEM_PYTHON
            namespace_launcher._probed.clear()  # the victim's own probe
            processes = ToolProcesses(victim.home / ".local" / "share" / "jp")
            ctx = BuiltinContext(
                conversation_id=None,
                tool_docs={},
                root=victim.workspace,
                options=options,
                env=victim.env(),
                processes=processes,
            )
            outcome = anyio.run(RunCommand().run, {"command": command, "timeout_secs": 30}, {}, ctx)
            processes.close()
            if isinstance(outcome, Success):
                result = [True, outcome.content]
            else:
                assert isinstance(outcome, Failure)
                result = [False, outcome.message]
            os.write(write_fd, json.dumps(result).encode())
        except BaseException as error:
            os.write(write_fd, json.dumps([False, f"child failed: {error!r}"]).encode())
        finally:
            os._exit(0)
    os.close(write_fd)
    data = b""
    while chunk := os.read(read_fd, 65536):
        data += chunk
    os.close(read_fd)
    os.waitpid(pid, 0)
    ok, text = json.loads(data)
    return ok, text


CAGES = ["namespaces", "landlock"]


def attack(victim: Victim, cage: str, command: str) -> str:
    ok, text = run_as(victim, command, {"cage": cage})
    assert ok, text
    return text


@pytest.mark.parametrize("cage", CAGES)
def test_nothing_outside_the_workspace_changes(victim: Victim, cage: str) -> None:
    home, key, runtime = victim.home, victim.home / ".ssh" / "id_ed25519", victim.runtime
    before = {path: path.lstat() for path in (home, key, runtime / "jp", home / ".bashrc")}
    out = attack(
        victim,
        cage,
        f"echo pwned >> {home}/.bashrc; chmod 0777 {home}; chmod 0644 {key};"
        f" chmod 0777 {runtime}/jp; touch -d 2001-01-01 {home}/.bashrc;"
        f" setfacl -m o:rwx {home} 2>/dev/null; echo ok > inside.txt",
    )
    assert (victim.workspace / "inside.txt").read_text() == "ok\n", out
    assert (home / ".bashrc").read_text() == "# mine\n"
    for path, was in before.items():
        now = path.lstat()
        assert stat.S_IMODE(now.st_mode) == stat.S_IMODE(was.st_mode), path
        assert now.st_mtime == was.st_mtime, path


@pytest.mark.parametrize("cage", CAGES)
def test_no_signal_or_proc_read_reaches_the_users_other_processes(
    victim: Victim, cage: str
) -> None:
    def become() -> None:
        os.setgid(victim.gid)
        os.setuid(victim.uid)

    # The user's other process, e.g. the daemon, with an API key in its environment.
    env = {"PATH": PATH, "ANTHROPIC_API_KEY": "sk-ant-secret"}
    other = subprocess.Popen(["sleep", "600"], preexec_fn=become, env=env)
    try:
        out = attack(
            victim,
            cage,
            f"kill -STOP {other.pid}; kill -KILL {other.pid}; cat /proc/{other.pid}/environ;"
            f" cat /proc/{other.pid}/cmdline; echo done",
        )
        state = Path(f"/proc/{other.pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        assert state not in ("T", "Z", "X"), out
        assert "sk-ant-secret" not in out and "done" in out
        assert other.poll() is None
    finally:
        other.kill()
        other.wait()


CONNECT = (
    'python3 -c "import socket, sys\n'
    "s = socket.socket(socket.AF_UNIX)\n"
    "s.connect(sys.argv[1].replace('@', chr(0)))\n"
    "s.sendall(b'tool/call')\n"
    "print('CONNECTED')\" "
)


def _listen(victim: Victim, address: str) -> socket.socket:
    server = socket.socket(socket.AF_UNIX)
    server.bind(address)
    if not address.startswith("\0"):
        os.chown(address, victim.uid, victim.gid)
    server.listen()
    server.setblocking(False)
    return server


@pytest.mark.parametrize("cage", CAGES)
def test_no_unix_socket_reaches_out(victim: Victim, cage: str, tmp_path: Path) -> None:
    """jpd's own socket, an ssh-agent style socket in /tmp and an abstract one."""
    agent_dir = Path("/tmp") / f"ssh-jpdtest-{os.getpid()}"
    agent_dir.mkdir(exist_ok=True)
    os.chown(agent_dir, victim.uid, victim.gid)
    addresses = [
        str(victim.runtime / "jp" / "jpd.sock"),
        str(agent_dir / "agent.1"),
        f"\0jpd-test-abstract-{os.getpid()}",
    ]
    servers = [_listen(victim, address) for address in addresses]
    try:
        for address in addresses:
            out = attack(victim, cage, CONNECT + repr(address.replace("\0", "@")))
            assert "CONNECTED" not in out, (address, out)
        for server in servers:
            with pytest.raises(BlockingIOError):
                server.accept()
    finally:
        for server in servers:
            server.close()
        shutil.rmtree(agent_dir, ignore_errors=True)


@pytest.mark.parametrize("cage", CAGES)
def test_no_tcp_out(victim: Victim, cage: str) -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        server.setblocking(False)
        port = server.getsockname()[1]
        code = (
            f"import socket; socket.create_connection(('127.0.0.1', {port}), 2); print('CONNECTED')"
        )
        out = attack(victim, cage, f'python3 -c "{code}"')
        assert "CONNECTED" not in out
        with pytest.raises(BlockingIOError):
            server.accept()


@pytest.mark.parametrize("cage", CAGES)
def test_secrets_and_jpd_folders_are_hidden(victim: Victim, cage: str) -> None:
    (victim.runtime / "jp" / "jpd.pid").write_text("SECRET PID\n")
    (victim.workspace / "mine.txt").write_text("WORKSPACE FILE\n")
    (victim.home / "keys").symlink_to(victim.home / ".ssh")  # a way round by a link
    out = attack(
        victim,
        cage,
        f"cat {victim.home}/.ssh/id_ed25519 {victim.home}/keys/id_ed25519"
        f" {victim.runtime}/jp/jpd.pid; ls -A {victim.runtime} {victim.home}/.ssh;"
        f" cat mine.txt {victim.home}/.bashrc; python3 -c 'print(\"python runs\")';"
        " echo new > new.txt; cat new.txt; echo end",
    )
    assert "PRIVATE KEY" not in out and "SECRET PID" not in out
    # Everything else reads as before: the workspace, the rest of $HOME, the system.
    assert "WORKSPACE FILE" in out and "# mine" in out and "python runs" in out, out
    assert "new\n" in out and "end" in out
    if cage == "namespaces":  # the landlock cage hides contents, not names
        listed = out.split("stdout:", 1)[1].split("stderr:", 1)[0]
        assert "jpd.pid" not in listed and "id_ed25519" not in listed


def test_git_and_jp_are_read_only_inside_the_workspace(victim: Victim) -> None:
    ws = victim.workspace
    out = attack(
        victim,
        "namespaces",
        "printf '#!/bin/sh\\necho pwned\\n' > .git/hooks/pre-commit;"
        " chmod +x .git/hooks/pre-commit; echo '[core] fsmonitor = evil' >> .git/config;"
        " echo 'evil = 1' >> .jp/config.toml; mv .git .git-old; rm -rf .jp; echo edit > f.txt",
    )
    assert (ws / "f.txt").read_text() == "edit\n", out
    assert not (ws / ".git" / "hooks" / "pre-commit").exists()
    assert (ws / ".git" / "config").read_text() == "[core]\n"
    assert (ws / ".jp" / "config.toml").read_text() == "# trusted\n"


@pytest.mark.parametrize("cage", CAGES)
def test_a_setsid_double_fork_does_not_outlive_the_call(victim: Victim, cage: str) -> None:
    token = f"jpd-cage-setsid-{os.getpid()}-{cage}"
    script = victim.workspace / "daemonize.py"
    script.write_text(DAEMONIZE)
    out = attack(victim, cage, f"python3 daemonize.py {token}")
    assert "started" in out
    assert survivors(token) == []


def test_the_attacks_work_without_the_cage(victim: Victim) -> None:
    """The control: with `sandbox = "off"` and network on the same commands succeed, so
    the tests above fail for the right reason."""
    key = victim.home / ".ssh" / "id_ed25519"
    server = _listen(victim, str(victim.runtime / "jp" / "jpd.sock"))
    token = f"jpd-cage-control-{os.getpid()}"
    (victim.workspace / "daemonize.py").write_text(DAEMONIZE)
    try:
        ok, out = run_as(
            victim,
            f"chmod 0644 {key}; cat {key}; python3 daemonize.py {token}; "
            + CONNECT
            + repr(str(victim.runtime / "jp" / "jpd.sock")),
            {"sandbox": "off", "network": True},
        )
        assert ok and "PRIVATE KEY" in out and "CONNECTED" in out, out
        assert stat.S_IMODE(key.stat().st_mode) == 0o644
        server.accept()[0].close()
        # Even unconfined, the launcher (a subreaper) ends what the command left behind.
        assert survivors(token) == []
    finally:
        server.close()


@pytest.mark.parametrize("cage", CAGES)
def test_a_fork_bomb_meets_the_process_limit(victim: Victim, cage: str) -> None:
    """RLIMIT_NPROC counts all of the user's processes: the limit is what they run now
    plus `max_processes`, so the command gets that many more and no more."""
    ok, out = run_as(
        victim,
        "i=0; while [ $i -lt 60 ]; do sleep 30 & i=$((i+1)); done; echo spawned",
        {"cage": cage, "max_processes": 20},
    )
    assert ok and "Cannot fork" in out, out
