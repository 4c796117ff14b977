"""Tests for `jpd.core.hub`: seqs, bounded replay, and idle conversations moved to disk."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest

from jpd.conversation.replay import ReplayFiles, filed
from jpd.core.hub import RESERVE_BLOCK, EventHub
from jpd.protocol.base import WireModel
from jpd.protocol.client_port import ClientCapabilities, Notification
from jpd.protocol.method_table import TURN_EVENT, ServerNotification, ServerRequest
from jpd.protocol.turn_events import TurnCompleted

CID = "c-hub"


@dataclass
class FakeLink:
    link_id: int
    capabilities: ClientCapabilities = field(default_factory=ClientCapabilities)
    workspace_root: Path | None = None
    received: list[dict[str, Any]] = field(default_factory=list)

    def notify(self, method: ServerNotification[Any], params: WireModel) -> None:
        self.send(Notification(method, params))

    def send(self, notification: Notification) -> None:
        assert notification.method is TURN_EVENT
        self.received.append(notification.wire)

    async def request(self, method: ServerRequest[Any, Any], params: WireModel) -> Any:
        raise AssertionError("no requests expected")

    def seqs(self) -> list[int]:
        return [p["seq"] for p in self.received]

    def texts(self) -> list[str]:
        return [p["event"].get("text", p["event"]["kind"]) for p in self.received]


def make_hub(tmp_path: Path, limit: int = 100) -> tuple[EventHub, ReplayFiles]:
    files = ReplayFiles(tmp_path / "replay")
    files.reset()
    hub = EventHub(files, replay_limit=limit)
    hub.prepare_new(CID)  # named by this daemon, as `turn/start` names a new one
    return hub, files


def named(hub: EventHub, cid: str = CID) -> None:
    """A conversation unknown to `hub` and without a mark is named by it, as `turn/start`
    names a new one (its seqs start at 1; one named by another run starts above)."""
    marks = hub._marks
    if cid not in hub._channels and cid not in marks.idle and marks.files.mark(cid) is None:
        hub.prepare_new(cid)


def turn(hub: EventHub, turn_id: str, *texts: str, cid: str = CID) -> None:
    named(hub, cid)
    publish_delta = hub.delta_sender(cid, turn_id)  # as a turn publishes its text
    for text in texts:
        publish_delta("text_delta", text)
    hub.publish(cid, turn_id, TurnCompleted(stop_reason="end_turn"))


async def test_settle_frees_memory_and_attach_replays_from_the_file(tmp_path: Path) -> None:
    hub, files = make_hub(tmp_path)
    live = FakeLink(1)
    named(hub)
    hub.subscribe(CID, live)
    turn(hub, "t-1", "a", "b")
    await hub.settle(CID)  # a client follows: nothing moves
    assert hub._channels[CID].buffer
    assert hub.unsubscribe(CID, live)
    await hub.settle(CID)
    assert CID not in hub._channels  # only (next seq, file start) is left in memory
    assert [e["seq"] for e in files.read(CID, 0)] == [1, 2, 3]

    # Seqs continue across the move; replay reads the file, then memory.
    turn(hub, "t-2", "c")
    late = FakeLink(2)
    assert await hub.attach(CID, late, 0) == (5, 1)
    assert late.seqs() == [1, 2, 3, 4, 5]
    assert late.received == live.received + late.received[3:]
    assert late.texts() == ["a", "b", "turn_completed", "c", "turn_completed"]


async def test_replay_after_a_seq_and_without_one(tmp_path: Path) -> None:
    hub, _ = make_hub(tmp_path)
    turn(hub, "t-1", "a", "b", "c")
    await hub.settle(CID)
    partial = FakeLink(1)
    assert await hub.attach(CID, partial, 2) == (4, 1)
    assert partial.seqs() == [3, 4]
    quiet = FakeLink(2)
    assert await hub.attach(CID, quiet, None) == (4, 1)
    assert quiet.received == []
    turn(hub, "t-2", "d")
    assert quiet.seqs() == partial.seqs()[2:] == [5, 6]


async def test_the_replay_limit_holds_across_files_and_memory(tmp_path: Path) -> None:
    hub, files = make_hub(tmp_path, limit=4)
    turn(hub, "t-1", "a", "b")  # seqs 1-3
    await hub.settle(CID)
    turn(hub, "t-2", "c", "d")  # seqs 4-6: only 3..6 are kept
    assert hub.oldest_seq(CID) == 3
    reader = FakeLink(1)
    assert await hub.attach(CID, reader, 0) == (6, 3)
    assert reader.seqs() == [3, 4, 5, 6]
    hub.unsubscribe(CID, reader)
    await hub.settle(CID)
    assert [e["seq"] for e in files.read(CID, 0)] == [3, 4, 5, 6]


async def test_nothing_kept_when_the_limit_is_zero(tmp_path: Path) -> None:
    hub, files = make_hub(tmp_path, limit=0)
    turn(hub, "t-1", "a")
    await hub.settle(CID)
    assert hub.oldest_seq(CID) == 3 and files.read(CID, 0) == []
    reader = FakeLink(1)
    assert await hub.attach(CID, reader, 0) == (2, 3)
    assert reader.received == []


async def test_events_published_while_filing_stay_in_memory(tmp_path: Path) -> None:
    hub, files = make_hub(tmp_path)
    turn(hub, "t-1", "a")
    real_write = files.write

    def slow_write(*args: Any, **kwargs: Any) -> int:
        # A new turn publishes while the old one's events are being written.
        anyio.from_thread.run_sync(turn, hub, "t-2", "b")
        return real_write(*args, **kwargs)

    files.write = slow_write  # type: ignore[method-assign]
    await hub.settle(CID)
    assert [p.seq for p in hub._channels[CID].buffer] == [3, 4]
    reader = FakeLink(1)
    await hub.attach(CID, reader, 0)
    assert reader.seqs() == [1, 2, 3, 4]


async def test_a_followed_conversation_settles_without_waiting_for_a_filing(
    tmp_path: Path,
) -> None:
    hub, files = make_hub(tmp_path)
    follower = FakeLink(1)
    named(hub, "c-followed")
    hub.subscribe("c-followed", follower)
    turn(hub, "t-1", "a", cid="c-followed")
    turn(hub, "t-2", "b", cid="c-idle")
    async with hub._filing:  # another conversation's events are being filed
        with anyio.fail_after(5):
            await hub.settle("c-followed")  # nothing to file: no wait
    assert [p.seq for p in hub._channels["c-followed"].buffer] == [1, 2]  # kept
    # Its follower leaves: the settle that follows files its events.
    hub.unsubscribe("c-followed", follower)
    await hub.settle("c-followed")
    await hub.settle("c-idle")
    assert "c-followed" not in hub._channels and "c-idle" not in hub._channels
    assert [e["seq"] for e in files.read("c-followed", 0)] == [1, 2]
    assert files.read_mark("c-followed") == (3, 1)


async def test_a_disconnected_client_is_dropped_everywhere(tmp_path: Path) -> None:
    hub, _ = make_hub(tmp_path)
    link = FakeLink(1)
    hub.subscribe("c-one", link)
    hub.subscribe("c-two", link)
    assert sorted(hub.drop(link)) == ["c-one", "c-two"]
    assert hub.subscribers("c-one") == hub.subscribers("c-two") == []


async def test_forget_removes_the_file_and_restarts_seqs(tmp_path: Path) -> None:
    hub, files = make_hub(tmp_path)
    turn(hub, "t-1", "a")
    await hub.settle(CID)
    await hub.forget(CID)
    assert files.read(CID, 0) == [] and not (tmp_path / "replay" / f"{CID}.jsonl").exists()
    assert not (tmp_path / "replay" / f"{CID}.seq").exists()
    # Without its mark it is as one named by another run: above that run's first block.
    assert hub.subscribe(CID, FakeLink(1)) == RESERVE_BLOCK


def test_reset_forgets_an_earlier_run(tmp_path: Path) -> None:
    files = ReplayFiles(tmp_path / "replay")
    files.reset()
    files.write(CID, [filed({"seq": 1, "event": {}})], 1)
    assert len(files.read(CID, 0)) == 1
    ReplayFiles(tmp_path / "replay").reset()
    assert files.read(CID, 0) == []


@pytest.mark.parametrize("bad", ["../x", "a/b"])
def test_replay_files_refuse_unsafe_ids(tmp_path: Path, bad: str) -> None:
    files = ReplayFiles(tmp_path / "replay")
    with pytest.raises(ValueError):
        files.read(bad, 0)


def test_a_filed_line_is_the_params_as_sent(tmp_path: Path) -> None:
    """The replay file holds each event's params exactly as its notification sent them
    (sliced from the sent bytes, not encoded again): a delta, another event, and text
    that needs escaping."""
    from jpd.protocol.turn_events import TurnEventParams
    from jpd.protocol.turn_notes import DeltaNotes, TurnEventNote

    delta = DeltaNotes(CID, "t-1").note(1, "text_delta", 'é "q" \u2028 \ud800')
    other = TurnEventNote(
        TurnEventParams.model_validate(
            {
                "conversationId": CID,
                "turnId": "t-1",
                "seq": 2,
                "event": {"kind": "turn_started", "model": "a/é"},
            }
        )
    )
    for note in (delta, other):
        assert note.params_json() == filed(note.wire)[1]
        assert json.loads(note.body)["params"] == json.loads(note.params_json())
