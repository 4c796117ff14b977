"""Issue 35 (9): the replay is bounded in bytes, in memory and in its file, without gaps."""

from __future__ import annotations

from pathlib import Path

from jpd.conversation.replay import ReplayFiles
from jpd.core.hub import EventHub
from jpd.protocol.turn_events import ToolProgress, TurnCompleted
from tests.unit.test_hub import FakeLink

CID = "c-bytes"
CHUNK = "x" * 64 * 1024
BOUND = 1024 * 1024


async def test_large_events_are_bounded_in_bytes_and_replayed_without_gaps(
    tmp_path: Path,
) -> None:
    files = ReplayFiles(tmp_path / "replay")
    files.reset()
    hub = EventHub(files, replay_limit=10_000, replay_bytes=BOUND)
    hub.prepare_new(CID)
    for n in range(200):  # 12.5 MiB of live output
        hub.publish(CID, "t-1", ToolProgress(id="call", progress=n, message=CHUNK))
    hub.publish(CID, "t-1", TurnCompleted(stop_reason="end_turn"))
    channel = hub._channels[CID]
    assert channel.size <= BOUND and len(channel.buffer) < 20
    oldest = hub.oldest_seq(CID)
    assert oldest == channel.buffer[0].seq > 150

    await hub.settle(CID)  # idle: to the file, still bounded
    assert CID not in hub._channels
    assert (tmp_path / "replay" / f"{CID}.jsonl").stat().st_size <= BOUND
    second = hub.oldest_seq(CID)
    assert second >= oldest

    for n in range(50):
        hub.publish(CID, "t-2", ToolProgress(id="call2", progress=n, message=CHUNK))
    late = FakeLink(1)
    last, first = await hub.attach(CID, late, 0)
    assert last == 251
    seqs = late.seqs()
    assert seqs == list(range(first, last + 1))  # what is replayed has no gap
    assert sum(len(e["event"].get("message") or "") for e in late.received) <= 2 * BOUND
