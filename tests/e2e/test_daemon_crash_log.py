"""A daemon killed by a fatal signal leaves its traceback in its log, and `jp` shows it."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

from tests.e2e.sockets import ROOT, Daemons, run_jp_async, socket_env, wait_for

SLOW = {"text": "tick " * 200, "chunk": 5, "delay_ms": 100}


async def test_jp_shows_why_the_daemon_died(tmp_path: Path, daemons: Daemons) -> None:
    env = socket_env(tmp_path, [SLOW])
    daemon = await daemons.start(env)
    query = asyncio.ensure_future(run_jp_async(env, "query", "tell a story"))
    conversations = Path(env["JP_DATA_DIR"]) / "conversations"
    await wait_for(lambda: any(conversations.glob("*/events.jsonl")), "the turn to start")
    os.kill(daemon.process.pid, signal.SIGSEGV)
    result = await query
    assert result.returncode == 1
    log = Path(env["JP_LOG_DIR"]) / "jpd.log"
    assert "Fatal Python error: Segmentation fault" in log.read_text()
    first, *shown = result.stderr.splitlines()
    assert first.startswith("jp: error: lost the connection to jpd on ")
    assert first.endswith(f"; the end of {log} says:")
    assert shown[0] == "  Fatal Python error: Segmentation fault"
    assert any("most recent call first" in line for line in shown)
    assert 2 < len(shown) <= 12


def _children_running_jpd(parent: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            command = (entry / "cmdline").read_bytes().split(b"\0")
        except (OSError, IndexError, ValueError):
            continue
        if ppid == parent and b"jpd" in command:
            found.append(int(entry.name))
    return found


async def test_jp_stdio_shows_why_its_daemon_died(tmp_path: Path) -> None:
    """A private daemon (`jp --stdio`) has its stderr in the log: the trace goes there."""
    env = socket_env(tmp_path, [SLOW])
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "jpcli", "--stdio", "query", "tell a story",
        cwd=ROOT, env=env, stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    conversations = Path(env["JP_DATA_DIR"]) / "conversations"
    await wait_for(lambda: any(conversations.glob("*/events.jsonl")), "the turn to start")
    [daemon] = _children_running_jpd(process.pid)
    os.kill(daemon, signal.SIGABRT)
    _, stderr = await process.communicate()
    assert process.returncode == 1
    log = Path(env["JP_LOG_DIR"]) / "jpd.log"
    first, *shown = stderr.decode().splitlines()
    assert first.startswith("jp: error: daemon exited unexpectedly (exit code -6); ")
    assert first.endswith(f"the end of {log} says:")
    assert shown[0] == "  Fatal Python error: Aborted"
