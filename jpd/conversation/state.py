"""In-memory state of one conversation's log, as the store keeps it between calls."""

from __future__ import annotations

import contextlib
import io
import threading
from dataclasses import dataclass, field
from datetime import datetime

from jpd.conversation.events import now
from jpd.conversation.metadata import MetaRecord, aware


@dataclass
class LogState:
    """In-memory state of one conversation; every field but `users` is guarded by `lock`."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    users: int = 0  # calls using this state; guarded by the store's `_states_lock`
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

    def holds_nothing(self) -> bool:
        """Whether dropping this state loses nothing (all of it is on disk)."""
        return self.fh is None and not self.dirty and not self.dir_sync_pending

    def close_handle(self) -> None:
        if self.fh is not None:
            with contextlib.suppress(OSError):
                self.fh.close()
            self.fh = None
