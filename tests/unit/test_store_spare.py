"""A new conversation's directory renamed from a spare made ahead
(`jpd.conversation.jsonl.spare`): what `create` promised without one still holds."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from jpd.conversation.events import ChatRequest
from jpd.conversation.jsonl.store import ConversationExists, ConversationStore


def spares(root: Path) -> list[Path]:
    if not (root / "spare").exists():
        return []
    return sorted((root / "spare").iterdir())


def started(root: Path) -> ConversationStore:
    """A store whose first conversation's entries were synced: a spare is ready."""
    before = len(spares(root))
    store = ConversationStore(root)
    store.create(f"c-first{before or ''}")
    assert store.sync_entries_of([f"c-first{before or ''}"]) == {}
    assert len(spares(root)) == before + 1
    return store


def test_a_new_conversation_takes_the_spare(tmp_path: Path) -> None:
    store = started(tmp_path)
    spare = spares(tmp_path)[0]
    inode = spare.stat().st_ino
    store.create("c-new")
    directory = store.conversation_dir("c-new")
    assert directory.stat().st_ino == inode and spares(tmp_path) == []
    store.append("c-new", ChatRequest(content="hello"))
    store.sync("c-new")
    assert [type(e) for e in store.load("c-new")] == [ChatRequest]
    assert sorted(m.id for m in store.list()) == ["c-first", "c-new"]
    store.close()


def test_the_spare_is_no_conversation(tmp_path: Path) -> None:
    store = started(tmp_path)
    assert os.listdir(tmp_path / "conversations") == ["c-first"]
    assert sorted(m.id for m in store.list()) == ["c-first"]
    assert [cid for cid, _open, _start in store.scan_turns()] == ["c-first"]
    store.close()


def test_conversations_on_another_filesystem_get_no_spare(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = started(tmp_path)

    def cross_device(_src: str, _dst: str) -> None:
        raise OSError(errno.EXDEV, "Invalid cross-device link")

    monkeypatch.setattr(os, "rename", cross_device)
    store.create("c-linked")  # made at once
    assert store.conversation_dir("c-linked").is_dir() and spares(tmp_path) == []
    store.sync_entries_of(["c-linked"])
    assert spares(tmp_path) == []  # none made again
    store.close()


def test_an_existing_conversation_is_refused_and_the_spare_kept(tmp_path: Path) -> None:
    store = started(tmp_path)
    store.append("c-first", ChatRequest(content="kept"))
    store.sync("c-first")
    store.release("c-first")
    spare = spares(tmp_path)
    with pytest.raises(ConversationExists):
        store.create("c-first")
    assert [type(e) for e in store.load("c-first")] == [ChatRequest]  # untouched
    assert spares(tmp_path) == spare  # still there for the next new one
    store.create("c-next")
    assert spares(tmp_path) == []
    store.close()


def test_an_empty_directory_a_crash_left_is_created_over(tmp_path: Path) -> None:
    store = started(tmp_path)
    (tmp_path / "conversations" / "c-half").mkdir()  # killed between mkdir and the log
    store.create("c-half")
    store.append("c-half", ChatRequest(content="x"))
    assert [type(e) for e in store.load("c-half")] == [ChatRequest]
    store.close()


def test_a_directory_holding_files_but_no_log_is_created_as_without_a_spare(
    tmp_path: Path,
) -> None:
    store = started(tmp_path)
    half = tmp_path / "conversations" / "c-images"
    half.mkdir()
    (half / "image.png").write_bytes(b"png")
    store.create("c-images")
    assert (half / "image.png").read_bytes() == b"png" and (half / "events.jsonl").exists()
    assert len(spares(tmp_path)) == 1
    store.close()


def test_two_daemons_creating_the_same_id_one_wins(tmp_path: Path) -> None:
    first, second = started(tmp_path), started(tmp_path)
    assert len(spares(tmp_path)) == 2
    first.create("c-same")
    with pytest.raises(ConversationExists):
        second.create("c-same")
    assert len(spares(tmp_path)) == 1  # the loser's spare stays for its next one
    first.close()
    second.close()


def test_a_dead_daemons_spare_is_removed_a_live_ones_kept(tmp_path: Path) -> None:
    spare = tmp_path / "spare"
    spare.mkdir()
    dead = os.fork()
    if dead == 0:
        os._exit(0)
    os.waitpid(dead, 0)
    (spare / f"{dead}-0000").mkdir()
    (spare / f"{dead}-0000" / "events.jsonl").write_bytes(b"")
    (spare / "1-0000").mkdir()  # pid 1 lives
    (spare / "junk").mkdir()
    store = ConversationStore(tmp_path)
    store.create("c-first")
    store.sync_entries_of(["c-first"])
    names = [p.name for p in spares(tmp_path)]
    assert "1-0000" in names and len(names) == 2  # and this store's own
    store.close()


def test_closing_the_store_removes_its_spare(tmp_path: Path) -> None:
    store = started(tmp_path)
    store.close()
    assert spares(tmp_path) == []
    store.create("c-after")  # still usable: made at once
    assert store.conversation_dir("c-after").is_dir()
    store.close()
