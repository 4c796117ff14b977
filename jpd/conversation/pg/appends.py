"""Appends of `store.PgStore`: one statement each that takes the next seq, updates the
conversation's summary and inserts the event, only if the caller's lease epoch is still
the row's (fencing) and the event id is new (a retry after a lost reply appends nothing
twice). They are queued and written in order by a task per conversation (`writer`),
committed without waiting for the WAL flush; `sync` waits for both.

`append` only queues (it is on the path of every recorded event, on the event loop, and
must never wait for the database; a tool's worker thread recording a file change hands
it to the loop): a failed write is raised by the next `append`,
`written` or `sync` of that conversation, and a lease lost stops the turn
(`lease.PgLease.on_lost`)."""

from __future__ import annotations

import asyncio
import builtins
import logging
import time
import uuid
from collections.abc import Callable
from typing import Any

import anyio.from_thread
import psycopg

from jpd.conversation import events as ev
from jpd.conversation.metadata import aware, make_title
from jpd.conversation.paths import validate_id
from jpd.conversation.pg import blobs
from jpd.conversation.pg.connections import RETRY_FOR, Conn, PgConnections
from jpd.conversation.pg.lease import PgLease
from jpd.conversation.pg.rows import APPEND_SQL, turn_mark
from jpd.conversation.pg.writer import OrderedWriter
from jpd.conversation.port import ConversationNotFound, LeaseLost

log = logging.getLogger(__name__)


class PgAppends(PgConnections):
    """Writing a conversation's events, fenced by its lease."""

    holder: str
    _writer: OrderedWriter
    _leases: dict[str, PgLease]

    def append(self, conversation_id: str, event: ev.Event) -> None:
        cid = validate_id(conversation_id)
        unknown = ev.unknown_value(event)
        if unknown is not None:
            raise ValueError(f"refusing to write unknown {unknown}")
        lease = self._leases.get(cid)
        if lease is not None and not lease.check():
            raise LeaseLost(cid, "not renewed in time")
        body = ev.dump_event(event)
        params = {
            "cid": cid,
            "eid": uuid.uuid4(),  # the same id on every retry: appended at most once
            "epoch": lease.epoch if lease is not None else None,
            "holder": self.holder,
            "ts": aware(event.timestamp),
            "title": make_title(event.content) if isinstance(event, ev.ChatRequest) else None,
            "workspace": event.workspace if isinstance(event, ev.TurnStart) else None,
            "turn": turn_mark(event),
            "interrupted": isinstance(event, ev.TurnEnd) and event.stop_reason == "interrupted",
            "type": event.type,
            "body": body,
        }
        try:
            asyncio.get_running_loop()
        except RuntimeError:  # a worker thread (a tool's file change): queued by the loop
            anyio.from_thread.run_sync(self._writer.submit, cid, lease, params)
        else:
            self._writer.submit(cid, lease, params)

    async def _write(self, lease: PgLease | None, batch: builtins.list[dict[str, Any]]) -> None:
        """Appends of one conversation in one transaction, in its writer task
        (`writer.OrderedWriter`); retried whole (each is appended at most once)."""
        cid = batch[0]["cid"]

        async def write(conn: Conn) -> None:
            if len(batch) == 1:  # one statement: its own transaction, no BEGIN/COMMIT trips
                cur = await conn.execute(APPEND_SQL.encode(), batch[0])
                if await cur.fetchone() is None:
                    await self._refused(conn, cid, batch[0])
                return
            async with conn.transaction(), conn.cursor() as cur:
                # One round trip for the batch (psycopg pipelines `executemany`), each
                # statement's result read after it: a refused one raises, all roll back.
                await cur.executemany(APPEND_SQL.encode(), batch, returning=True)
                for params in batch:
                    if await cur.fetchone() is None:
                        await self._refused(conn, cid, params)
                    cur.nextset()

        # With a lease, retry only while it is held: past its deadline another daemon may
        # take the turn over, and this one must stop writing.
        budget = RETRY_FOR if lease is None else max(0.1, lease.deadline - time.monotonic())
        try:
            await self._retried(write, budget)
        except (psycopg.OperationalError, psycopg.InterfaceError) as exc:
            if lease is not None and not lease.check():
                raise LeaseLost(cid, str(exc)) from exc
            raise

    def appends_pending(self, conversation_id: str) -> bool:
        """Whether appends of the conversation are queued, not yet written (or failed)."""
        return self._writer.pending(conversation_id)

    async def written(self, conversation_id: str) -> None:
        """Wait until the conversation's appends are written (raise what failed), and
        share its new blobs: a turn's tools run only once what it did so far, the file
        snapshots of its earlier tools included, is in the store (a member taking the
        turn over undoes them)."""
        cid = validate_id(conversation_id)
        await self._writer.written(cid)
        try:
            await blobs.share(self, cid, self.conversation_dir(cid))
        except (psycopg.Error, OSError) as exc:  # shared again when the turn ends
            log.warning("could not share the files of %s: %s", cid, exc)

    def unwritten(self, conversation_id: str) -> int | None:
        """The mark of the conversation's newest append not yet committed (None: all
        are, or none will be); see `writer.OrderedWriter`."""
        return self._writer.unwritten(conversation_id)

    def when_written(
        self, conversation_id: str, mark: int, callback: Callable[[int, bool], None]
    ) -> None:
        """`callback(done, ok)` once the appends up to `mark` are committed (on the
        event loop)."""
        self._writer.when_written(conversation_id, mark, callback)

    async def _refused(self, conn: Conn, cid: str, params: dict[str, Any]) -> None:
        """Why an append inserted nothing: a retry of one that did (fine), a missing
        conversation, or a lease this store does not hold (fenced off)."""
        cur = await conn.execute(
            "SELECT 1 FROM jpd_events WHERE conversation_id = %s AND event_id = %s",
            (cid, params["eid"]),
        )
        if await cur.fetchone() is not None:
            return
        cur = await conn.execute(
            "SELECT lease_holder, lease_epoch FROM jpd_conversations WHERE id = %s", (cid,)
        )
        row = await cur.fetchone()
        if row is None:
            raise ConversationNotFound(cid)
        lease = self._leases.get(cid)
        if lease is not None:
            lease._lose(f"epoch {params['epoch']} is stale (now {row[1]} of {row[0]})")
        raise LeaseLost(cid, f"the turn lease is held by {row[0]} (epoch {row[1]})")

    async def sync(self, conversation_id: str) -> None:
        cid = validate_id(conversation_id)

        async def flush(conn: Conn) -> None:
            async with conn.transaction():
                # A commit that waits for the WAL flush covers every earlier commit.
                await conn.execute("SET LOCAL synchronous_commit = on")
                await conn.execute("SELECT pg_current_xact_id()")

        await self._writer.written(cid)
        if not await self.exists(cid):
            raise ConversationNotFound(cid)
        await self.run(flush)

    async def sync_entries(self, conversation_id: str) -> None:
        """Nothing to do: a created row is as durable as the next `sync` makes it."""
        validate_id(conversation_id)

    async def sync_entries_many(self, conversation_ids: builtins.list[str]) -> dict[str, Exception]:
        """Nothing to do, as `sync_entries`: only a bad id fails."""
        errors: dict[str, Exception] = {}
        for conversation_id in conversation_ids:
            try:
                validate_id(conversation_id)
            except ValueError as exc:
                errors[conversation_id] = exc
        return errors
