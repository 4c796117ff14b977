"""Replay files: the live `turn/event`s of idle conversations, kept on disk for this run.

While a turn runs or a client follows a conversation, the daemon keeps the events it
may have to replay (`turn/attach` with `fromSeq`) in memory. When the conversation goes
idle they move here, one JSON object (the `turn/event` params, as sent) per line in
`<dir>/<conversationId>.jsonl`, and memory is freed.

Seqs go on across daemon runs (protocol.md section 7.2): `<conversationId>.seq` holds a
mark `{"next": N, "replayFrom": F}`. Before the daemon hands out a seq >= N it writes a
higher N with `replayFrom: null` (a reservation); once the events are filed it writes the
exact next seq and where the file starts. A daemon killed mid-turn thus leaves a mark
above every seq it sent and no claim on the file (whose tail was lost), and the next run
starts above, with a gap the clients see in `oldestSeq`. A replay file is written over
in place, never while its mark vouches for it (`replayFrom` set). A conversation without
a mark goes on at `UNMARKED_NEXT`: the run that named it sends its first block without
writing one (a file created on a new conversation's way to its model request).

Blocking file I/O: call from a worker thread.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
from pathlib import Path
from typing import Any

from jpd.conversation.in_place import write_over
from jpd.conversation.paths import validate_id

log = logging.getLogger(__name__)


Filed = tuple[int, bytes]
"""One event of a replay file: its seq and its line (compact JSON, no line end)."""

MARK_BYTES = 64
"""The width of a seq mark's line: every mark of a conversation overwrites the last."""

RESERVE_BLOCK = 1024
"""Seqs reserved per mark write: one tiny file write per this many events of a conversation."""

UNMARKED_NEXT = RESERVE_BLOCK + 1
"""The next seq of a conversation without a mark: the run that named it may have sent its
first block (seqs 1 to `RESERVE_BLOCK`) without marking it (protocol.md 7.2)."""


class ReplayFiles:
    """One file of replayable events per idle conversation, under `directory`."""

    def __init__(self, directory: Path) -> None:
        self._dir = directory
        self._dir_name = os.fspath(directory)
        """`directory` as a string: the mark's name is joined to it twice per turn."""

    def reset(self) -> None:
        """Forget every file of an earlier run (tests start from nothing)."""
        shutil.rmtree(self._dir, ignore_errors=True)
        self.prepare()

    def prepare(self) -> None:
        """Create the directory; the files of earlier runs stay (their seqs go on)."""
        self._dir.mkdir(parents=True, exist_ok=True, mode=0o700)

    def read_mark(self, conversation_id: str) -> tuple[int, int | None]:
        """(next seq, oldest seq of a replay file that continues up to it, or None).

        No mark (a conversation named by another run, which may have sent its first
        block unmarked, or one from before marks): (`UNMARKED_NEXT`, None).
        """
        mark = self.mark(conversation_id)
        return (UNMARKED_NEXT, None) if mark is None else mark

    def mark(self, conversation_id: str) -> tuple[int, int | None] | None:
        """`read_mark`, or None when the conversation has no mark."""
        try:
            text = self._mark_path(conversation_id).read_text(encoding="utf-8")
            mark = json.loads(text.partition("\n")[0])
            next_seq, replay_from = int(mark["next"]), mark.get("replayFrom")
        except FileNotFoundError:
            return None
        except (ValueError, KeyError, TypeError):
            # A torn mark cannot say how far seqs went: refuse every old cursor.
            log.warning("unreadable seq mark of %s: starting above its log", conversation_id)
            return 1 << 40, None
        return max(next_seq, 1), int(replay_from) if isinstance(replay_from, int) else None

    def write_mark(self, conversation_id: str, next_seq: int, replay_from: int | None) -> None:
        """Record that no seq >= `next_seq` was sent yet (written before it is true for a
        reservation, after filing for an exact mark).

        Written over the mark in place, as one line padded to `MARK_BYTES`: the mark is
        written twice per turn, on the event loop, and a new file each time (a temporary
        one renamed over it) cost a quarter of a millisecond of CPU. A write this small
        lands whole (one sector, one page); a longer one is followed by a shorter one
        only when seqs reach 40 digits, and `read_mark` reads the first line."""
        # What `json.dumps` makes of {"next": next_seq, "replayFrom": replay_from}.
        since = "null" if replay_from is None else str(int(replay_from))
        data = f'{{"next": {int(next_seq)}, "replayFrom": {since}}}'.encode()
        line = data.ljust(MARK_BYTES - 1) + b"\n"
        name = os.path.join(self._dir_name, validate_id(conversation_id) + ".seq")
        fd = os.open(name, os.O_WRONLY | os.O_CREAT, 0o600)
        try:
            os.pwrite(fd, line, 0)
        finally:
            os.close(fd)

    def write(
        self,
        conversation_id: str,
        events: list[Filed],
        keep_from: int,
        max_bytes: int | None = None,
        *,
        fresh: bool = False,
    ) -> int:
        """Add `events` (in seq order, after what the file holds); drop seqs < `keep_from`,
        and the oldest while the file would exceed `max_bytes`. `fresh`: the caller knows
        the conversation has no file and no mark vouching for one (it named it in this
        run and never filed it), so neither is read.

        Returns the oldest seq the file holds afterwards (`keep_from` when it is empty
        by the count; past the newest event when the bytes bound emptied it).
        """
        path = self._path(conversation_id)
        first_new = events[0][0] if events else 1 << 62
        kept = (
            []
            if fresh
            else [e for e in self._lines(conversation_id, keep_from - 1) if e[0] < first_new]
        )
        lines = kept + [e for e in events if e[0] >= keep_from]
        if not lines:
            self.forget(conversation_id)
            return keep_from
        first = 0
        if max_bytes is not None:
            # Counted as the JSON's size with its line end, as the bound always was.
            total = sum(len(line) + 1 for _seq, line in lines)
            while first < len(lines) and total > max_bytes:
                total -= len(lines[first][1]) + 1
                first += 1
            if first == len(lines):
                self.forget(conversation_id)
                return lines[-1][0] + 1
        if not fresh:
            self._unvouch(conversation_id)
        # Appending would be cheaper, but one rewrite per idle transition keeps the file
        # bounded by the replay limits without a second pass. Written over in place, as
        # marks are: a new file renamed over it cost a file creation per idle transition
        # (a quarter of a millisecond of CPU on the benched machine). A crash mid-write
        # leaves a file no mark vouches for (`_unvouch`), which the next run drops.
        data = b"".join(line + b"\n" for _seq, line in lines[first:])
        write_over(path, data)
        return lines[first][0]

    def write_many(
        self, jobs: list[tuple[str, list[Filed], int, bool]], max_bytes: int | None
    ) -> list[int | OSError]:
        """`write` of several conversations (id, events, keep_from, fresh) in one call
        (conversations that went idle together share a worker-thread hop): the oldest
        seq of each, or the error of each that failed."""
        done: list[int | OSError] = []
        for conversation_id, events, keep_from, fresh in jobs:
            try:
                done.append(self.write(conversation_id, events, keep_from, max_bytes, fresh=fresh))
            except OSError as exc:  # that conversation's caller learns it
                done.append(exc)
        return done

    def _unvouch(self, conversation_id: str) -> None:
        """Before the replay file changes, make sure its mark does not vouch for it
        (`replayFrom: null`): the exact mark written after the file says where it starts.
        A turn's first event wrote such a reservation already; events relayed from a
        fleet's other members (no reservation here) may follow an exact mark."""
        next_seq, replay_from = self.read_mark(conversation_id)
        if replay_from is not None:
            self.write_mark(conversation_id, next_seq, None)

    def read(self, conversation_id: str, after: int) -> list[dict[str, Any]]:
        """The events with `seq > after`, oldest first ([] when there is no file)."""
        return [json.loads(line) for _seq, line in self._lines(conversation_id, after)]

    def _lines(self, conversation_id: str, after: int) -> list[Filed]:
        """The lines of events with `seq > after` as `filed` gives them, oldest first."""
        try:
            data = self._path(conversation_id).read_bytes()
        except FileNotFoundError:
            return []
        lines: list[Filed] = []
        for line in data.splitlines():
            try:
                seq = json.loads(line)["seq"]
            except (ValueError, KeyError, TypeError):
                log.warning("skipping an unreadable line of %s's replay file", conversation_id)
                continue
            if isinstance(seq, int) and seq > after:
                lines.append((seq, line))
        return lines

    def forget(self, conversation_id: str) -> None:
        """Remove the conversation's replay file, if any (its seq mark stays)."""
        with contextlib.suppress(FileNotFoundError):
            self._path(conversation_id).unlink()

    def forget_all(self, conversation_id: str) -> None:
        """Remove the replay file and the seq mark of a deleted conversation."""
        self.forget(conversation_id)
        with contextlib.suppress(FileNotFoundError):
            self._mark_path(conversation_id).unlink()

    def _mark_path(self, conversation_id: str) -> Path:
        return self._dir / f"{validate_id(conversation_id)}.seq"

    def _path(self, conversation_id: str) -> Path:
        return self._dir / f"{validate_id(conversation_id)}.jsonl"


def filed(event: dict[str, Any]) -> Filed:
    """An event's line for a replay file: its seq and its compact JSON (ASCII, as
    notifications are encoded: `Notification.params_json` gives the same bytes)."""
    return int(event["seq"]), json.dumps(event, separators=(",", ":")).encode()
