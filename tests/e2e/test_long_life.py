"""Long life: a daemon that serves many conversations holds neither their files nor
their memory once they are idle (protocol.md section 8.1)."""

from __future__ import annotations

import asyncio
import os
import resource
from pathlib import Path

import pytest

from tests.e2e.sockets import Daemons, SocketClient, socket_env, wait_for

CONVERSATIONS = 1_000
FILE_LIMIT = 256


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


async def test_idle_conversation_events_move_to_disk_and_replay_exactly(
    tmp_path: Path, daemons: Daemons
) -> None:
    env = socket_env(tmp_path, [{"text": "abcdef", "chunk": 1}, {"text": "ghij", "chunk": 2}])
    daemon = await daemons.start(env)
    first = await SocketClient.connect(daemon.socket)
    await first.initialize()
    started = await first.request("turn/start", {"message": "one"})
    conversation_id = started["conversationId"]
    await first.wait_completed(started["turnId"])
    await first.close()  # nobody follows the conversation and no turn runs: it is idle
    replay_file = tmp_path / "data" / "replay" / f"{conversation_id}.jsonl"
    await wait_for(replay_file.exists, "the idle conversation's events on disk")

    second = await SocketClient.connect(daemon.socket)
    await second.initialize()
    again = await second.request(
        "turn/start", {"message": "two", "conversationId": conversation_id}
    )
    await second.wait_completed(again["turnId"])
    # Seqs continue where the idle conversation stopped.
    seqs = [e["seq"] for e in first.events + second.events]
    assert seqs == list(range(1, len(seqs) + 1))
    await second.request("turn/detach", {"conversationId": conversation_id})

    reader = await SocketClient.connect(daemon.socket)
    await reader.initialize()
    attached = await reader.request(
        "turn/attach", {"conversationId": conversation_id, "fromSeq": 0}
    )
    everything = first.events + second.events
    assert attached["oldestSeq"] == 1 and attached["lastSeq"] == len(everything)
    assert reader.events == everything
    for client in (second, reader):
        await client.close()
    assert await daemon.stop() == 0
