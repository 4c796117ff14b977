"""A daemon killed by a fatal signal leaves its traceback in its log, and `jp` shows it."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

from tests.e2e.sockets import Daemons, run_jp_async, socket_env, wait_for

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
