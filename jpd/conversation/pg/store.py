"""`PgStore`: the storage port (`port.ConversationStorage`) on Postgres.

A conversation is a row of `jpd_conversations` (its summary, its seq counter, its last
turn and its turn lease) and its events are rows of `jpd_events` keyed by
(conversation, seq), each stored as the line the JSONL store would write. The class is
made of its parts, one module each: `connections` (the pool, retried through a
restart), `appends` (fenced by the lease epoch, written in order by `writer`),
`reads` (events, summaries, the listing), `claims` (turn leases) and `fleet` (the
queue, the stream, model-call slots, questions, blobs). This module makes it, creates
and deletes conversations and closes it. Everything runs on the daemon's event loop
(psycopg's async API; an asyncio loop): `open` connects the pool, or the first call
that needs it does.
Blobs (file snapshots, images) stay in the local data dir, shared through `jpd_blobs`;
a conversation's attributes (title, labels, ...) are rows of `jpd_attributes`.
"""

from __future__ import annotations

import builtins
import os
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path

from jpd.conversation import events as ev
from jpd.conversation.attributes import Attributes
from jpd.conversation.paths import validate_id
from jpd.conversation.pg import attributes
from jpd.conversation.pg.appends import PgAppends
from jpd.conversation.pg.claims import PgClaims
from jpd.conversation.pg.connections import START_WAIT
from jpd.conversation.pg.fleet import PgFleet
from jpd.conversation.pg.lease import PgLease
from jpd.conversation.pg.queue import PgTurnQueue
from jpd.conversation.pg.reads import PgReads
from jpd.conversation.pg.slots import ModelSlots
from jpd.conversation.pg.stream import PgTurnStream
from jpd.conversation.pg.writer import OrderedWriter
from jpd.conversation.port import ConversationBusy, ConversationExists, ConversationNotFound

PIN_GRACE = 3
"""Lease TTLs during which an expired turn with a workspace is left to its own host."""


class PgStore(PgAppends, PgReads, PgClaims, PgFleet):
    """Conversations in Postgres; see the module docstring."""

    def __init__(
        self,
        url: str,
        root: Path,
        *,
        host: str,
        lease_ttl: float = 15.0,
        max_connections: int = 8,
        provider_limits: Mapping[str, int] | None = None,
    ) -> None:
        self._root = Path(root)
        self.url = url
        self.host = host
        self.holder = f"{host}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.lease_ttl = lease_ttl
        self._leases: dict[str, PgLease] = {}
        self._released: dict[str, int] = {}  # conversation -> epoch of our last lease
        self._pool = None
        self._opening = None
        self._max_connections = max_connections
        self._stream = PgTurnStream(self, url, self.holder)
        self._writer = OrderedWriter(self._write)
        self._slots = ModelSlots(url, provider_limits or {})
        self.start_wait = START_WAIT
        self._queue = PgTurnQueue(self, PIN_GRACE * lease_ttl)

    async def create(self, conversation_id: str) -> None:
        cid = validate_id(conversation_id)
        stamp = ev.now()
        row = await self.one(
            "INSERT INTO jpd_conversations (id, created_at, updated_at) VALUES (%s, %s, %s) "
            "ON CONFLICT DO NOTHING RETURNING id",
            (cid, stamp, stamp),
            retry_for=START_WAIT,
        )
        if row is None:
            raise ConversationExists(f"conversation already exists: {cid}")

    async def delete(self, conversation_id: str) -> None:
        cid = validate_id(conversation_id)
        await self._writer.forget(cid)
        row = await self.one(
            "DELETE FROM jpd_conversations WHERE id = %s AND (lease_holder IS NULL "
            "OR lease_expires < now() OR lease_holder = %s) RETURNING id",
            (cid, self.holder),
        )
        if row is None:
            if await self.exists(cid):
                raise ConversationBusy(f"conversation {cid} has a turn running in another jpd")
            raise ConversationNotFound(cid)

    async def attributes(self, conversation_id: str) -> Attributes:
        return await attributes.read(self, validate_id(conversation_id))

    async def update_attributes(
        self, conversation_id: str, change: Callable[[Attributes], Attributes]
    ) -> Attributes:
        return await attributes.update(self, validate_id(conversation_id), change)

    async def all_attributes(self) -> dict[str, Attributes]:
        return await attributes.read_all(self)

    async def release(self, conversation_id: str) -> None:
        """Nothing is kept in memory per conversation."""
        validate_id(conversation_id)

    async def close(self) -> None:
        """Write what is queued, give back every lease still held and close the
        connections."""
        await self._writer.settle()
        for lease in builtins.list(self._leases.values()):
            await lease.release()
        await self._stream.close()
        await self._queue.close()
        pool, self._pool = self._pool, None
        if pool is not None:
            await pool.close()
