"""Shared by the long-life benches: a real `jpd` running many short scripted turns,
and the daemon's resident memory and open files read from `/proc` (Linux)."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.rpcclient import Client  # noqa: E402

# A short answer in several deltas, so each turn leaves a realistic replay buffer.
ANSWER = {"text": "The quick brown fox jumps over the lazy dog. " * 4, "chunk": 12}


def scripted_env(home: Path, turns: int) -> dict[str, str]:
    """Environment for a daemon whose scripted model answers `turns` times."""
    script = home / "script.json"
    script.write_text(json.dumps({"responses": [ANSWER] * turns}))
    config = home / "config.toml"
    config.write_text(
        f'[assistant.model]\nid = "test/x"\n[providers.test]\nscript = "{script}"\n'
        "[daemon]\nidle_timeout = 0\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JP_", "JPD_"))}
    env.update(JP_CONFIG=str(config), JP_DATA_DIR=str(home / "data"))
    env["JP_LOG_DIR"] = str(home / "logs")
    return env


def rss_kib(pid: int) -> int:
    """Resident set size of `pid` in KiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def open_fds(pid: int) -> int:
    """Open file descriptors of `pid`."""
    return len(os.listdir(f"/proc/{pid}/fd"))


class Soak:
    """One daemon on stdio; `run(n)` runs `n` more turns round-robin over conversations."""

    def __init__(self, client: Client, process: Any, conversations: int | None) -> None:
        self.client = client
        self.process = process
        self.conversations = conversations  # None: a new conversation for every turn
        self.ids: list[str] = []
        self.turns = 0

    @classmethod
    async def start(cls, env: dict[str, str], conversations: int | None) -> Soak:
        client, process = await Client.spawn(env)
        await client.initialize()
        return cls(client, process, conversations)

    async def run(self, n: int) -> None:
        for _ in range(n):
            existing = None
            if self.conversations is not None and len(self.ids) >= self.conversations:
                existing = self.ids[self.turns % self.conversations]
            conversation_id, _ = await self.client.turn(f"turn {self.turns}", existing)
            if existing is None:
                self.ids.append(conversation_id)
            # Nobody follows it any more: the conversation is idle, as after `jp query`.
            await self.client.request("turn/detach", {"conversationId": conversation_id})
            self.client.notifications.clear()
            self.turns += 1

    async def measure(self) -> tuple[int, int]:
        """(RSS KiB, open fds) once the daemon has settled the last turn."""
        await self.client.request("daemon/status")
        await asyncio.sleep(0.3)
        return rss_kib(self.process.pid), open_fds(self.process.pid)

    async def stop(self) -> None:
        await self.client.request("shutdown")
        await self.client.send({"jsonrpc": "2.0", "method": "exit"})
        await self.client.close()
        await asyncio.wait_for(self.process.wait(), 30)
