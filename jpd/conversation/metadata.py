"""`metadata.json`: a rebuildable summary cache of one conversation's log."""

import logging
from datetime import UTC, datetime
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from jpd.conversation.events import ChatRequest, Event, TurnStart
from jpd.conversation.in_place import write_over
from jpd.conversation.logfile import drop_sliced, parse_log
from jpd.conversation.paths import EVENTS_FILE, METADATA_FILE

log = logging.getLogger(__name__)

TITLE_MAX = 80


class ConversationMeta(BaseModel):
    """Summary of a conversation, as listed by `conversation/list`."""

    model_config = ConfigDict(extra="ignore", frozen=True, defer_build=True)

    id: str
    title: str | None = None
    created_at: datetime
    updated_at: datetime
    event_count: int = 0
    workspace: str | None = None
    """The workspace of the latest turn that had one (protocol.md 5.11)."""


class MetaRecord(ConversationMeta):
    """The on-disk record: the summary plus the log size it describes."""

    # Any other size of events.jsonl means the record is stale (crash before sync).
    log_size: int


def make_title(content: str) -> str | None:
    """The title for a first message: its first non-blank line, at most 80 characters."""
    line = next((ln.strip() for ln in content.splitlines() if ln.strip()), None)
    if line is None:
        return None
    if len(line) > TITLE_MAX:
        line = line[: TITLE_MAX - 1].rstrip() + "\u2026"
    return line


def aware(moment: datetime) -> datetime:
    """`moment` with UTC assumed when it is naive (legacy records), so times compare."""
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def record_from_events(
    conversation_id: str, events: list[Event], log_size: int, log_mtime: datetime
) -> MetaRecord:
    """Rebuild a record from a parsed log (`log_mtime` dates an empty log)."""
    stamps = [aware(e.timestamp) for e in events]
    created = stamps[0] if stamps else log_mtime
    titles = (make_title(e.content) for e in events if isinstance(e, ChatRequest))
    workspaces = [e.workspace for e in events if isinstance(e, TurnStart) and e.workspace]
    return MetaRecord(
        id=conversation_id,
        title=next((t for t in titles if t is not None), None),
        created_at=created,
        updated_at=max([created, *stamps]),
        event_count=len(events),
        workspace=workspaces[-1] if workspaces else None,
        log_size=log_size,
    )


def read_record(path: Path) -> MetaRecord | None:
    """The record at `path`, or None (with a warning if it exists but is unreadable)."""
    try:
        text = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        log.warning("cannot read %s: %s", path, exc)
        return None
    try:
        return MetaRecord.model_validate_json(text)
    except ValidationError:
        log.warning("corrupt %s; rebuilding it from the log", path)
        return None


def load_record(directory: Path, conversation_id: str) -> tuple[MetaRecord, bool] | None:
    """The record of the conversation in `directory`, and whether its metadata.json holds
    it; None if the conversation has no log.

    A metadata.json that is missing, corrupt or describes another log size (a crash
    before it was written) is not used: the record is rebuilt from the log, the truth.
    """
    path = directory / EVENTS_FILE
    try:
        stat = path.stat()
    except FileNotFoundError:
        return None
    record = read_record(directory / METADATA_FILE)
    if record is not None and record.id == conversation_id and record.log_size == stat.st_size:
        return record, True
    data = path.read_bytes()
    mtime = datetime.fromtimestamp(stat.st_mtime, UTC)
    events = parse_log(data, str(path))
    record = record_from_events(conversation_id, events, len(data), mtime)
    drop_sliced(events)  # see drop_sliced
    return record, False


def write_record(path: Path, record: MetaRecord) -> bool:
    """Write `record` over `path`, in place; False (and a warning) on failure.

    Neither atomic nor fsynced: a record lost, stale or torn (a crash mid-write leaves
    JSON that does not parse, or describes another log size) is detected and rebuilt
    (`load_record`), so a failure here never fails the caller's operation. In place
    rather than a new file renamed over it: creating a file cost a fifth of a
    millisecond of CPU, paid at the end of every turn.
    """
    payload = record.model_dump_json(indent=2).encode()
    try:
        write_over(path, payload)
    except OSError as exc:
        log.warning("cannot write %s: %s", path, exc)
        return False
    return True
