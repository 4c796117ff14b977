"""The files of the JSONL store's conversations: each log's handle and its
metadata.json cache (see `store` for the durability model).

Every method but `read_log` expects its caller to hold the conversation's lock
(`states.locked`); `read_log` takes it.
"""

from __future__ import annotations

import contextlib
import io
import os
from pathlib import Path

from jpd.conversation.jsonl.state import LogState, LogStates
from jpd.conversation.logfile import ends_with_newline, fsync_dir
from jpd.conversation.metadata import load_record, write_record
from jpd.conversation.paths import EVENTS_FILE, METADATA_FILE
from jpd.conversation.port import ConversationNotFound


class LogFiles:
    """The logs under `directory` (`<data dir>/conversations`), at most `max_open` of
    them open at once (None: `state.default_max_open`)."""

    def __init__(self, directory: Path, max_open: int | None) -> None:
        self.dir = directory
        self.states = LogStates(max_open)

    def read_log(self, cid: str) -> tuple[bytes, str]:
        """The bytes of a conversation's log, and its path (for warnings)."""
        path = self.dir / cid / EVENTS_FILE
        with self.states.locked(cid):  # never read half of a line being appended
            try:
                return path.read_bytes(), str(path)
            except FileNotFoundError:
                raise ConversationNotFound(cid) from None

    def settle(self, cid: str, state: LogState, *, fsync: bool) -> None:
        """Close the log's handle (fsynced first when `fsync`) and write its metadata.json
        if it is behind; nothing is left to write for a deleted conversation."""
        if state.fh is not None and fsync:
            with contextlib.suppress(OSError):
                state.fh.flush()
                os.fsync(state.fh.fileno())
        self.states.close_handle(cid, state)
        if state.dirty and state.loaded:
            self.write_meta(cid, state)
            if not state.dirty:
                return
        if not os.path.isdir(os.path.join(self.dir, cid)):
            state.dirty = state.dir_sync_pending = False  # deleted: nothing left to write

    def fsync_entries(self, cid: str) -> None:
        """Make a created conversation's directory entries durable."""
        fsync_dir(self.dir / cid)  # the log's entry
        fsync_dir(self.dir)  # the conversation directory's entry

    def open_log(self, cid: str, state: LogState) -> io.BufferedWriter:
        """Open the log for appending, after a torn last line's fresh start."""
        self.ensure_loaded(cid, state)
        path = self.dir / cid / EVENTS_FILE
        fh = open(path, "ab")  # noqa: SIM115 - kept open across appends, see LogStates.track_handle
        try:
            # A crash may have left a torn last line: start the next event on a fresh line.
            if state.log_size > 0 and not ends_with_newline(path):
                fh.write(b"\n")
                fh.flush()
                state.log_size += 1
                state.dirty = True
        except BaseException:
            fh.close()
            raise
        state.fh = fh
        self.states.track_handle(cid, state)
        return fh

    def ensure_loaded(self, cid: str, state: LogState) -> None:
        """Fill `state` from metadata.json, or from the log when that is stale."""
        if state.loaded:
            return
        found = load_record(self.dir / cid, cid)
        if found is None:
            raise ConversationNotFound(cid)
        record, stored = found
        state.adopt(record)
        if stored:
            state.dirty = False
        else:
            self.write_meta(cid, state)

    def write_meta(self, cid: str, state: LogState) -> None:
        """Write metadata.json; `state.dirty` stays set when that failed."""
        path = self.dir / cid / METADATA_FILE
        state.dirty = not write_record(path, state.record(cid))
