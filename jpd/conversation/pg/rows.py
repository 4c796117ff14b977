"""The statements and row conversions of `store.PgStore`."""

from __future__ import annotations

from typing import Any

import psycopg

from jpd.conversation import events as ev
from jpd.conversation.metadata import ConversationMeta

APPEND_SQL = """
WITH c AS (
  UPDATE jpd_conversations SET
    next_seq = next_seq + 1,
    event_count = event_count + 1,
    -- the first event dates the conversation (as the JSONL store's summary does)
    created_at = CASE WHEN event_count = 0 THEN least(created_at, %(ts)s) ELSE created_at END,
    updated_at = CASE WHEN event_count = 0 THEN %(ts)s ELSE greatest(updated_at, %(ts)s) END,
    title = coalesce(title, %(title)s),
    workspace = coalesce(%(workspace)s, workspace),
    turn_open = CASE %(turn)s WHEN 'start' THEN true WHEN 'resume' THEN true
                              WHEN 'end' THEN false ELSE turn_open END,
    last_start = CASE %(turn)s WHEN 'start' THEN %(body)s ELSE last_start END,
    resumable_start = CASE WHEN %(turn)s = 'end' AND %(interrupted)s THEN last_start
                           WHEN %(turn)s IN ('start', 'resume', 'end') THEN NULL
                           ELSE resumable_start END
  WHERE id = %(cid)s
    AND (CASE WHEN %(epoch)s::bigint IS NULL
              THEN lease_holder IS NULL OR lease_expires < now()
              ELSE lease_epoch = %(epoch)s AND lease_holder = %(holder)s END)
    AND NOT EXISTS (SELECT 1 FROM jpd_events e
                     WHERE e.conversation_id = %(cid)s AND e.event_id = %(eid)s)
  RETURNING next_seq - 1 AS seq)
INSERT INTO jpd_events (conversation_id, seq, event_id, type, body)
SELECT %(cid)s, seq, %(eid)s, %(type)s, %(body)s FROM c
RETURNING seq
"""
META_COLUMNS = "id, title, created_at, updated_at, event_count, workspace"


class StoreUnavailable(RuntimeError):
    """The database could not be reached when the store opened."""


def redacted(url: str) -> str:
    """`url` without its password, to show in messages."""
    try:
        params = psycopg.conninfo.conninfo_to_dict(url)
    except psycopg.ProgrammingError:
        return "(an invalid URL)"
    params.pop("password", None)
    return " ".join(f"{k}={v}" for k, v in sorted(params.items()))


def turn_mark(event: ev.Event) -> str | None:
    if isinstance(event, ev.TurnStart):
        return "start"
    if isinstance(event, ev.TurnResume):
        return "resume"
    if isinstance(event, ev.TurnEnd):
        return "end"
    return None


def meta_of(row: tuple[Any, ...]) -> ConversationMeta:
    cid, title, created, updated, count, workspace = row
    return ConversationMeta(
        id=cid,
        title=title,
        created_at=created,
        updated_at=updated,
        event_count=count,
        workspace=workspace,
    )


def start_of(line: str | None) -> ev.TurnStart | None:
    if line is None:
        return None
    try:
        event = ev.parse_event(line)
    except ValueError:
        return None
    return event if isinstance(event, ev.TurnStart) else None
