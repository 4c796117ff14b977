"""Append-only conversation store.

Layout under the data dir: `conversations/<id>/events.jsonl` (one event per line,
only ever appended) and `conversations/<id>/metadata.json` (derived, rebuildable).

Durability model: each append is written and flushed (it reaches the OS at once);
`sync` fsyncs the log and is called by the daemon at turn end and before a question
is asked. `metadata.json` is a cache: it records the log size it describes, and when
it is missing, corrupt or describes a different size (a crash after appends but
before `sync`), it is rebuilt from the log. One process (the daemon) owns a data dir;
within it, each conversation has a lock, so the methods are thread-safe.
"""

from __future__ import annotations

import builtins
import contextlib
import io
import logging
import os
import shutil
import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType

from jpd.conversation.events import ChatRequest, Event, dump_event, now
from jpd.conversation.logfile import ends_with_newline, fsync_dir, parse_log
from jpd.conversation.metadata import (
    ConversationMeta,
    MetaRecord,
    aware,
    make_title,
    read_record,
    record_from_events,
    write_record,
)
from jpd.conversation.paths import (
    EVENTS_FILE,
    METADATA_FILE,
    InvalidConversationId,
    default_data_dir,
    is_valid_id,
    new_conversation_id,
    validate_id,
)
from jpd.conversation.sanitize import sanitize

log = logging.getLogger(__name__)

__all__ = [
    "ConversationExists",
    "ConversationMeta",
    "ConversationNotFound",
    "ConversationStore",
    "InvalidConversationId",
    "default_data_dir",
    "new_conversation_id",
    "validate_id",
]


class ConversationNotFound(KeyError):
    """No conversation with this id exists in the store."""

    def __init__(self, conversation_id: str) -> None:
        super().__init__(conversation_id)
        self.conversation_id = conversation_id

    def __str__(self) -> str:
        return f"conversation not found: {self.conversation_id}"


class ConversationExists(FileExistsError):
    """`create` was called for an id that already has a log."""


@dataclass
class _State:
    """In-memory state of one conversation; every field is guarded by `lock`."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    fh: io.BufferedWriter | None = None
    loaded: bool = False  # `record` describes the log on disk
    dirty: bool = False  # metadata.json is behind `record`
    dir_sync_pending: bool = False  # created here, directory entries not yet fsynced
    # Mutable copies of the record's fields: updating them per append stays O(1).
    title: str | None = None
    created_at: datetime = field(default_factory=now)
    updated_at: datetime = field(default_factory=now)
    event_count: int = 0
    log_size: int = 0

    def record(self, conversation_id: str) -> MetaRecord:
        return MetaRecord(
            id=conversation_id,
            title=self.title,
            created_at=self.created_at,
            updated_at=self.updated_at,
            event_count=self.event_count,
            log_size=self.log_size,
        )

    def adopt(self, record: MetaRecord) -> None:
        self.title, self.event_count, self.log_size = (
            record.title,
            record.event_count,
            record.log_size,
        )
        self.created_at, self.updated_at = aware(record.created_at), aware(record.updated_at)
        self.loaded = True

    def close_handle(self) -> None:
        if self.fh is not None:
            with contextlib.suppress(OSError):
                self.fh.close()
            self.fh = None


class ConversationStore:
    """Conversations under `root/conversations/`; see the module docstring.

    Log handles are opened lazily on first append and kept open until `close` or
    `delete`. Per-conversation state stays in memory for the store's lifetime.
    """

    def __init__(self, root: Path) -> None:
        self._root = Path(root)
        self._dir = self._root / "conversations"
        self._states: dict[str, _State] = {}
        self._states_lock = threading.Lock()

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

    def create(self, conversation_id: str) -> None:
        """Create an empty conversation; raise `ConversationExists` if it has a log."""
        cid = validate_id(conversation_id)
        state = self._state(cid)
        with state.lock:
            directory = self._dir / cid
            directory.mkdir(parents=True, exist_ok=True)
            try:
                with open(directory / EVENTS_FILE, "xb"):
                    pass
            except FileExistsError:
                raise ConversationExists(f"conversation already exists: {cid}") from None
            state.close_handle()
            created = now()
            state.adopt(MetaRecord(id=cid, created_at=created, updated_at=created, log_size=0))
            state.dir_sync_pending = True
            self._write_meta(cid, state)

    def exists(self, conversation_id: str) -> bool:
        """Whether a conversation with this id has a log."""
        return (self._dir / validate_id(conversation_id) / EVENTS_FILE).is_file()

    def append(self, conversation_id: str, event: Event) -> None:
        """Append one event as one line, flushed to the OS (not fsynced; see `sync`).

        Raises `ConversationNotFound` if the conversation was never created.
        """
        cid = validate_id(conversation_id)
        data = (dump_event(event) + "\n").encode()
        state = self._state(cid)
        with state.lock:
            fh = state.fh if state.fh is not None else self._open(cid, state)
            try:
                fh.write(data)
                fh.flush()
            except OSError:
                # The file may now end mid-line; reopening re-checks it and the metadata.
                state.close_handle()
                state.loaded = False
                raise
            state.log_size += len(data)
            state.event_count += 1
            state.updated_at = max(state.updated_at, aware(event.timestamp))
            state.dirty = True
            if state.title is None and isinstance(event, ChatRequest):
                state.title = make_title(event.content)
                if state.title is not None:
                    self._write_meta(cid, state)

    def sync(self, conversation_id: str) -> None:
        """Make every appended event durable (fsync) and write metadata if it changed."""
        cid = validate_id(conversation_id)
        state = self._state(cid)
        with state.lock:
            directory = self._dir / cid
            if state.fh is not None:
                state.fh.flush()
                os.fsync(state.fh.fileno())
            elif not (directory / EVENTS_FILE).is_file():
                raise ConversationNotFound(cid)
            if state.dir_sync_pending:
                fsync_dir(directory)
                fsync_dir(self._dir)
                state.dir_sync_pending = False
            if state.dirty and state.loaded:
                self._write_meta(cid, state)

    def load(self, conversation_id: str, *, sanitized: bool = True) -> builtins.list[Event]:
        """All events of a conversation, oldest first.

        Unreadable lines are skipped with a warning (see `logfile.parse_log`). The
        result is passed through `sanitize` unless `sanitized=False` (e.g. to show the
        log of a turn still running, where unanswered tool calls are expected).
        """
        cid = validate_id(conversation_id)
        path = self._dir / cid / EVENTS_FILE
        state = self._state(cid)
        with state.lock:  # never read half of a line being appended
            try:
                data = path.read_bytes()
            except FileNotFoundError:
                raise ConversationNotFound(cid) from None
        events = parse_log(data, str(path))
        return sanitize(events) if sanitized else events

    def delete(self, conversation_id: str) -> None:
        """Remove a conversation's directory; raise `ConversationNotFound` if absent."""
        cid = validate_id(conversation_id)
        state = self._state(cid)
        with state.lock:
            state.close_handle()
            state.loaded = state.dirty = state.dir_sync_pending = False
            directory = self._dir / cid
            if not directory.is_dir():
                raise ConversationNotFound(cid)
            shutil.rmtree(directory)

    def metadata(self, conversation_id: str) -> ConversationMeta:
        """The conversation's summary, rebuilt from the log if metadata.json is stale."""
        cid = validate_id(conversation_id)
        state = self._state(cid)
        with state.lock:
            self._ensure_loaded(cid, state)
            record = state.record(cid)
        return ConversationMeta.model_validate(record.model_dump(exclude={"log_size"}))

    def close(self) -> None:
        """Flush, fsync and close every open log, writing pending metadata.

        The store stays usable: a later call reopens what it needs.
        """
        with self._states_lock:
            states = builtins.list(self._states.items())
        for cid, state in states:
            with state.lock:
                if state.fh is not None:
                    with contextlib.suppress(OSError):
                        state.fh.flush()
                        os.fsync(state.fh.fileno())
                state.close_handle()
                if state.dirty and state.loaded and (self._dir / cid).is_dir():
                    self._write_meta(cid, state)

    def __enter__(self) -> ConversationStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # --- internals (the `_open`/`_ensure_loaded`/`_write_meta` caller holds state.lock)

    def _state(self, cid: str) -> _State:
        with self._states_lock:
            state = self._states.get(cid)
            if state is None:
                state = self._states[cid] = _State()
            return state

    def _open(self, cid: str, state: _State) -> io.BufferedWriter:
        self._ensure_loaded(cid, state)
        path = self._dir / cid / EVENTS_FILE
        fh = open(path, "ab")  # noqa: SIM115 - kept open across appends, closed in close()
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
        return fh

    def _ensure_loaded(self, cid: str, state: _State) -> None:
        if state.loaded:
            return
        directory = self._dir / cid
        path = directory / EVENTS_FILE
        try:
            stat = path.stat()
        except FileNotFoundError:
            raise ConversationNotFound(cid) from None
        record = read_record(directory / METADATA_FILE)
        if record is not None and record.id == cid and record.log_size == stat.st_size:
            state.adopt(record)
            state.dirty = False
            return
        # Missing, corrupt or stale: the log is the truth.
        data = path.read_bytes()
        mtime = datetime.fromtimestamp(stat.st_mtime, UTC)
        events = parse_log(data, str(path))
        state.adopt(record_from_events(cid, events, len(data), mtime))
        self._write_meta(cid, state)

    def _write_meta(self, cid: str, state: _State) -> None:
        path = self._dir / cid / METADATA_FILE
        state.dirty = not write_record(path, state.record(cid))

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
