"""Tests for `EventHub.settle` when many conversations go idle at once: they share a
filing hop, each caller learns only its own conversation's error, and a conversation
named in this run is filed without reading a file or a mark it cannot have."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from jpd.conversation.replay import ReplayFiles, filed
from jpd.core.hub import EventHub
from tests.unit.test_hub import FakeLink, make_hub, turn


async def _settle_all(hub: EventHub, ids: list[str]) -> dict[str, BaseException]:
    errors: dict[str, BaseException] = {}

    async def one(cid: str) -> None:
        try:
            await hub.settle(cid)
        except OSError as exc:
            errors[cid] = exc

    async with anyio.create_task_group() as tg:
        for cid in ids:
            tg.start_soon(one, cid)
    return errors


async def test_conversations_settled_together_share_a_hop(tmp_path: Path) -> None:
    hub, files = make_hub(tmp_path)
    ids = [f"c-{i}" for i in range(6)]
    for i, cid in enumerate(ids):
        turn(hub, f"t-{i}", "a", "b", cid=cid)
    calls: list[list[str]] = []
    real = files.write_many

    def counted(jobs: list[Any], max_bytes: int | None) -> list[int | OSError]:
        calls.append([job[0] for job in jobs])
        return real(jobs, max_bytes)

    files.write_many = counted  # type: ignore[method-assign]
    assert await _settle_all(hub, ids) == {}
    assert sum(len(c) for c in calls) == len(ids)
    assert len(calls) < len(ids)  # at most the first alone, the rest together
    for cid in ids:
        assert cid not in hub._channels
        assert [e["seq"] for e in files.read(cid, 0)] == [1, 2, 3]
        assert files.read_mark(cid) == (4, 1)
        reader = FakeLink(1)
        await hub.attach(cid, reader, 0)
        assert reader.seqs() == [1, 2, 3]


async def test_each_caller_learns_only_its_own_error(tmp_path: Path) -> None:
    hub, files = make_hub(tmp_path)
    ids = ["c-ok", "c-bad", "c-ok2"]
    for i, cid in enumerate(ids):
        turn(hub, f"t-{i}", "a", cid=cid)
    real = files.write

    def failing(cid: str, *args: Any, **kwargs: Any) -> int:
        if cid == "c-bad":
            raise OSError("disk full")
        return real(cid, *args, **kwargs)

    files.write = failing  # type: ignore[method-assign]
    errors = await _settle_all(hub, ids)
    assert list(errors) == ["c-bad"]
    assert "c-bad" in hub._channels  # kept in memory: nothing lost
    assert [p.seq for p in hub._channels["c-bad"].buffer] == [1, 2]
    assert "c-ok" not in hub._channels and "c-ok2" not in hub._channels
    files.write = real  # type: ignore[method-assign]
    await hub.settle("c-bad")  # filed once the disk is back
    assert [e["seq"] for e in files.read("c-bad", 0)] == [1, 2]


async def test_a_conversation_named_here_is_filed_without_reading(tmp_path: Path) -> None:
    hub, files = make_hub(tmp_path)
    hub.prepare_new("c-new")
    await hub.prepare("c-old")  # from an earlier run: its file and mark are read
    turn(hub, "t-1", "a", cid="c-new")
    turn(hub, "t-2", "b", cid="c-old")
    reads: list[str] = []
    real_read, real_mark = files.read, files.read_mark

    def read(cid: str, after: int) -> list[dict[str, Any]]:
        reads.append(cid)
        return real_read(cid, after)

    def read_mark(cid: str) -> tuple[int, int | None]:
        reads.append(cid)
        return real_mark(cid)

    files.read, files.read_mark = read, read_mark  # type: ignore[method-assign]
    await _settle_all(hub, ["c-new", "c-old"])
    assert "c-new" not in reads and "c-old" in reads
    # Its next turn's filing reads what the first one wrote, and keeps it.
    turn(hub, "t-3", "c", cid="c-new")
    await hub.settle("c-new")
    assert "c-new" in reads
    files.read, files.read_mark = real_read, real_mark  # type: ignore[method-assign]
    assert [e["seq"] for e in files.read("c-new", 0)] == [1, 2, 3, 4]
    assert files.read_mark("c-new") == (5, 1)


@pytest.mark.parametrize("fresh", [True, False])
def test_write_many_reports_each_result(tmp_path: Path, fresh: bool) -> None:
    files = ReplayFiles(tmp_path / "replay")
    files.reset()
    (tmp_path / "replay" / "c-bad.jsonl").mkdir()  # cannot be written
    events = [{"seq": 1, "event": {"kind": "turn_started"}}]
    lines = [filed(e) for e in events]
    done = files.write_many([("c-a", lines, 1, fresh), ("c-bad", lines, 1, fresh)], None)
    assert done[0] == 1
    assert isinstance(done[1], OSError)
    assert files.read("c-a", 0) == events


def test_an_event_is_counted_by_its_encoded_message_even_with_a_lone_surrogate(
    tmp_path: Path,
) -> None:
    from jpd.protocol.turn_events import TurnCompleted

    hub, _files = make_hub(tmp_path)
    follower = FakeLink(1)
    hub.subscribe("c-s", follower)
    hub.publish("c-s", "t-1", TurnCompleted(stop_reason="error", error="bad \ud800 text"))
    channel = hub._channels["c-s"]
    assert channel.size == len(channel.buffer[0].body) > 0
    assert follower.received[0]["event"]["error"] == "bad \ud800 text"


def test_a_published_event_goes_out_as_its_validated_params_would(tmp_path: Path) -> None:
    import json

    from jpd.protocol.turn_events import TurnCompleted, TurnEventParams, TurnStarted

    hub, _files = make_hub(tmp_path)
    follower = FakeLink(1)
    hub.subscribe("c-w", follower)
    for event in (TurnStarted(model="test/m"), TurnCompleted(stop_reason="end_turn")):
        params = hub.publish("c-w", "t-1", event)
        checked = TurnEventParams(conversation_id="c-w", turn_id="t-1", seq=params.seq, event=event)
        assert params.to_wire() == checked.to_wire() == follower.received[-1]
        body = json.loads(hub._channels["c-w"].buffer[-1].body)
        assert body["params"] == checked.to_wire()
