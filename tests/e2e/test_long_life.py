"""Long life: a daemon that serves many conversations holds neither their files nor
their memory once they are idle (protocol.md section 8.1)."""

from __future__ import annotations

import asyncio
import os
import resource
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from tests.e2e.sockets import Daemons, SocketClient, socket_env

CONVERSATIONS = 1_000
FILE_LIMIT = 256


@pytest_asyncio.fixture
async def daemons() -> AsyncIterator[Daemons]:
    running = Daemons()
    yield running
    await running.stop_all()


def limit_open_files() -> None:
    """Runs in the daemon's process before it starts (`preexec_fn`)."""
    resource.setrlimit(resource.RLIMIT_NOFILE, (FILE_LIMIT, FILE_LIMIT))


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc")
async def test_a_thousand_conversations_under_a_256_file_limit(
    tmp_path: Path, daemons: Daemons
) -> None:
    env = socket_env(tmp_path, [{"text": "ok"}] * CONVERSATIONS)
    daemon = await daemons.start(env, preexec_fn=limit_open_files)
    client = await SocketClient.connect(daemon.socket)
    await client.initialize()
    baseline = open_fds(daemon.process.pid)
    gate = asyncio.Semaphore(8)

    async def converse(n: int) -> str:
        async with gate:
            started = await client.request("turn/start", {"message": f"hello {n}"})
            done = await client.wait_completed(started["turnId"])
            assert done["event"] == {"kind": "turn_completed", "stopReason": "end_turn"}
            detached = {"conversationId": started["conversationId"]}
            assert await client.request("turn/detach", detached) == {"detached": True}
            return str(started["conversationId"])

    ids = await asyncio.gather(*(converse(n) for n in range(CONVERSATIONS)))
    assert len(set(ids)) == CONVERSATIONS
    listed = (await client.request("conversation/list"))["conversations"]
    assert len(listed) == CONVERSATIONS
    assert {c["eventCount"] for c in listed} == {4}  # turn_start, request, response, end
    # Idle conversations hold no file: the daemon is back where it started.
    assert open_fds(daemon.process.pid) <= baseline + 2
    await client.close()
    assert await daemon.stop() == 0
