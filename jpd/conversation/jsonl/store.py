"""The embedded default store (`port.ConversationStorage`): append-only JSONL files.

Layout under the data dir: `conversations/<id>/events.jsonl` (one event per line,
only ever appended) and `conversations/<id>/metadata.json` (derived, rebuildable).

Durability model: each append is written and flushed (it reaches the OS at once);
`sync` fsyncs the log and is called by the daemon at turn end and before a question
is asked. `metadata.json` is a cache, kept in memory while the conversation is in use
and written when it goes idle (`release`, `close`): never on the way to a turn's first
model call or to its `turn_completed`. It records the log size it describes, and when
it is missing, corrupt or describes a different size (a crash before it was written),
it is rebuilt from the log. One process (the daemon) owns a data dir; within it, each
conversation has a lock, so the methods are thread-safe. They are synchronous (tests,
benches and `jpd store import` call them directly); the daemon reaches them through
the async storage port of `threaded.ThreadedStore`.

Long life (the state table is `state.LogStates`): at most `max_open` log handles are
open at once (`default_max_open`: scaled to the process's file limit; least recently
used ones are closed first, and reopened on the next append), and a conversation's
in-memory state is dropped as soon as no call uses it and it holds nothing unwritten
(no open handle, no pending metadata or directory sync). `release` closes an idle
conversation's handle at once, so a daemon that served
thousands of conversations holds neither their files nor their state.
"""

from __future__ import annotations

import builtins
import logging
import os
import shutil
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from types import TracebackType

from jpd.conversation.attributes import (
    ATTRIBUTES_FILE,
    Attributes,
    read_attributes,
    update_attributes,
)
from jpd.conversation.events import (
    Event,
    TurnStart,
    dump_event,
    now,
    unknown_value,
)
from jpd.conversation.gc_pause import gc_paused
from jpd.conversation.jsonl.log_files import LogFiles
from jpd.conversation.jsonl.spare import Spare, create_new
from jpd.conversation.jsonl.state import default_max_open
from jpd.conversation.jsonl.turn_lock import TurnLock, last_turn, try_lock
from jpd.conversation.logfile import (
    count_lines,
    encode_sanitized,
    fsync_dir,
    fsync_file,
    parse_log,
)
from jpd.conversation.metadata import (
    ConversationMeta,
)
from jpd.conversation.paths import (
    EVENTS_FILE,
    InvalidConversationId,
    default_data_dir,
    is_valid_id,
    new_conversation_id,
    validate_id,
)
from jpd.conversation.port import ConversationExists, ConversationNotFound
from jpd.conversation.sanitize import sanitize

log = logging.getLogger(__name__)

__all__ = [
    "ConversationExists",
    "ConversationMeta",
    "ConversationNotFound",
    "ConversationStore",
    "InvalidConversationId",
    "default_data_dir",
    "default_max_open",
    "new_conversation_id",
    "validate_id",
]


class ConversationStore:
    """Conversations under `root/conversations/`; see the module docstring.

    Log handles are opened lazily on first append and kept open until `release`,
    `close`, `delete`, or until `max_open` newer handles push them out.
    """

    def __init__(self, root: Path, max_open: int | None = None) -> None:
        self._root = Path(root)
        self._dir = self._root / "conversations"
        self._files = LogFiles(self._dir, max_open)
        self._states = self._files.states
        self._spare = Spare(str(self._root / "spare"))
        """A directory made ahead for the next new conversation (`sync_entries_of`)."""

    @property
    def root(self) -> Path:
        """The data dir this store was created with."""
        return self._root

    @staticmethod
    def new_conversation_id() -> str:
        """A fresh id, sortable by creation time (see `paths.new_conversation_id`)."""
        return new_conversation_id()

    @staticmethod
    def validate_id(conversation_id: str) -> str:
        """Return the id or raise `InvalidConversationId` (see `paths.validate_id`)."""
        return validate_id(conversation_id)

    def conversation_dir(self, conversation_id: str) -> Path:
        """The directory holding a conversation's files (it may not exist)."""
        return self._dir / validate_id(conversation_id)

    def attributes(self, conversation_id: str) -> Attributes:
        """The conversation's `attributes.json` (jpd/conversation/attributes.py)."""
        return read_attributes(self.conversation_dir(conversation_id))

    def update_attributes(
        self, conversation_id: str, change: Callable[[Attributes], Attributes]
    ) -> Attributes:
        if not self.exists(conversation_id):
            raise ConversationNotFound(conversation_id)
        return update_attributes(self.conversation_dir(conversation_id), change)

    def all_attributes(self) -> dict[str, Attributes]:
        found = self._dir.glob(f"*/{ATTRIBUTES_FILE}")
        return {path.parent.name: read_attributes(path.parent) for path in found}

    def create(self, conversation_id: str) -> None:
        """Create an empty conversation; raise `ConversationExists` if it has a log."""
        cid = validate_id(conversation_id)
        with self._states.locked(cid) as state:
            directory = os.path.join(self._dir, cid)
            if state.fh is not None:  # a state of its own: a new conversation has none
                self._states.close_handle(cid, state)
            fd = self._spare.take(directory)  # a rename: no inode made on the event loop
            if fd is None:
                fd = create_new(directory)
            # Kept open for the turn's first appends: opening it again from the event
            # loop cost more than creating it here, in the creator's worker thread.
            state.fh = os.fdopen(fd, "ab")
            self._states.track_handle(cid, state)
            state.start_empty(now())
            state.dir_sync_pending = True
            state.dirty = True  # metadata.json is written when the conversation goes idle

    def make_spare(self) -> None:
        """Make the directory the next `create` renames (in a worker thread)."""
        try:
            self._spare.make()
        except OSError as exc:  # `create` makes its own then
            log.warning("could not make a spare conversation directory: %s", exc)

    def exists(self, conversation_id: str) -> bool:
        """Whether a conversation with this id has a log."""
        return (self._dir / validate_id(conversation_id) / EVENTS_FILE).is_file()

    def append(self, conversation_id: str, event: Event) -> None:
        """Append one event as one line, flushed to the OS (not fsynced; see `sync`).

        Raises `ConversationNotFound` if the conversation was never created.
        """
        self.append_many(conversation_id, (event,))

    def append_many(self, conversation_id: str, events: Sequence[Event]) -> None:
        """`append` of events recorded together (a turn's start and its message), one
        line each, in one write."""
        cid = validate_id(conversation_id)
        lines: builtins.list[bytes] = []
        for event in events:
            unknown = unknown_value(event)
            if unknown is not None:  # read-only: only a newer daemon writes what it cannot
                raise ValueError(f"refusing to write unknown {unknown}")
            lines.append((dump_event(event) + "\n").encode())
        with self._states.locked(cid) as state:
            if state.fh is None:
                fh = self._files.open_log(cid, state)
            else:
                fh = state.fh
                self._states.track_handle(cid, state)
            try:
                fh.write(lines[0] if len(lines) == 1 else b"".join(lines))
                fh.flush()
            except OSError:
                # The file may now end mid-line; reopening re-checks it and the metadata.
                self._states.close_handle(cid, state)
                state.loaded = False
                raise
            for event, line in zip(events, lines, strict=True):
                state.note_append(event, len(line))

    def sync(self, conversation_id: str) -> None:
        """Make every appended event durable (fsync); metadata.json waits for `release`."""
        error = self.sync_all([conversation_id]).get(conversation_id)
        if error is not None:
            raise error

    def sync_all(self, conversation_ids: Iterable[str]) -> dict[str, Exception]:
        """`sync` of several conversations, with one fsync of `conversations/` for the
        new ones among them (turns that end together share it); the error of each
        conversation that failed, by id."""
        errors: dict[str, Exception] = {}
        new: list[str] = []
        for conversation_id in dict.fromkeys(conversation_ids):
            try:
                cid = validate_id(conversation_id)
                if self._sync_log(cid):
                    new.append(cid)
            except Exception as exc:  # handed to that conversation's caller
                errors[conversation_id] = exc
        if new:
            for cid in new:
                fsync_dir(self._dir / cid)  # the log's entry
            fsync_dir(self._dir)  # the conversation directories' entries
            for cid in new:
                with self._states.locked(cid) as state:
                    state.dir_sync_pending = False
        return errors

    def _sync_log(self, cid: str) -> bool:
        """fsync the log; whether its directory entries wait for a sync too."""
        with self._states.locked(cid) as state:
            if state.fh is not None:
                state.fh.flush()
                os.fsync(state.fh.fileno())
            else:
                # The handle may have been closed (`release`, or pushed out by newer
                # ones) after appends the OS has not written yet.
                try:
                    fsync_file(self._dir / cid / EVENTS_FILE)
                except FileNotFoundError:
                    raise ConversationNotFound(cid) from None
            return state.dir_sync_pending

    def sync_entries(self, conversation_id: str) -> None:
        """Make a created conversation's directory entries durable (its directory in
        `conversations/`, its log in its directory), unless that is done already.

        `sync` does it too while it is pending; this lets a caller do it earlier, e.g.
        while a new conversation's first model call runs rather than before its
        `turn_completed`. No lock is held while it fsyncs: appends go on meanwhile.
        """
        cid = validate_id(conversation_id)
        with self._states.locked(cid) as state:
            if not state.dir_sync_pending:
                return
        self._files.fsync_entries(cid)
        with self._states.locked(cid) as state:
            state.dir_sync_pending = False

    def sync_entries_of(self, conversation_ids: Iterable[str]) -> dict[str, Exception]:
        """`sync_entries` of several conversations, with one fsync of `conversations/`
        for all of them (a thousand turns started at once share it); the error of each
        conversation that failed, by id."""
        errors: dict[str, Exception] = {}
        synced: list[str] = []
        for conversation_id in conversation_ids:
            try:
                cid = validate_id(conversation_id)
                with self._states.locked(cid) as state:
                    if not state.dir_sync_pending:
                        continue
                fsync_dir(self._dir / cid)  # the log's entry
                synced.append(cid)
            except Exception as exc:  # handed to that conversation's caller
                errors[conversation_id] = exc
        if synced:
            fsync_dir(self._dir)  # the conversation directories' entries
            for cid in synced:
                with self._states.locked(cid) as state:
                    state.dir_sync_pending = False
            # In the same hop, while the new conversations' model calls run.
            self.make_spare()
        return errors

    def load(self, conversation_id: str, *, sanitized: bool = True) -> builtins.list[Event]:
        """All events of a conversation, oldest first.

        Unreadable lines are skipped with a warning (see `logfile.parse_log`). The
        result is passed through `sanitize` unless `sanitized=False` (e.g. to show the
        log of a turn still running, where unanswered tool calls are expected).
        """
        data, source = self._files.read_log(validate_id(conversation_id))
        with gc_paused(count_lines(data)):  # see gc_pause: no collector pauses for others
            events = parse_log(data, source)
            return sanitize(events) if sanitized else events

    def load_encoded(self, conversation_id: str) -> bytes:
        """The sanitized events as one JSON array, each in its stored form.

        What `sanitize` keeps as it was is sent as the line read from disk (no
        decode/re-encode); only events it adds or changes are encoded.
        """
        return encode_sanitized(*self._files.read_log(validate_id(conversation_id)))

    def delete(self, conversation_id: str) -> None:
        """Remove a conversation's directory; raise `ConversationNotFound` if absent."""
        cid = validate_id(conversation_id)
        with self._states.locked(cid) as state:
            self._states.close_handle(cid, state)
            state.loaded = state.dirty = state.dir_sync_pending = False
            directory = self._dir / cid
            if not directory.is_dir():
                raise ConversationNotFound(cid)
            shutil.rmtree(directory)

    def metadata(self, conversation_id: str) -> ConversationMeta:
        """The conversation's summary, rebuilt from the log if metadata.json is stale."""
        cid = validate_id(conversation_id)
        with self._states.locked(cid) as state:
            self._files.ensure_loaded(cid, state)
            record = state.record(cid)
        return ConversationMeta.model_validate(record.model_dump(exclude={"log_size"}))

    def release(self, conversation_id: str) -> None:
        """The conversation went idle: close its log, write its metadata.json if it is
        behind, and drop its in-memory state.

        Not an fsync (`sync` is): what was appended has reached the OS already.
        A later call reopens what it needs.
        """
        cid = validate_id(conversation_id)
        with self._states.locked(cid) as state:
            self._files.settle(cid, state, fsync=False)

    def release_all(self, conversation_ids: Iterable[str]) -> dict[str, Exception]:
        """`release` of several conversations; the error of each that failed, by id."""
        errors: dict[str, Exception] = {}
        for conversation_id in conversation_ids:
            try:
                self.release(conversation_id)
            except Exception as exc:  # handed to that conversation's caller
                errors[conversation_id] = exc
        return errors

    def close(self) -> None:
        """Flush, fsync and close every open log, writing pending metadata.

        The store stays usable: a later call reopens what it needs.
        """
        for cid in self._states:  # a snapshot of the ids
            with self._states.locked(cid) as state:
                self._files.settle(cid, state, fsync=True)
        self._spare.discard()

    # --- turns: the lease is a `flock` (see `turn_lock`); the scans are tail reads

    def lock_turn(self, conversation_id: str) -> TurnLock | None:
        """Take the conversation's turn lock; None if a live daemon holds it. Raises
        `ConversationNotFound` if the conversation does not exist."""
        try:
            return try_lock(self.conversation_dir(conversation_id))  # the lock is on the log
        except (FileNotFoundError, NotADirectoryError):
            raise ConversationNotFound(conversation_id) from None

    def last_turn(self, conversation_id: str) -> tuple[bool, TurnStart | None]:
        """See `port.ConversationStorage.last_turn`: one tail read of the log."""
        return last_turn(self.conversation_dir(conversation_id) / EVENTS_FILE)

    def scan_turns(self) -> Iterator[tuple[str, bool, TurnStart | None]]:
        """`last_turn` of each conversation directory, one tail read each."""
        try:
            entries = builtins.list(os.scandir(self._dir))
        except FileNotFoundError:
            return
        for entry in entries:
            if is_valid_id(entry.name):
                is_open, start = last_turn(Path(entry.path) / EVENTS_FILE)
                yield entry.name, is_open, start

    def __enter__(self) -> ConversationStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # Defined last: inside the class body this name shadows the builtin `list`.
    def list(self) -> builtins.list[ConversationMeta]:
        """Every conversation's summary, most recently updated first."""
        try:
            entries = builtins.list(os.scandir(self._dir))
        except FileNotFoundError:
            return []
        metas: builtins.list[ConversationMeta] = []
        for entry in entries:
            if not is_valid_id(entry.name) or not os.path.isfile(
                os.path.join(entry.path, EVENTS_FILE)
            ):
                continue  # not a conversation (stray file, half-created directory)
            try:
                metas.append(self.metadata(entry.name))
            except ConversationNotFound:
                continue  # deleted meanwhile
            except OSError as exc:
                log.warning("skipping conversation %s: %s", entry.name, exc)
        metas.sort(key=lambda m: (m.updated_at, m.id), reverse=True)
        return metas
