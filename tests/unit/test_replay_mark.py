"""Seq marks (jpd/conversation/replay.py) are written over in place: each read gives
the last mark written, whatever was there before."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from jpd.conversation.replay import MARK_BYTES, RESERVE_BLOCK, UNMARKED_NEXT, ReplayFiles, filed

CID = "c-mark"


def files(tmp_path: Path) -> ReplayFiles:
    replay = ReplayFiles(tmp_path / "replay")
    replay.prepare()
    return replay


def test_no_mark_starts_above_the_first_block(tmp_path: Path) -> None:
    # The run that named the conversation may have sent seqs 1 to RESERVE_BLOCK unmarked.
    replay = files(tmp_path)
    assert replay.mark(CID) is None
    assert replay.read_mark(CID) == (UNMARKED_NEXT, None) == (RESERVE_BLOCK + 1, None)


def test_each_mark_replaces_the_last_in_the_same_file(tmp_path: Path) -> None:
    replay = files(tmp_path)
    replay.write_mark(CID, 65, None)
    path = tmp_path / "replay" / f"{CID}.seq"
    inode = path.stat().st_ino
    replay.write_mark(CID, 7, 3)
    assert replay.read_mark(CID) == (7, 3)
    assert path.stat().st_ino == inode and path.stat().st_size == MARK_BYTES
    assert sorted(p.name for p in path.parent.iterdir()) == [f"{CID}.seq"]  # no temporary


def test_a_shorter_mark_after_a_longer_one_reads_as_written(tmp_path: Path) -> None:
    replay = files(tmp_path)
    huge = 10**70  # a line longer than MARK_BYTES
    replay.write_mark(CID, huge, huge - 1)
    assert replay.read_mark(CID) == (huge, huge - 1)
    replay.write_mark(CID, huge + 64, None)
    replay.write_mark(CID, 5, None)
    assert replay.read_mark(CID) == (5, None)


def test_a_mark_of_an_earlier_build_still_reads(tmp_path: Path) -> None:
    replay = files(tmp_path)
    (tmp_path / "replay" / f"{CID}.seq").write_text('{"next": 12, "replayFrom": 4}')
    assert replay.read_mark(CID) == (12, 4)
    replay.write_mark(CID, 13, None)
    assert replay.read_mark(CID) == (13, None)


def test_a_torn_mark_refuses_every_old_cursor(tmp_path: Path) -> None:
    replay = files(tmp_path)
    (tmp_path / "replay" / f"{CID}.seq").write_text('{"next": 4')
    assert replay.read_mark(CID)[0] == 1 << 40


def test_a_replay_file_is_written_over_in_place(tmp_path: Path) -> None:
    replay = files(tmp_path)
    events = [{"seq": seq, "event": {"kind": "text_delta", "text": "x" * seq}} for seq in (1, 2)]
    assert replay.write(CID, [filed(e) for e in events], keep_from=1) == 1
    path = tmp_path / "replay" / f"{CID}.jsonl"
    inode = path.stat().st_ino
    # Fewer bytes the second time (the oldest dropped): the old tail does not stay.
    assert replay.write(CID, [filed({"seq": 3, "event": {"kind": "x"}})], keep_from=3) == 3
    assert path.stat().st_ino == inode
    assert [e["seq"] for e in replay.read(CID, 0)] == [3]
    assert sorted(p.name for p in path.parent.iterdir()) == [f"{CID}.jsonl"]  # no temporary


def test_no_mark_vouches_for_a_replay_file_while_it_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    replay = files(tmp_path)
    replay.write(CID, [filed({"seq": 1, "event": {}})], keep_from=1)
    replay.write_mark(CID, 2, 1)  # an exact mark: the file holds seq 1 and on
    real_pwrite = os.pwrite

    def crash(fd: int, data: bytes, offset: int) -> int:
        if b'"seq"' in data:  # the replay file, not a mark
            raise OSError("killed mid-write")
        return real_pwrite(fd, data, offset)

    monkeypatch.setattr(os, "pwrite", crash)
    with pytest.raises(OSError):
        replay.write(CID, [filed({"seq": 2, "event": {}})], keep_from=1)
    # The next run reads a mark that does not vouch for the file, and drops it.
    assert replay.read_mark(CID) == (2, None)
