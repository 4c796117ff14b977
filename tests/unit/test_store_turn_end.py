"""The JSONL store's per-turn work: the turn lock on the log (no file of its own), the
files a new conversation makes, and the hops turns that end together share."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import anyio
import anyio.to_thread
import pytest

from jpd.conversation.events import ChatRequest, TurnEnd, TurnStart
from jpd.conversation.jsonl.shared_hop import SharedHop
from jpd.conversation.jsonl.store import ConversationNotFound, ConversationStore
from jpd.conversation.jsonl.threaded import SYNC_HOPS, ThreadedStore
from jpd.conversation.jsonl.turn_lock import try_lock
from jpd.conversation.metadata import read_record


def test_a_new_conversation_is_its_folder_and_log_only(tmp_path: Path) -> None:
    store = ConversationStore(tmp_path)
    store.create("c-new")
    lock = store.lock_turn("c-new")
    assert lock is not None
    store.append("c-new", TurnStart(turn_id="t-1"))
    folder = store.conversation_dir("c-new")
    assert sorted(os.listdir(folder)) == ["events.jsonl"]  # the lock made no file
    store.release("c-new")
    lock.release()
    assert sorted(os.listdir(folder)) == ["events.jsonl", "metadata.json"]


def test_the_turn_lock_is_held_on_the_log_against_another_process(tmp_path: Path) -> None:
    store = ConversationStore(tmp_path)
    store.create("c-1")
    lock = store.lock_turn("c-1")
    assert lock is not None
    assert store.lock_turn("c-1") is None  # another descriptor: refused, even here
    # Another process (another daemon on the data dir) cannot take it either.
    probe = (
        "import fcntl, os, sys\n"
        "fd = os.open(sys.argv[1], os.O_RDONLY)\n"
        "try:\n    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)\nexcept OSError:\n"
        "    sys.exit(3)\n"
    )
    log = str(store.conversation_dir("c-1") / "events.jsonl")
    assert subprocess.run([sys.executable, "-c", probe, log]).returncode == 3
    # Appends and the log's handle coming and going do not drop the lock.
    store.append("c-1", TurnStart(turn_id="t-1"))
    store.release("c-1")  # closes the append handle
    assert store.lock_turn("c-1") is None
    lock.release()
    again = store.lock_turn("c-1")
    assert again is not None
    again.release()


def test_a_lock_of_a_missing_conversation_is_not_found(tmp_path: Path) -> None:
    store = ConversationStore(tmp_path)
    with pytest.raises(ConversationNotFound):
        store.lock_turn("c-none")
    (tmp_path / "conversations" / "c-half").mkdir(parents=True)  # a crash mid-create
    with pytest.raises(ConversationNotFound):
        store.lock_turn("c-half")
    with pytest.raises(FileNotFoundError):
        try_lock(tmp_path / "conversations" / "c-half")


def test_an_old_turn_lock_file_is_left_alone(tmp_path: Path) -> None:
    store = ConversationStore(tmp_path)
    store.create("c-old")
    old = store.conversation_dir("c-old") / "turn.lock"  # what daemons before this made
    old.write_bytes(b"")
    lock = store.lock_turn("c-old")
    assert lock is not None
    lock.release()
    assert old.exists()


def test_create_makes_the_data_dir_and_recreates_a_half_created_folder(
    tmp_path: Path,
) -> None:
    store = ConversationStore(tmp_path / "deep" / "data")
    store.create("c-first")  # no conversations/ yet
    (tmp_path / "deep" / "data" / "conversations" / "c-half").mkdir()
    store.create("c-half")  # a folder without a log: a crash mid-create
    store.append("c-half", ChatRequest(content="hello"))
    store.release("c-half")
    meta = store.metadata("c-half")
    assert (meta.title, meta.event_count) == ("hello", 1)


def test_release_of_a_folder_deleted_behind_the_store_keeps_nothing(tmp_path: Path) -> None:
    store = ConversationStore(tmp_path)
    store.create("c-gone")
    store.append("c-gone", TurnStart(turn_id="t-1"))
    for name in os.listdir(store.conversation_dir("c-gone")):
        os.unlink(store.conversation_dir("c-gone") / name)
    os.rmdir(store.conversation_dir("c-gone"))
    store.release("c-gone")
    assert "c-gone" not in store._states  # nothing left to write: the state is dropped


def test_turns_that_end_together_share_the_hops_of_their_release(tmp_path: Path) -> None:
    store = ThreadedStore(tmp_path)
    ids = [f"c{i:03d}" for i in range(50)]
    hops: list[int] = []
    real = store.files.release_all

    def counting(conversation_ids: list[str]) -> dict[str, Exception]:
        hops.append(len(conversation_ids))
        return real(conversation_ids)

    store._releases = SharedHop(counting)  # the hops are what is tested

    async def run() -> None:
        for cid in ids:
            await store.create(cid)
            store.append(cid, TurnStart(turn_id="t-" + cid))
            store.append(cid, TurnEnd(turn_id="t-" + cid, stop_reason="end_turn"))
            await store.sync(cid)
        async with anyio.create_task_group() as tg:
            for cid in ids:
                tg.start_soon(store.release, cid)

    anyio.run(run)
    assert sum(hops) == len(ids) and len(hops) <= 2  # the first alone, the rest together
    for cid in ids:
        record = read_record(store.conversation_dir(cid) / "metadata.json")
        assert record is not None and record.event_count == 2
    assert len(store.files._states) == 0  # all of it on disk: no state kept


def test_a_shared_hop_gives_each_caller_its_own_error() -> None:
    calls: list[list[str]] = []

    def call_many(ids: list[str]) -> dict[str, Exception]:
        calls.append(list(ids))
        return {i: ValueError(i) for i in ids if i.startswith("bad")}

    hop = SharedHop(call_many)
    results: dict[str, str] = {}

    async def one(cid: str) -> None:
        try:
            await hop.run(cid)
            results[cid] = "ok"
        except ValueError as exc:
            results[cid] = f"error {exc}"

    async def run() -> None:
        async with anyio.create_task_group() as tg:
            for cid in ("a", "bad-1", "b", "bad-2", "c"):
                tg.start_soon(one, cid)

    anyio.run(run)
    assert results == {
        "a": "ok",
        "b": "ok",
        "c": "ok",
        "bad-1": "error bad-1",
        "bad-2": "error bad-2",
    }
    assert sorted(cid for ids in calls for cid in ids) == ["a", "b", "bad-1", "bad-2", "c"]


def test_a_shared_hop_failing_as_a_whole_fails_each_caller() -> None:
    def call_many(ids: list[str]) -> dict[str, Exception]:
        raise OSError("disk gone")

    hop = SharedHop(call_many)
    failures: list[str] = []

    async def one(cid: str) -> None:
        try:
            await hop.run(cid)
        except OSError:
            failures.append(cid)

    async def run() -> None:
        async with anyio.create_task_group() as tg:
            for cid in ("a", "b", "c"):
                tg.start_soon(one, cid)

    anyio.run(run)
    assert sorted(failures) == ["a", "b", "c"]


def test_a_cancelled_opener_does_not_cost_the_callers_that_joined_it() -> None:
    started, gate = threading.Event(), threading.Event()
    ran: list[str] = []

    def call_many(ids: list[str]) -> dict[str, Exception]:
        started.set()
        gate.wait(10)
        ran.extend(ids)
        return {}

    hop = SharedHop(call_many)
    done: list[str] = []

    async def one(cid: str, scope: anyio.CancelScope | None = None) -> None:
        with scope or anyio.CancelScope():
            await hop.run(cid)
            done.append(cid)

    async def run() -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(one, "first")  # its hop runs, held by the gate
            await anyio.to_thread.run_sync(started.wait, 10)
            opener = anyio.CancelScope()
            tg.start_soon(one, "opener", opener)  # the next batch, waiting for the hop
            await anyio.sleep(0.01)
            tg.start_soon(one, "joined")  # joins it
            await anyio.sleep(0.01)
            opener.cancel()  # its caller gives up; the batch's hop still runs
            await anyio.sleep(0.01)
            gate.set()

    anyio.run(run)
    assert ran == ["first", "opener", "joined"]
    assert done == ["first", "joined"]


def test_turns_that_end_together_share_hops_for_their_fsyncs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = ThreadedStore(tmp_path)
    ids = [f"c{i:03d}" for i in range(40)]
    hops: list[list[str]] = []
    real = store.files.sync_all

    def counting(conversation_ids: list[str]) -> dict[str, Exception]:
        hops.append(list(conversation_ids))
        return real(conversation_ids)

    store._syncs = SharedHop(counting, hops=SYNC_HOPS)
    synced: list[int] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        synced.append(os.fstat(fd).st_ino)
        real_fsync(fd)

    async def run() -> None:
        for cid in ids:
            await store.create(cid)
            store.append(cid, TurnStart(turn_id="t-" + cid))
        monkeypatch.setattr(os, "fsync", fsync)
        async with anyio.create_task_group() as tg:
            for cid in ids:
                tg.start_soon(store.sync, cid)
        with pytest.raises(ConversationNotFound):
            await store.sync("c-never")  # its own error, as without sharing

    anyio.run(run)
    assert sorted(c for hop in hops for c in hop) == sorted([*ids, "c-never"])
    assert len(hops) <= SYNC_HOPS + 2  # a hop each while few run, then together
    for cid in ids:  # every log was fsynced
        assert os.stat(store.conversation_dir(cid) / "events.jsonl").st_ino in synced


def test_sync_all_gives_each_conversation_its_own_error(tmp_path: Path) -> None:
    store = ConversationStore(tmp_path)
    store.create("c-a")
    store.append("c-a", TurnStart(turn_id="t-1"))
    errors = store.sync_all(["c-a", "c-missing", "c-a"])
    assert list(errors) == ["c-missing"]
    assert isinstance(errors["c-missing"], ConversationNotFound)


def test_new_conversations_synced_together_share_the_fsync_of_their_parent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import jpd.conversation.jsonl.store as store_module

    store = ConversationStore(tmp_path)
    ids = ["c-a", "c-b", "c-c"]
    for cid in ids:
        store.create(cid)
        store.append(cid, TurnStart(turn_id="t-" + cid))
    store.create("c-old")
    store.sync("c-old")  # its entries are durable already
    store.append("c-old", TurnStart(turn_id="t-old"))
    dirs: list[Path] = []
    monkeypatch.setattr(store_module, "fsync_dir", dirs.append)
    assert store.sync_all([*ids, "c-old"]) == {}
    parent = tmp_path / "conversations"
    assert dirs == [parent / cid for cid in ids] + [parent]  # the parent once
    dirs.clear()
    assert store.sync_all(ids) == {}
    assert dirs == []  # nothing pending any more


def test_events_recorded_together_are_one_write_of_their_lines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = ConversationStore(tmp_path)
    store.create("c-a")
    store.append("c-a", TurnStart(turn_id="t-0"))  # the handle is open now
    fh = store._states["c-a"].fh
    assert fh is not None
    writes: list[bytes] = []
    real_write = fh.write
    monkeypatch.setattr(fh, "write", lambda data: writes.append(bytes(data)) or real_write(data))
    store.append_many("c-a", (TurnStart(turn_id="t-1"), ChatRequest(content="hi")))
    assert len(writes) == 1 and writes[0].count(b"\n") == 2
    events = store.load("c-a", sanitized=False)
    assert [type(e).__name__ for e in events] == ["TurnStart", "TurnStart", "ChatRequest"]
    meta = store.metadata("c-a")
    assert meta.event_count == 3 and meta.title == "hi"
    size = os.path.getsize(store.conversation_dir("c-a") / "events.jsonl")
    store.release("c-a")
    record = read_record(store.conversation_dir("c-a") / "metadata.json")
    assert record is not None and record.log_size == size
