"""Issue 35 (8, 9) through the real daemon: a FIFO is a tool error, `turn/cancel` ends a
turn stuck in a tool, and 200 MB of command output leaves the daemon and its data small."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests.e2e.conftest import StartJpd
from tests.e2e.tools import make_tool, tool_toml
from tests.e2e.tools import tool_call as call

CONFIG = '[conversation.tools.run_command]\nrun = "unattended"\n'


def rss_kib(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise AssertionError(f"no {field} for {pid}")


def git(*args: str, cwd: Path) -> None:
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
    )


async def test_listing_a_hostile_repository_in_read_only_runs_nothing(
    jpd_factory: StartJpd, tmp_path: Path
) -> None:
    """An embedded bare repository and a `.git/config` a command wrote both name a
    payload as `core.fsmonitor`: listing and searching, in `read-only`, runs neither."""
    marker = tmp_path / "RAN"
    payload = tmp_path / "payload.sh"
    payload.write_text(f"#!/bin/sh\nenv > '{marker}'\n")
    payload.chmod(0o755)
    workspace = tmp_path / "ws"
    evil = workspace / "docs" / "evil"
    (evil / "objects").mkdir(parents=True)
    (evil / "refs").mkdir()
    (evil / "HEAD").write_text("ref: refs/heads/main\n")
    (evil / "config").write_text(
        f"[core]\n\tbare = false\n\tworktree = .\n\tfsmonitor = {payload}\n"
    )
    (workspace / "main.py").write_text("needle = 1\n")
    git("init", "-q", ".", cwd=workspace)
    git("add", "-A", cwd=workspace)
    git("commit", "-qm", "hostile", cwd=workspace)
    with (workspace / ".git" / "config").open("a") as config:
        config.write(f"[core]\n\tfsmonitor = {payload}\n")
    daemon = await jpd_factory(
        responses=[
            call("fs_list_files"),
            call("fs_list_files", path="docs/evil"),
            call("fs_grep_files", pattern="needle"),
            {"text": "done"},
        ]
    )
    await daemon.initialize(workspaceRoot=str(workspace))
    _, events = await daemon.run_turn("look", mode="read-only")
    assert events[-1]["event"]["stopReason"] == "end_turn"
    results = [e["event"] for e in events if e["event"]["kind"] == "tool_result"]
    assert [r["isError"] for r in results] == [False, False, False]
    assert "main.py" in results[0]["content"].splitlines()
    assert "docs/evil/config" in results[1]["content"].splitlines()
    assert results[2]["content"] == "main.py:1: needle = 1"
    assert not marker.exists()


def tree_size(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())


async def test_reading_a_fifo_is_a_tool_error_and_the_turn_goes_on(
    jpd_factory: StartJpd, tmp_path: Path
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    os.mkfifo(workspace / "pipe.txt")
    daemon = await jpd_factory(
        responses=[call("fs_read_file", path="pipe.txt"), {"text": "done"}], config=CONFIG
    )
    await daemon.initialize(workspaceRoot=str(workspace))
    _, events = await daemon.run_turn("read it")
    assert events[-1]["event"]["stopReason"] == "end_turn"
    [result] = [e["event"] for e in events if e["event"]["kind"] == "tool_result"]
    assert result["isError"] and "FIFO" in result["content"]


async def test_turn_cancel_ends_a_turn_stuck_in_a_tool(
    jpd_factory: StartJpd, tmp_path: Path
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    daemon = await jpd_factory(
        responses=[call("run_command", command="echo STARTED; sleep 600"), {"text": "x"}],
        config=CONFIG,
    )
    await daemon.initialize(workspaceRoot=str(workspace))
    started = await daemon.request("turn/start", {"message": "hang"})
    await daemon.wait_event(started["turnId"], "tool_progress")
    assert (await daemon.request("turn/cancel", {"turnId": started["turnId"]}))["cancelled"]
    done = await daemon.wait_event(started["turnId"], "turn_completed", timeout=60)
    assert done["event"]["stopReason"] == "cancelled"
    assert (await daemon.request("turn/list"))["turns"] == []


async def test_200_mb_of_output_keeps_the_daemon_and_its_data_small(
    jpd_factory: StartJpd, home: Path, tmp_path: Path
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    command = "echo FIRST-LINE; yes 0123456789abcdef | head -c 200000000; echo; echo LAST-LINE"
    daemon = await jpd_factory(
        responses=[call("run_command", command=command, timeout_secs=600), {"text": "done"}],
        config=CONFIG,
    )
    await daemon.initialize(workspaceRoot=str(workspace))
    pid = daemon.process.pid
    before = rss_kib(pid, "VmRSS")
    _, events = await daemon.run_turn("flood")
    peak = rss_kib(pid, "VmHWM")
    assert events[-1]["event"]["stopReason"] == "end_turn"
    [result] = [e["event"] for e in events if e["event"]["kind"] == "tool_result"]
    content = result["content"]
    # The model sees the head, the tail and how much was left out between.
    assert "FIRST-LINE" in content and "LAST-LINE" in content
    assert "bytes left out" in content and len(content) < 100_000
    progress = [e["event"] for e in events if e["event"]["kind"] == "tool_progress"]
    streamed = sum(len(p.get("message") or "") for p in progress)
    assert streamed < 2 * 1024 * 1024 and len(progress) < 1000
    assert "live output stops" in "".join(p.get("message") or "" for p in progress)
    assert (peak - before) * 1024 < 150 * 1024 * 1024
    await daemon.stop()  # the replay goes to its file
    assert tree_size(home / "data") < 5 * 1024 * 1024
    assert "bytes left out" in (home / "requests.jsonl").read_text()


async def test_a_local_tools_long_output_keeps_its_head_and_tail(
    jpd_factory: StartJpd, tmp_path: Path
) -> None:
    body = 'print("HEAD-" + "x" * 50_000 + "-TAIL")'
    command = make_tool(tmp_path, "loud", body)
    daemon = await jpd_factory(
        responses=[call("loud"), {"text": "done"}],
        config=tool_toml("loud", command, run='"unattended"', max_output="2048"),
    )
    await daemon.initialize(workspaceRoot=str(tmp_path))
    _, events = await daemon.run_turn("shout")
    [result] = [e["event"] for e in events if e["event"]["kind"] == "tool_result"]
    content = result["content"]
    assert content.startswith("HEAD-") and content.rstrip().endswith("-TAIL")
    assert "bytes left out" in content and len(content) < 3000
