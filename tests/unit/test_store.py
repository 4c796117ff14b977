"""Tests for `jpd.conversation.jsonl.store` (with `paths`, `metadata` and `logfile`)."""

from __future__ import annotations

import json
import logging
import os
import re
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from jpd.conversation.events import (
    Answered,
    AssistantSource,
    Cancelled,
    ChatRequest,
    ChatResponse,
    Event,
    InquiryRequest,
    InquiryResponse,
    Redacted,
    ToolCallRequest,
    ToolCallResponse,
    ToolSource,
    TurnEnd,
    TurnStart,
    dump_event,
    event_to_json,
    parse_event,
)
from jpd.conversation.jsonl.log_files import LogFiles
from jpd.conversation.jsonl.store import (
    ConversationExists,
    ConversationNotFound,
    ConversationStore,
    InvalidConversationId,
    default_data_dir,
    default_max_open,
    new_conversation_id,
    validate_id,
)
from jpd.conversation.sanitize import INTERRUPTED_CONTENT
from jpd.protocol.question import BooleanAnswer, Question, SelectAnswer
from jpd.protocol.usage import TokenUsage

T0 = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
CID = "c-test"


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def soon(minutes: int) -> datetime:
    # After any `created_at` a store sets while the test runs.
    return datetime.now(UTC) + timedelta(minutes=minutes + 1)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[ConversationStore]:
    s = ConversationStore(tmp_path)
    yield s
    s.close()


def log_path(store: ConversationStore, cid: str = CID) -> Path:
    return store.conversation_dir(cid) / "events.jsonl"


def every_event_type() -> list[Event]:
    question = Question(
        id="confirm",
        text="Overwrite the file?",
        context="x.txt exists",
        answer_type=SelectAnswer(options=["y", "n"]),
        default="n",
        exclusive=True,
    )
    return [
        TurnStart(turn_id="t1", model="test/model", timestamp=at(0)),
        ChatRequest(content="Fix the bug\nin main.py", timestamp=at(1)),
        ChatResponse(reasoning="Let me look.", timestamp=at(2)),
        ChatResponse(
            message="Reading it.",
            usage=TokenUsage(input_tokens=10, output_tokens=5, cache_read_tokens=2),
            timestamp=at(3),
        ),
        ToolCallRequest(id="call_1", name="fs_write", arguments={"path": "x.txt"}, timestamp=at(4)),
        InquiryRequest(
            id="call_1.confirm.1",
            source=ToolSource(name="fs_write"),
            question=question,
            timestamp=at(5),
        ),
        InquiryResponse(response=Answered(id="call_1.confirm.1", answer="y"), timestamp=at(6)),
        InquiryRequest(
            id="call_1.more.1", source=AssistantSource(), question=question, timestamp=at(7)
        ),
        InquiryResponse(response=Cancelled(id="call_1.more.1", reason="user"), timestamp=at(8)),
        InquiryResponse(
            response=Cancelled(id="call_1.more.2", reason="reason_from_the_future"),
            timestamp=at(9),
        ),
        InquiryResponse(response=Redacted(id="call_1.secret.1"), timestamp=at(10)),
        ToolCallResponse(id="call_1", content="written", is_error=False, timestamp=at(11)),
        ChatResponse(message="Done. \u2713 caf\u00e9", timestamp=at(12)),
        TurnEnd(turn_id="t1", stop_reason="end_turn", timestamp=at(13)),
    ]


# --- ids and paths ------------------------------------------------------------------


BAD_IDS = ["../x", "a/b", "..", ".", "", "x" * 129, "a\\b", "a b", "caf\u00e9", "a\nb", "/abs"]


@pytest.mark.parametrize("bad", BAD_IDS)
def test_validate_id_rejects_unsafe_ids(bad: str) -> None:
    with pytest.raises(InvalidConversationId, match="invalid conversation id"):
        validate_id(bad)
    with pytest.raises(ValueError):
        ConversationStore.validate_id(bad)


@pytest.mark.parametrize("good", ["a", "c-20250101T000000-0123abcd", "x" * 128, "A.b_c-9", "..."])
def test_validate_id_accepts_safe_ids(good: str) -> None:
    assert validate_id(good) == good


@pytest.mark.parametrize("bad", ["../x", "a/b", "..", "", "x" * 129, "a\\b"])
def test_every_method_validates_the_id(store: ConversationStore, bad: str) -> None:
    calls: list[Any] = [
        lambda: store.create(bad),
        lambda: store.exists(bad),
        lambda: store.append(bad, ChatRequest(content="x")),
        lambda: store.sync(bad),
        lambda: store.load(bad),
        lambda: store.delete(bad),
        lambda: store.metadata(bad),
        lambda: store.conversation_dir(bad),
    ]
    for call in calls:
        with pytest.raises(InvalidConversationId):
            call()
    assert not (store.root / "x").exists()


def test_new_conversation_id_format() -> None:
    cid = new_conversation_id()
    assert re.fullmatch(r"c-\d{8}T\d{6}-[0-9a-f]{8}", cid)
    assert validate_id(cid) == cid
    assert ConversationStore.new_conversation_id() != cid


def test_default_data_dir(tmp_path: Path) -> None:
    assert default_data_dir({"JP_DATA_DIR": str(tmp_path)}) == tmp_path
    fallback = default_data_dir({})
    assert fallback.is_absolute()
    assert default_data_dir({"JP_DATA_DIR": ""}) == fallback


# --- create / append / load ---------------------------------------------------------


def test_round_trip_of_every_event_type(tmp_path: Path) -> None:
    events = every_event_type()
    with ConversationStore(tmp_path) as writer:
        writer.create(CID)
        for event in events:
            writer.append(CID, event)
        # Unsanitized: the fixture holds inquiry responses without requests on purpose.
        assert writer.load(CID, sanitized=False) == events
    # A fresh store reads the same events back from disk.
    assert ConversationStore(tmp_path).load(CID, sanitized=False) == events


def test_on_disk_shape_is_one_flat_json_object_per_line(store: ConversationStore) -> None:
    store.create(CID)
    events = every_event_type()
    for event in events:
        store.append(CID, event)
    lines = log_path(store).read_text(encoding="utf-8").splitlines()
    assert len(lines) == len(events)
    records = [json.loads(line) for line in lines]
    assert [r["type"] for r in records] == [e.type for e in events]
    assert records[6] == {
        "type": "inquiry_response",
        "timestamp": at(6).isoformat().replace("+00:00", "Z"),
        "id": "call_1.confirm.1",
        "outcome": "answered",
        "answer": "y",
    }
    assert records[9]["reason"] == "reason_from_the_future"
    assert records[10] == {
        "type": "inquiry_response",
        "timestamp": at(10).isoformat().replace("+00:00", "Z"),
        "id": "call_1.secret.1",
        "outcome": "redacted",
    }


def test_legacy_inquiry_response_reads_as_answered(store: ConversationStore) -> None:
    store.create(CID)
    legacy = {"type": "inquiry_response", "timestamp": at(0).isoformat(), "id": "c.q.1"}
    with open(log_path(store), "a", encoding="utf-8") as f:
        f.write(json.dumps({**legacy, "answer": True}) + "\n")
    [event] = store.load(CID, sanitized=False)  # alone it is an orphan; sanitize drops it
    assert isinstance(event, InquiryResponse)
    assert event.response == Answered(id="c.q.1", answer=True)
    assert event.id == "c.q.1"


# Lines written by earlier builds (protocol.md section 12), before the question and
# usage models were shared with the wire: they load and are written back byte for byte.
EARLIER_LINES = [
    '{"timestamp":"2026-11-22T02:41:09.325536Z","type":"inquiry_request","id":"call_1.confirm.1",'
    '"source":{"type":"tool","name":"deploy"},"question":{"id":"confirm","text":"Deploy to '
    'production?","answer_type":{"type":"boolean"},"default":false,"exclusive":false,'
    '"persistence":"turn"}}',
    '{"timestamp":"2026-11-22T02:41:09.619426Z","type":"inquiry_request","id":"call_1.token.1",'
    '"source":{"type":"tool","name":"deploy"},"question":{"id":"token","text":"Deploy token?",'
    '"answer_type":{"type":"secret"},"exclusive":false,"persistence":"turn"}}',
    '{"timestamp":"2026-11-22T02:42:29.132273Z","type":"inquiry_request","id":"call_7.answer.1",'
    '"source":{"type":"assistant"},"question":{"id":"answer","text":"Which branch should I push '
    'to?","answer_type":{"type":"select","options":["main","dev"]},"default":"dev",'
    '"exclusive":true,"persistence":"none"}}',
    '{"timestamp":"2026-11-22T02:44:15.554312Z","type":"chat_response","message":"2 + 2 = 4.",'
    '"usage":{"input_tokens":12,"output_tokens":7}}',
]


@pytest.mark.parametrize("line", EARLIER_LINES)
def test_lines_of_earlier_builds_load_and_round_trip(line: str) -> None:
    event = parse_event(line)

    assert dump_event(event) == line


def test_an_older_options_null_on_a_plain_answer_type_still_loads() -> None:
    record = json.loads(EARLIER_LINES[0])
    record["question"]["answer_type"]["options"] = None

    event = parse_event(json.dumps(record))

    assert isinstance(event, InquiryRequest)
    assert event.question.answer_type == BooleanAnswer()


def test_unknown_cancellation_reason_is_kept_verbatim(tmp_path: Path) -> None:
    with ConversationStore(tmp_path) as s:
        s.create(CID)
        s.append(CID, InquiryResponse(response=Cancelled(id="q", reason="new_reason_v9")))
    [event] = ConversationStore(tmp_path).load(CID, sanitized=False)
    assert isinstance(event, InquiryResponse)
    assert event.response == Cancelled(id="q", reason="new_reason_v9")


def test_create_twice_and_append_to_missing(store: ConversationStore) -> None:
    assert not store.exists(CID)
    store.create(CID)
    assert store.exists(CID)
    with pytest.raises(ConversationExists):
        store.create(CID)
    with pytest.raises(ConversationNotFound):
        store.append("c-missing", ChatRequest(content="x"))
    with pytest.raises(ConversationNotFound):
        store.load("c-missing")
    with pytest.raises(ConversationNotFound):
        store.sync("c-missing")
    with pytest.raises(ConversationNotFound):
        store.metadata("c-missing")
    assert not store.exists("c-missing")


def test_load_sanitizes_unless_asked_not_to(store: ConversationStore) -> None:
    store.create(CID)
    request = ToolCallRequest(id="call_9", name="slow", timestamp=at(1))
    store.append(CID, request)
    store.append(CID, ToolCallResponse(id="orphan", content="?", timestamp=at(2)))
    assert store.load(CID, sanitized=False)[0] == request
    assert len(store.load(CID, sanitized=False)) == 2
    loaded = store.load(CID)
    assert loaded[0] == request
    assert isinstance(loaded[1], ToolCallResponse)
    assert (loaded[1].id, loaded[1].content, loaded[1].is_error) == (
        "call_9",
        INTERRUPTED_CONTENT,
        True,
    )
    assert len(loaded) == 2


def test_concurrent_appends_never_interleave(store: ConversationStore) -> None:
    store.create(CID)

    def writer(n: int) -> None:
        for i in range(100):
            store.append(CID, ChatResponse(message=f"w{n}-{i}" + "x" * 500))

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(store.load(CID)) == 400
    assert store.metadata(CID).event_count == 400


# --- crash tolerance ----------------------------------------------------------------


def test_torn_last_line_is_skipped_and_next_append_starts_fresh_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    events = every_event_type()[:3]
    with ConversationStore(tmp_path) as s:
        s.create(CID)
        for event in events:
            s.append(CID, event)
    path = ConversationStore(tmp_path).conversation_dir(CID) / "events.jsonl"
    with open(path, "ab") as f:  # a crash in the middle of writing the 4th event
        f.write(b'{"type":"chat_response","mess')

    store = ConversationStore(tmp_path)
    with caplog.at_level(logging.WARNING):
        assert store.load(CID) == events
    assert "torn last line 4" in caplog.text

    extra = ChatResponse(message="after the crash", timestamp=at(50))
    store.append(CID, extra)
    store.close()
    raw = path.read_bytes().split(b"\n")
    assert raw[3] == b'{"type":"chat_response","mess'
    assert json.loads(raw[4])["message"] == "after the crash"
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        assert ConversationStore(tmp_path).load(CID) == [*events, extra]
    assert "invalid line 4" in caplog.text
    assert ConversationStore(tmp_path).metadata(CID).event_count == 4


def test_corrupt_middle_line_is_skipped_with_line_number(
    store: ConversationStore, caplog: pytest.LogCaptureFixture
) -> None:
    store.create(CID)
    events = every_event_type()
    store.append(CID, events[0])
    with open(log_path(store), "ab") as f:
        f.write(b"not json at all\n")
        f.write(b'{"type":"no_such_event","timestamp":"2025-01-01T00:00:00Z"}\n')
    for event in events[1:4]:
        store.append(CID, event)
    with caplog.at_level(logging.WARNING):
        assert store.load(CID) == [events[0], *events[1:4]]
    assert "invalid line 2" in caplog.text
    assert "invalid line 3" in caplog.text


# --- delete / list / metadata -------------------------------------------------------


def test_delete(store: ConversationStore) -> None:
    store.create(CID)
    store.append(CID, ChatRequest(content="bye"))
    store.delete(CID)
    assert not store.exists(CID)
    assert not store.conversation_dir(CID).exists()
    assert store.list() == []
    with pytest.raises(ConversationNotFound) as info:
        store.delete(CID)
    assert isinstance(info.value, KeyError)
    assert str(info.value) == f"conversation not found: {CID}"
    store.create(CID)  # the id can be used again
    assert store.load(CID) == []


def test_list_is_newest_updated_first(store: ConversationStore) -> None:
    assert store.list() == []
    for n, cid in enumerate(["c-a", "c-b", "c-c"]):
        store.create(cid)
        # Explicit, spaced timestamps: ordering must not depend on clock resolution.
        store.append(cid, ChatRequest(content=f"hello {cid}", timestamp=soon(n)))
        assert store.metadata(cid).event_count == 1
    order = [m.id for m in store.list()]
    assert order == ["c-c", "c-b", "c-a"]
    later = soon(10)
    store.append("c-a", ChatResponse(message="again", timestamp=later))
    assert [m.id for m in store.list()] == ["c-a", "c-c", "c-b"]
    # Stray entries in the conversations directory are ignored.
    (store.root / "conversations" / "notes.txt").write_text("x")
    (store.root / "conversations" / "half-created").mkdir()
    assert [m.id for m in store.list()] == ["c-a", "c-c", "c-b"]
    # Another store sees the same order from metadata.json.
    store.close()
    assert [m.id for m in ConversationStore(store.root).list()] == ["c-a", "c-c", "c-b"]


def test_metadata_title_counts_and_times(store: ConversationStore) -> None:
    store.create(CID)
    meta = store.metadata(CID)
    assert (meta.id, meta.title, meta.event_count) == (CID, None, 0)
    long_line = "word " * 30
    store.append(CID, TurnStart(turn_id="t1", timestamp=at(0)))
    store.append(CID, ChatRequest(content=f"\n  {long_line}\nsecond line", timestamp=at(1)))
    store.append(CID, ChatRequest(content="not the title", timestamp=at(2)))
    meta = store.metadata(CID)
    assert meta.title is not None
    assert len(meta.title) == 80
    assert meta.title.endswith("\u2026")
    assert meta.title.startswith("word word")
    assert meta.event_count == 3
    assert meta.updated_at >= meta.created_at
    # Written when the conversation goes idle, with everything it knew.
    store.release(CID)
    on_disk = json.loads((store.conversation_dir(CID) / "metadata.json").read_text())
    assert on_disk["title"] == meta.title
    assert on_disk["event_count"] == 3


def test_metadata_json_is_written_when_the_conversation_goes_idle(
    store: ConversationStore,
) -> None:
    # Not when it is created, nor as a turn's events arrive, nor by the end-of-turn sync
    # (none of that work is on the way to a turn's first model call or to its end):
    # meanwhile the summary is served from memory.
    store.create(CID)
    meta_path = store.conversation_dir(CID) / "metadata.json"
    store.append(CID, TurnStart(turn_id="t1", workspace="/w", timestamp=at(0)))
    store.append(CID, ChatRequest(content="Hello there", timestamp=at(1)))
    store.sync(CID)
    assert not meta_path.exists()
    meta = store.metadata(CID)
    assert (meta.title, meta.event_count, meta.workspace) == ("Hello there", 2, "/w")
    assert [m.title for m in store.list()] == ["Hello there"]
    # A crash now loses nothing: the next daemon rebuilds it from the log.
    rebuilt = ConversationStore(store.root).metadata(CID)
    assert (rebuilt.title, rebuilt.event_count, rebuilt.workspace) == ("Hello there", 2, "/w")
    store.append(CID, ChatResponse(message="Hi", timestamp=at(2)))
    store.release(CID)
    on_disk = json.loads(meta_path.read_text())
    assert on_disk["event_count"] == 3
    assert on_disk["log_size"] == log_path(store).stat().st_size
    assert store._states == {}


def test_short_title_is_kept_whole(store: ConversationStore) -> None:
    store.create(CID)
    store.append(CID, ChatRequest(content="Fix the bug\nin main.py"))
    assert store.metadata(CID).title == "Fix the bug"


def test_metadata_keeps_the_latest_workspace_live_and_rebuilt(tmp_path: Path) -> None:
    store = ConversationStore(tmp_path)
    store.create(CID)
    store.append(CID, TurnStart(turn_id="t1", workspace="/w/one", timestamp=at(0)))
    store.append(CID, TurnStart(turn_id="t2", timestamp=at(1)))  # a client without one
    assert store.metadata(CID).workspace == "/w/one"
    store.append(CID, TurnStart(turn_id="t3", workspace="/w/two", timestamp=at(2)))
    assert store.metadata(CID).workspace == "/w/two"
    store.close()
    (store.conversation_dir(CID) / "metadata.json").unlink()
    assert ConversationStore(tmp_path).metadata(CID).workspace == "/w/two"


def test_metadata_json_is_written_over_in_place(store: ConversationStore) -> None:
    store.create(CID)
    store.append(CID, ChatRequest(content="A long first message to title it " * 3))
    store.release(CID)
    meta_path = store.conversation_dir(CID) / "metadata.json"
    inode, longer = meta_path.stat().st_ino, meta_path.read_bytes()
    store.append(CID, ChatResponse(message="ok"))
    store.release(CID)
    assert meta_path.stat().st_ino == inode  # no new file per turn
    assert json.loads(meta_path.read_text())["event_count"] == 2
    # A crash mid-write leaves the new record with the old one's tail: rebuilt.
    meta_path.write_bytes(meta_path.read_bytes() + longer[-20:])
    assert ConversationStore(store.root).metadata(CID).event_count == 2
    assert sorted(p.name for p in meta_path.parent.iterdir() if p.name.startswith(".")) == []


@pytest.mark.parametrize("damage", ["missing", "corrupt", "stale"])
def test_metadata_is_rebuilt_from_the_log(tmp_path: Path, damage: str) -> None:
    writer = ConversationStore(tmp_path)
    writer.create(CID)
    events = every_event_type()
    for event in events[:5]:
        writer.append(CID, event)
    writer.release(CID)  # writes metadata.json
    for event in events[5:]:
        writer.append(CID, event)  # not released: metadata.json is now behind the log
    meta_path = writer.conversation_dir(CID) / "metadata.json"
    if damage == "missing":
        meta_path.unlink()
    elif damage == "corrupt":
        meta_path.write_text('{"id": "c-test", "title": ')
    # "stale": simulate a crash by never closing `writer`.

    meta = ConversationStore(tmp_path).metadata(CID)
    assert meta.event_count == len(events)
    assert meta.title == "Fix the bug"
    assert meta.created_at == at(0)
    assert meta.updated_at == at(13)
    assert json.loads(meta_path.read_text())["event_count"] == len(events)
    writer.close()


def test_fsync_happens_on_sync_not_on_append(
    store: ConversationStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    synced: list[int] = []  # inode of each fsynced file
    real_fsync = os.fsync

    def counting_fsync(fd: int) -> None:
        synced.append(os.fstat(fd).st_ino)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", counting_fsync)
    store.create(CID)
    for event in every_event_type():
        store.append(CID, event)
    assert synced == []
    store.sync(CID)
    assert synced.count(log_path(store).stat().st_ino) == 1
    before = len(synced)
    store.append(CID, ChatResponse(message="more"))
    store.sync(CID)
    assert len(synced) == before + 1


def test_a_new_conversations_directory_entries_are_fsynced_once(
    store: ConversationStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    synced: list[int] = []  # inode of each fsynced file or directory
    real_fsync = os.fsync

    def counting_fsync(fd: int) -> None:
        synced.append(os.fstat(fd).st_ino)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", counting_fsync)
    conversations = store.root / "conversations"
    store.create("c-a")
    store.sync_entries("c-a")  # early: while the first model call runs
    assert sorted(synced) == sorted(
        [conversations.stat().st_ino, (conversations / "c-a").stat().st_ino]
    )
    synced.clear()
    store.append("c-a", ChatRequest(content="a"))
    store.sync("c-a")
    store.sync_entries("c-a")
    assert synced == [log_path(store, "c-a").stat().st_ino]
    # Not done early: the first sync does it.
    synced.clear()
    store.create("c-b")
    store.append("c-b", ChatRequest(content="b"))
    store.sync("c-b")
    assert sorted(synced) == sorted(
        [
            log_path(store, "c-b").stat().st_ino,
            (conversations / "c-b").stat().st_ino,
            conversations.stat().st_ino,
        ]
    )


def test_close_writes_pending_metadata_and_store_stays_usable(tmp_path: Path) -> None:
    store = ConversationStore(tmp_path)
    store.create(CID)
    store.append(CID, ChatRequest(content="one"))
    store.append(CID, ChatResponse(message="two"))
    store.close()
    record = json.loads((store.conversation_dir(CID) / "metadata.json").read_text())
    assert record["event_count"] == 2
    store.append(CID, ChatResponse(message="three"))
    store.close()
    assert len(ConversationStore(tmp_path).load(CID)) == 3


# --- long life: bounded open files, state released --------------------------------------


def open_fds() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


needs_proc = pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc")


@needs_proc
def test_open_logs_are_bounded_by_max_open(tmp_path: Path) -> None:
    store = ConversationStore(tmp_path, max_open=4)
    before = open_fds()
    cids = [f"c-{n}" for n in range(20)]
    for cid in cids:
        store.create(cid)
        store.append(cid, ChatRequest(content=f"hello {cid}"))
        assert len(open_fds() - before) <= 4
    # Logs whose handle was pushed out reopen on the next append and lose nothing.
    for cid in cids:
        store.append(cid, ChatResponse(message=f"bye {cid}"))
        store.sync(cid)
        assert len(open_fds() - before) <= 4
    for cid in cids:
        assert [getattr(e, "content", getattr(e, "message", None)) for e in store.load(cid)] == [
            f"hello {cid}",
            f"bye {cid}",
        ]
        assert store.metadata(cid).event_count == 2
    store.close()
    assert open_fds() - before == set()


def test_sync_fsyncs_a_log_whose_handle_was_closed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = ConversationStore(tmp_path, max_open=1)
    store.create("c-a")
    store.create("c-b")
    store.append("c-a", ChatRequest(content="a"))
    store.append("c-b", ChatRequest(content="b"))  # pushes c-a's handle out
    synced: list[int] = []
    real_fsync = os.fsync

    def counting_fsync(fd: int) -> None:
        synced.append(os.fstat(fd).st_ino)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", counting_fsync)
    store.sync("c-a")
    assert log_path(store, "c-a").stat().st_ino in synced
    store.close()


@needs_proc
def test_release_closes_the_log_and_drops_the_state(tmp_path: Path) -> None:
    store = ConversationStore(tmp_path)
    before = open_fds()
    store.create(CID)
    store.append(CID, ChatRequest(content="first"))
    store.sync(CID)
    store.release(CID)
    assert open_fds() - before == set()
    assert store._states == {}  # nothing of the conversation stays in memory
    store.append(CID, ChatResponse(message="second"))
    store.release(CID)  # writes the metadata the append made stale
    record = json.loads((store.conversation_dir(CID) / "metadata.json").read_text())
    assert record["event_count"] == 2 and record["title"] == "first"
    assert store._states == {}
    assert len(store.load(CID)) == 2


def test_reads_keep_no_state(store: ConversationStore) -> None:
    for n in range(10):
        store.create(f"c-{n}")
        store.append(f"c-{n}", ChatRequest(content=str(n)))
        store.sync(f"c-{n}")
        store.release(f"c-{n}")
    assert len(store.list()) == 10
    assert store.load("c-3")[0] == store.load("c-3")[0]
    assert store._states == {}


def test_concurrent_appends_across_more_logs_than_handles(tmp_path: Path) -> None:
    store = ConversationStore(tmp_path, max_open=2)
    cids = [f"c-{n}" for n in range(6)]
    for cid in cids:
        store.create(cid)

    def writer(n: int) -> None:
        for i in range(60):
            cid = cids[(n + i) % len(cids)]
            store.append(cid, ChatResponse(message=f"w{n}-{i}" + "x" * 300))
            if i % 7 == 0:
                store.release(cids[(n + i + 1) % len(cids)])

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    store.close()
    fresh = ConversationStore(tmp_path)
    assert sum(len(fresh.load(cid)) for cid in cids) == 240
    assert sum(fresh.metadata(cid).event_count for cid in cids) == 240


# --- load_encoded (conversation/get) ------------------------------------------------


def test_load_encoded_is_the_sanitized_events_with_kept_lines_as_stored(tmp_path: Path) -> None:
    store = ConversationStore(tmp_path)
    store.create(CID)
    store.append(CID, ChatRequest(content="hi"))
    store.append(CID, ToolCallRequest(id="c1", name="ls", arguments={}))  # left unanswered
    store.close()
    path = tmp_path / "conversations" / CID / "events.jsonl"
    # A stored line keeps its own spelling (key order, spacing) in the answer.
    first = json.dumps(
        {"content": "hi", "timestamp": "2026-01-01T00:00:00Z", "type": "chat_request"}
    )
    lines = path.read_bytes().splitlines()
    path.write_bytes(b"\n".join([first.encode(), *lines[1:]]) + b"\n")

    encoded = ConversationStore(tmp_path).load_encoded(CID)
    assert encoded.startswith(b"[" + first.encode() + b",")
    decoded = json.loads(encoded)
    expected = [event_to_json(e) for e in ConversationStore(tmp_path).load(CID)]
    assert decoded == expected
    # sanitize added the interrupted result, encoded like any other event
    assert decoded[-1]["type"] == "tool_call_response"
    assert decoded[-1]["content"] == INTERRUPTED_CONTENT


def test_load_encoded_of_a_sound_log_is_its_valid_lines_as_stored(tmp_path: Path) -> None:
    store = ConversationStore(tmp_path)
    store.create(CID)
    store.append(CID, ChatRequest(content="hi"))
    store.append(CID, ToolCallRequest(id="c1", name="ls", arguments={}))
    store.append(CID, ToolCallResponse(id="c1", content="a.txt", is_error=False))
    store.close()
    path = tmp_path / "conversations" / CID / "events.jsonl"
    lines = path.read_bytes().splitlines()
    spelled = json.dumps(json.loads(lines[0]), indent=None, separators=(", ", ": ")).encode()
    path.write_bytes(b"\n".join([spelled, b"{not json", *lines[1:]]) + b"\n")

    encoded = ConversationStore(tmp_path).load_encoded(CID)
    assert encoded == b"[" + b",".join([spelled, *lines[1:]]) + b"]"


@needs_proc
def test_a_created_log_stays_open_for_its_first_appends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = ConversationStore(tmp_path)
    before = open_fds()
    store.create(CID)
    assert len(open_fds() - before) == 1  # the new log's handle
    monkeypatch.setattr(LogFiles, "open_log", lambda *a: pytest.fail("opened again"))
    store.append(CID, ChatRequest(content="first"))
    store.sync(CID)
    store.release(CID)
    assert open_fds() - before == set()
    assert [e.content for e in store.load(CID) if isinstance(e, ChatRequest)] == ["first"]
    with pytest.raises(ConversationExists):
        store.create(CID)


def test_open_logs_scale_with_the_file_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    import resource

    for soft, expected in ((256, 64), (1024, 256), (20_000, 4096)):
        monkeypatch.setattr(resource, "getrlimit", lambda _which, s=soft: (s, s))
        assert default_max_open() == expected


def test_the_daemons_store_keeps_a_log_open_per_turn_of_a_thousand(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The async store the daemon uses sizes its handles by the file limit, like the
    # synchronous one: with a fixed 64, 1,000 streaming turns reopened a log per append.
    import resource

    import anyio

    from jpd.conversation.jsonl.threaded import ThreadedStore

    monkeypatch.setattr(resource, "getrlimit", lambda _which: (20_000, 20_000))
    store = ThreadedStore(tmp_path)
    ids = [f"c{i:03d}" for i in range(100)]

    async def fill() -> None:
        for cid in ids:
            await store.create(cid)
        for cid in ids:
            store.append(cid, ChatRequest(content="hi"))

    anyio.run(fill)
    states = store.files._states  # the handles are what is tested
    assert all(states[cid].fh is not None for cid in ids)
    anyio.run(store.close)


def test_turns_started_at_once_share_the_sync_of_their_entries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import anyio

    from jpd.conversation.jsonl.threaded import ThreadedStore

    store = ThreadedStore(tmp_path)
    conversations = tmp_path / "conversations"
    ids = [f"c{i:02d}" for i in range(20)]
    synced: list[int] = []
    real_fsync = os.fsync

    def counting_fsync(fd: int) -> None:
        synced.append(os.fstat(fd).st_ino)
        real_fsync(fd)

    async def start_all() -> None:
        for cid in ids:
            await store.create(cid)
        monkeypatch.setattr(os, "fsync", counting_fsync)
        async with anyio.create_task_group() as tg:
            for cid in ids:
                tg.start_soon(store.sync_entries, cid)
        with pytest.raises(ValueError):  # a bad id fails its own call only
            await store.sync_entries("../bad")

    anyio.run(start_all)
    # Every conversation's directory once; `conversations/` once per batch, not per turn.
    folders = {(conversations / cid).stat().st_ino for cid in ids}
    assert sorted(i for i in synced if i in folders) == sorted(folders)
    assert 1 <= synced.count(conversations.stat().st_ino) < len(ids)
    states = store.files._states  # what is left to sync at the end of the turn
    assert not any(states[cid].dir_sync_pending for cid in ids)
    # Already durable: the end-of-turn sync has only the logs to fsync.
    synced.clear()
    anyio.run(store.sync, ids[0])
    assert synced == [log_path(store.files, ids[0]).stat().st_ino]
    anyio.run(store.close)
