"""Seqs that go on across daemon runs (`jpd.core.hub` with the seq marks of
`jpd.conversation.replay`): a clean stop, a kill mid-turn, a torn mark, a deletion."""

from __future__ import annotations

from pathlib import Path

from jpd.conversation.replay import ReplayFiles
from jpd.core.hub import RESERVE_BLOCK, EventHub
from tests.unit.test_hub import CID, FakeLink, named, turn


def new_run(tmp_path: Path) -> EventHub:
    """A hub over the replay dir an earlier run left (as the daemon builds it)."""
    files = ReplayFiles(tmp_path / "replay")
    files.prepare()
    return EventHub(files, replay_limit=100)


async def test_a_clean_restart_goes_on_and_replays_exactly(tmp_path: Path) -> None:
    first = new_run(tmp_path)
    seen = FakeLink(1)
    named(first)  # turn/start names it before its client follows it
    first.subscribe(CID, seen)
    turn(first, "t-1", "a", "b")  # seqs 1..3
    await first.close()  # the daemon stops with the client still attached

    second = new_run(tmp_path)
    turn(second, "t-2", "c")  # seqs 4, 5: no seq is used twice
    back = FakeLink(2)
    assert await second.attach(CID, back, 3) == (5, 1)
    assert back.seqs() == [4, 5]  # exactly what the client missed
    again = FakeLink(3)
    await second.attach(CID, again, 0)
    assert again.texts() == ["a", "b", "turn_completed", "c", "turn_completed"]


async def test_a_killed_daemon_leaves_a_gap_not_a_repeat(tmp_path: Path) -> None:
    first = new_run(tmp_path)
    turn(first, "t-1", "a")
    await first.settle(CID)  # idle: filed and exactly marked (next seq 3)
    turn(first, "t-2", "b")  # seqs 3, 4 sent, then the daemon is killed (no close)

    second = new_run(tmp_path)
    back = FakeLink(1)
    last, oldest = await second.attach(CID, back, 4)
    # Nothing at or below what may have been sent is reused; the lost tail is a gap
    # the client sees (oldest > fromSeq + 1 once events flow) and reads with conversation/get.
    assert last == 2 + RESERVE_BLOCK and oldest == last + 1
    assert back.seqs() == []
    turn(second, "t-3", "c")
    assert back.seqs() == [3 + RESERVE_BLOCK, 4 + RESERVE_BLOCK]
    assert not (tmp_path / "replay" / f"{CID}.jsonl").exists()  # its tail died


async def test_a_long_turn_reserves_again_before_running_out(tmp_path: Path) -> None:
    first = new_run(tmp_path)
    turn(first, "t-1", *["x"] * (RESERVE_BLOCK + 10))
    second = new_run(tmp_path)  # killed: the second reservation covers what was sent
    last, _ = await second.attach(CID, FakeLink(1), None)
    assert last >= RESERVE_BLOCK + 11


async def test_a_torn_mark_refuses_every_old_cursor(tmp_path: Path) -> None:
    first = new_run(tmp_path)
    turn(first, "t-1", "a")
    await first.close()
    (tmp_path / "replay" / f"{CID}.seq").write_text('{"next": 4', encoding="utf-8")
    second = new_run(tmp_path)
    last, oldest = await second.attach(CID, FakeLink(1), 0)
    assert last > 1_000_000 and oldest == last + 1


async def test_deleting_forgets_the_mark_and_tool_calls_leave_none(tmp_path: Path) -> None:
    hub = new_run(tmp_path)
    turn(hub, "t-1", "a")
    await hub.close()
    await hub.forget(CID)
    assert list((tmp_path / "replay").iterdir()) == []
    hub.ephemeral("call-1234")
    turn(hub, "t-2", "b", cid="call-1234")
    hub.discard("call-1234")
    assert list((tmp_path / "replay").iterdir()) == []


async def test_seqs_only_grow_when_two_daemons_share_a_data_dir(tmp_path: Path) -> None:
    """The shared daemon and a private one (`jp --stdio`) take turns in a conversation."""
    shared, private = new_run(tmp_path), new_run(tmp_path)
    turn(shared, "t-1", "a")
    await shared.settle(CID)  # idle in the shared daemon, which remembers next seq 3
    await private.prepare(CID)
    turn(private, "t-2", "b")  # seqs 3, 4 from the private daemon
    await private.close()
    await shared.prepare(CID)  # what turn/start does: the mark moved on
    turn(shared, "t-3", "c")
    late = FakeLink(1)
    await shared.attach(CID, late, 0)
    assert late.seqs() == [1, 2, 3, 4, 5, 6]
    assert late.texts() == ["a", "turn_completed", "b", "turn_completed", "c", "turn_completed"]


async def test_a_new_conversations_first_block_needs_no_mark(tmp_path: Path) -> None:
    files = ReplayFiles(tmp_path / "replay")
    hub = new_run(tmp_path)
    hub.prepare_new(CID)
    send = hub.delta_sender(CID, "t-1")
    send("text_delta", "a")  # seq 1: no file created on the way to the model request
    assert list((tmp_path / "replay").iterdir()) == []
    # Killed now: the next run starts above every seq of the first block, with a gap.
    after_kill = new_run(tmp_path)
    back = FakeLink(1)
    last, oldest = await after_kill.attach(CID, back, 1)
    assert last == RESERVE_BLOCK and oldest == last + 1 > 1 + 1
    turn(after_kill, "t-2", "b")  # and reserves its own block before its first seq
    assert back.seqs() == [RESERVE_BLOCK + 1, RESERVE_BLOCK + 2]
    assert files.read_mark(CID) == (2 * RESERVE_BLOCK + 1, None)


async def test_a_new_conversation_marks_the_end_of_its_first_block(tmp_path: Path) -> None:
    files = ReplayFiles(tmp_path / "replay")
    hub = new_run(tmp_path)
    hub.prepare_new(CID)
    send = hub.delta_sender(CID, "t-1")
    for _ in range(RESERVE_BLOCK):
        send("text_delta", "x")
    assert files.mark(CID) is None  # seqs 1 to RESERVE_BLOCK: unmarked
    send("text_delta", "y")  # RESERVE_BLOCK + 1: reserved before it goes
    assert files.read_mark(CID) == (2 * RESERVE_BLOCK + 1, None)
    last, _ = await new_run(tmp_path).attach(CID, FakeLink(1), 0)  # killed: a gap
    assert last == 2 * RESERVE_BLOCK


async def test_a_new_conversation_goes_idle_with_an_exact_mark(tmp_path: Path) -> None:
    files = ReplayFiles(tmp_path / "replay")
    hub = new_run(tmp_path)
    turn(hub, "t-1", "a")  # named here: seqs 1, 2
    await hub.settle(CID)  # no client follows: filed, exactly marked
    assert files.read_mark(CID) == (3, 1)
    turn(hub, "t-2", "b")  # no longer unmarked: the next block is reserved
    assert files.read_mark(CID) == (3 + RESERVE_BLOCK, None)
    last, oldest = await new_run(tmp_path).attach(CID, FakeLink(1), 4)  # killed
    assert last == 2 + RESERVE_BLOCK and oldest == last + 1


async def test_a_torn_first_mark_refuses_every_old_cursor(tmp_path: Path) -> None:
    hub = new_run(tmp_path)
    turn(hub, "t-1", "a")
    await hub.settle(CID)
    # A crash between creating the mark and writing it: the next run starts above.
    (tmp_path / "replay" / f"{CID}.seq").write_bytes(b"")
    last, _ = await new_run(tmp_path).attach(CID, FakeLink(1), 0)
    assert last > 1_000_000


async def test_a_mark_another_daemon_wrote_ends_the_unmarked_block(tmp_path: Path) -> None:
    shared, private = new_run(tmp_path), new_run(tmp_path)
    shared.prepare_new(CID)  # named by the shared daemon, no turn yet
    await private.prepare(CID)  # a private daemon (`jp --stdio`) runs one first
    turn(private, "t-1", "a")  # above the shared one's unmarked block
    await shared.prepare(CID)  # what turn/start does: the mark moved on
    turn(shared, "t-2", "b")
    late = FakeLink(1)
    await shared.attach(CID, late, 0)
    assert late.seqs()[0] > RESERVE_BLOCK + 2  # nothing of the private run's reused
    assert files_mark(tmp_path) > late.seqs()[-1]


def files_mark(tmp_path: Path) -> int:
    return ReplayFiles(tmp_path / "replay").read_mark(CID)[0]


async def test_a_first_reservation_over_an_existing_mark_replaces_it(tmp_path: Path) -> None:
    files = ReplayFiles(tmp_path / "replay")
    files.prepare()
    files.write_mark(CID, 1, None)  # e.g. a conversation filed before any event
    hub = new_run(tmp_path)
    turn(hub, "t-1", "a")
    assert files.read_mark(CID) == (1 + RESERVE_BLOCK, None)
