"""Tool processes die with the daemon, and tools never see secrets they were not given
(protocol.md section 9.4, "Tool processes" and "Environment")."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from jpd.process_groups import ToolProcesses, reap_orphans, start_time
from jpd.tools.environment import tool_environment

# --- environment -----------------------------------------------------------------


def test_only_allowed_variables_reach_a_tool() -> None:
    base = {
        "PATH": "/bin",
        "HOME": "/home/u",
        "ANTHROPIC_API_KEY": "sk-a",
        "GITHUB_TOKEN": "ghp",
        "DB_PASSWORD": "pw",
        "aws_secret_access_key": "x",
        "MY_LLM_CREDENTIAL": "c",
        "LANG": "C",
        "LC_ALL": "C.UTF-8",
        # Secrets whose names a denylist would let through.
        "DATABASE_URL": "postgres://u:pw@db/x",
        "SSH_AUTH_SOCK": "/tmp/agent.sock",
        "AWS_PROFILE": "prod",
        "LD_PRELOAD": "/tmp/evil.so",
    }
    env = tool_environment(base, {}, provider_keys={"MY_LLM_CREDENTIAL"})
    assert env == {"PATH": "/bin", "HOME": "/home/u", "LANG": "C", "LC_ALL": "C.UTF-8"}


def test_a_provider_key_is_never_passed_through_by_true() -> None:
    base = {"PATH": "/bin", "ANTHROPIC_API_KEY": "sk-a"}
    configured: dict[str, str | bool] = {"ANTHROPIC_API_KEY": True}
    env = tool_environment(base, configured, provider_keys={"ANTHROPIC_API_KEY"})
    assert env == {"PATH": "/bin"}


def test_configured_variables_pass_through_are_set_or_removed() -> None:
    base = {"PATH": "/bin", "GITHUB_TOKEN": "ghp", "LANG": "C"}
    configured: dict[str, str | bool] = {
        "GITHUB_TOKEN": True,
        "MISSING": True,
        "MODE": "fast",
        "LANG": False,
    }
    assert tool_environment(base, configured) == {
        "PATH": "/bin",
        "GITHUB_TOKEN": "ghp",
        "MODE": "fast",
    }


# --- the lifeline -----------------------------------------------------------------

FAKE_DAEMON = """
import subprocess, sys, time
from pathlib import Path
from jpd.process_groups import ToolProcesses

processes = ToolProcesses(Path(sys.argv[1]))
argv, fds = processes.command([sys.executable, sys.argv[2]])
tool = subprocess.Popen(argv, pass_fds=fds, start_new_session=True)
processes.started(tool.pid)
print(tool.pid, flush=True)
time.sleep(600)
"""

TOOL = """
import os, subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
with open(sys.argv[0] + ".pids", "w") as out:
    out.write(f"{os.getpid()} {child.pid}")
time.sleep(600)
"""


def running(pid: int) -> bool:
    state = start_time(pid)
    return state is not None


def wait_until(predicate: object, limit: float = 20.0) -> bool:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return True
        time.sleep(0.02)
    return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc")
def test_a_killed_daemon_takes_its_tools_and_their_children_along(tmp_path: Path) -> None:
    tool = tmp_path / "tool.py"
    tool.write_text(TOOL)
    daemon = subprocess.Popen(
        [sys.executable, "-c", FAKE_DAEMON, str(tmp_path / "data"), str(tool)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert daemon.stdout is not None
        launcher = int(daemon.stdout.readline())
        pids_file = Path(str(tool) + ".pids")
        assert wait_until(pids_file.exists)
        tool_pid, child_pid = map(int, pids_file.read_text().split())
        record = json.loads((tmp_path / "data" / "run" / f"tools-{daemon.pid}.json").read_text())
        assert record["groups"] == {str(launcher): start_time(launcher)}
        daemon.send_signal(signal.SIGKILL)
        daemon.wait()
        assert wait_until(
            lambda: not running(tool_pid) and not running(child_pid) and not running(launcher)
        )
    finally:
        if daemon.poll() is None:
            daemon.kill()
        daemon.wait()


def sleeper_group() -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True
    )


def write_record(
    data_dir: Path, daemon: dict[str, int | None], groups: dict[str, int | None]
) -> Path:
    record = data_dir / "run" / "tools-999999.json"
    record.parent.mkdir(parents=True, exist_ok=True)
    record.write_text(json.dumps({"daemon": daemon, "groups": groups}))
    return record


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc")
def test_a_restarted_daemon_kills_the_groups_its_previous_life_left(tmp_path: Path) -> None:
    group = sleeper_group()
    try:
        gone = {"pid": 999999, "start": 1}
        record = write_record(tmp_path, gone, {str(group.pid): start_time(group.pid)})
        assert reap_orphans(tmp_path) == 1
        assert group.wait(10) == -signal.SIGKILL
        assert not record.exists()
    finally:
        if group.poll() is None:
            group.kill()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc")
def test_a_reused_pid_is_never_killed(tmp_path: Path) -> None:
    group = sleeper_group()
    try:
        started = start_time(group.pid)
        assert started is not None
        write_record(tmp_path, {"pid": 999999, "start": 1}, {str(group.pid): started - 1})
        assert reap_orphans(tmp_path) == 0
        assert group.poll() is None
    finally:
        group.kill()
        group.wait()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc")
def test_the_groups_of_a_live_daemon_are_left_alone(tmp_path: Path) -> None:
    group = sleeper_group()
    other = sleeper_group()  # stands for another daemon that still runs
    try:
        live = {"pid": other.pid, "start": start_time(other.pid)}
        write_record(tmp_path, live, {str(group.pid): start_time(group.pid)})
        assert reap_orphans(tmp_path) == 0
        assert group.poll() is None
    finally:
        for process in (group, other):
            process.kill()
            process.wait()


def test_records_are_removed_when_no_group_runs(tmp_path: Path) -> None:
    processes = ToolProcesses(tmp_path)
    try:
        group = sleeper_group()
        processes.started(group.pid)
        record = tmp_path / "run" / f"tools-{os.getpid()}.json"
        assert record.exists()
        assert oct(record.stat().st_mode & 0o777) == oct(0o600)
        group.kill()
        group.wait()
        processes.ended(group.pid)
        assert not record.exists()
    finally:
        processes.close()


def test_the_launcher_reports_what_cannot_be_executed(tmp_path: Path) -> None:
    processes = ToolProcesses(tmp_path)
    try:
        argv, fds = processes.command(["/nonexistent/program"])
        result = subprocess.run(argv, pass_fds=fds, capture_output=True, text=True, check=False)
        assert result.returncode == 127
        assert "cannot execute: /nonexistent/program" in result.stderr
    finally:
        processes.close()
