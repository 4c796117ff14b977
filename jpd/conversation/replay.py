"""Replay files: the live `turn/event`s of idle conversations, kept on disk for this run.

While a turn runs or a client follows a conversation, the daemon keeps the events it
may have to replay (`turn/attach` with `fromSeq`) in memory. When the conversation goes
idle they move here, one JSON object (the `turn/event` params, as sent) per line in
`<dir>/<conversationId>.jsonl`, and memory is freed. Seqs are per daemon run, so the
directory is emptied when the daemon starts (protocol.md section 8.1).

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

from jpd.conversation.paths import validate_id

log = logging.getLogger(__name__)


class ReplayFiles:
    """One file of replayable events per idle conversation, under `directory`."""

    def __init__(self, directory: Path) -> None:
        self._dir = directory

    def reset(self) -> None:
        """Forget every file of an earlier run (their seqs mean nothing now)."""
        shutil.rmtree(self._dir, ignore_errors=True)
        self._dir.mkdir(parents=True, exist_ok=True, mode=0o700)

    def write(self, conversation_id: str, events: list[dict[str, Any]], keep_from: int) -> int:
        """Add `events` (in seq order, after what the file holds); drop seqs < `keep_from`.

        Returns the oldest seq the file holds afterwards (`keep_from` when it is empty).
        """
        path = self._path(conversation_id)
        kept = [e for e in self.read(conversation_id, keep_from - 1) if e["seq"] < _first(events)]
        new = [e for e in events if e["seq"] >= keep_from]
        if not kept and not new:
            self.forget(conversation_id)
            return keep_from
        lines = "".join(json.dumps(e, separators=(",", ":")) + "\n" for e in kept + new)
        tmp = path.with_suffix(".tmp")
        # Appending would be cheaper, but one rewrite per idle transition keeps the file
        # bounded by the replay limit without a second pass.
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(lines)
        os.replace(tmp, path)
        return int((kept + new)[0]["seq"])

    def read(self, conversation_id: str, after: int) -> list[dict[str, Any]]:
        """The events with `seq > after`, oldest first ([] when there is no file)."""
        try:
            text = self._path(conversation_id).read_text(encoding="utf-8")
        except FileNotFoundError:
            return []
        events: list[dict[str, Any]] = []
        for line in text.splitlines():
            try:
                event = json.loads(line)
            except ValueError:
                log.warning("skipping an unreadable line of %s's replay file", conversation_id)
                continue
            if event["seq"] > after:
                events.append(event)
        return events

    def forget(self, conversation_id: str) -> None:
        """Remove the conversation's file, if any."""
        with contextlib.suppress(FileNotFoundError):
            self._path(conversation_id).unlink()

    def _path(self, conversation_id: str) -> Path:
        return self._dir / f"{validate_id(conversation_id)}.jsonl"


def _first(events: list[dict[str, Any]]) -> int:
    return int(events[0]["seq"]) if events else 1 << 62
