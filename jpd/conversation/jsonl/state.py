"""In-memory state of conversation logs, as the store keeps it between calls: each
conversation's `LogState`, and `LogStates`, the table of them (a lock per conversation,
a state dropped as soon as it holds nothing, at most `max_open` open log handles)."""

from __future__ import annotations

import contextlib
import io
import threading
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime

from jpd.conversation.events import ChatRequest, Event, TurnStart, now
from jpd.conversation.metadata import MetaRecord, aware, make_title


def default_max_open() -> int:
    """Log handles kept open: a quarter of the process's file limit, between 64 and
    4,096. A daemon streaming a thousand turns appends to a thousand logs in turn; with
    fewer handles each append would reopen its log."""
    try:
        import resource

        soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    except (ImportError, OSError, ValueError):  # pragma: no cover - not POSIX
        return 64
    if soft == resource.RLIM_INFINITY:
        return 4096
    return max(64, min(4096, soft // 4))


@dataclass
class LogState:
    """In-memory state of one conversation; every field but `users` is guarded by `lock`."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    users: int = 0  # calls using this state; guarded by the `LogStates` lock
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
    workspace: str | None = None

    def record(self, conversation_id: str) -> MetaRecord:
        return MetaRecord(
            id=conversation_id,
            title=self.title,
            created_at=self.created_at,
            updated_at=self.updated_at,
            event_count=self.event_count,
            workspace=self.workspace,
            log_size=self.log_size,
        )

    def adopt(self, record: MetaRecord) -> None:
        self.title, self.event_count, self.log_size = (
            record.title,
            record.event_count,
            record.log_size,
        )
        self.workspace = record.workspace
        self.created_at, self.updated_at = aware(record.created_at), aware(record.updated_at)
        self.loaded = True

    def start_empty(self, created: datetime) -> None:
        """The record of a log just created (no event yet)."""
        self.title = self.workspace = None
        self.event_count = self.log_size = 0
        self.created_at = self.updated_at = created
        self.loaded = True

    def note_append(self, event: Event, size: int) -> None:
        """Count `event`, just appended to the log as `size` bytes, into the record."""
        self.log_size += size
        self.event_count += 1
        self.updated_at = max(self.updated_at, aware(event.timestamp))
        self.dirty = True
        if isinstance(event, TurnStart) and event.workspace:
            self.workspace = event.workspace
        if self.title is None and isinstance(event, ChatRequest):
            self.title = make_title(event.content)

    def holds_nothing(self) -> bool:
        """Whether dropping this state loses nothing (all of it is on disk)."""
        return self.fh is None and not self.dirty and not self.dir_sync_pending

    def close_handle(self) -> None:
        if self.fh is not None:
            with contextlib.suppress(OSError):
                self.fh.close()
            self.fh = None


class LogStates(Mapping[str, LogState]):
    """The states by conversation id; as a mapping, read-only (iterating takes a
    snapshot of the ids). Thread-safe: one lock guards the table, each state's own
    `lock` guards that state."""

    def __init__(self, max_open: int | None = None) -> None:
        self._max_open = None if max_open is None else max(1, max_open)
        """None: `default_max_open`, asked when the first handle opens (not at start-up)."""
        self._states: dict[str, LogState] = {}
        # Conversations with an open log handle, least recently used first.
        self._handles: OrderedDict[str, LogState] = OrderedDict()
        self._lock = threading.Lock()

    def __getitem__(self, conversation_id: str) -> LogState:
        return self._states[conversation_id]

    def __len__(self) -> int:
        return len(self._states)

    def __iter__(self) -> Iterator[str]:
        with self._lock:
            return iter(list(self._states))

    @contextlib.contextmanager
    def locked(self, cid: str) -> Iterator[LogState]:
        """The conversation's state, locked; dropped after use if it holds nothing."""
        with self._lock:
            state = self._states.get(cid)
            if state is None:
                state = self._states[cid] = LogState()
            state.users += 1
        try:
            with state.lock:
                yield state
        finally:
            with self._lock:
                state.users -= 1
                # users == 0: nobody holds or waits for state.lock, its fields are stable.
                if state.users == 0 and state.holds_nothing() and self._states.get(cid) is state:
                    del self._states[cid]

    def close_handle(self, cid: str, state: LogState) -> None:
        """Close `cid`'s log handle (the caller holds `state.lock`)."""
        state.close_handle()
        with self._lock:
            if self._handles.get(cid) is state:
                del self._handles[cid]

    def track_handle(self, cid: str, state: LogState) -> None:
        """Mark `cid`'s handle most recently used; close the oldest beyond `max_open`."""
        with self._lock:
            self._handles[cid] = state
            self._handles.move_to_end(cid)
            if self._max_open is None:
                self._max_open = default_max_open()
            excess = len(self._handles) - self._max_open
            if excess <= 0:
                return
            for old_cid, old in list(self._handles.items()):
                if excess <= 0:
                    break
                # Never wait here: a busy one is skipped (its holder may want this lock).
                if old is state or not old.lock.acquire(blocking=False):
                    continue
                try:
                    old.close_handle()
                    del self._handles[old_cid]
                    excess -= 1
                    if old.users == 0 and old.holds_nothing() and self._states.get(old_cid) is old:
                        del self._states[old_cid]
                finally:
                    old.lock.release()
