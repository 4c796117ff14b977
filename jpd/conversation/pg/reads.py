"""Reads of `store.PgStore`: a conversation's events (each row the line the JSONL store
would write), its summary, the listing, and the last turns recovery looks at."""

from __future__ import annotations

import builtins

from jpd.conversation import events as ev
from jpd.conversation.logfile import encode_sanitized, parse_log
from jpd.conversation.metadata import ConversationMeta
from jpd.conversation.paths import validate_id
from jpd.conversation.pg.connections import Conn, PgConnections
from jpd.conversation.pg.rows import META_COLUMNS, meta_of, start_of
from jpd.conversation.pg.writer import OrderedWriter
from jpd.conversation.port import ConversationNotFound
from jpd.conversation.sanitize import sanitize


class PgReads(PgConnections):
    """Conversations and their events as stored (this member's appends written first)."""

    _writer: OrderedWriter

    async def _lines(self, cid: str) -> bytes:
        await self._writer.written(cid, check=False)  # read what was appended

        async def read(conn: Conn) -> bytes:
            async with conn.transaction():
                cur = await conn.execute("SELECT 1 FROM jpd_conversations WHERE id = %s", (cid,))
                if await cur.fetchone() is None:
                    raise ConversationNotFound(cid)
                cur = await conn.execute(
                    "SELECT body FROM jpd_events WHERE conversation_id = %s ORDER BY seq", (cid,)
                )
                return "".join(f"{row[0]}\n" for row in await cur.fetchall()).encode()

        return await self.run(read)

    async def load(
        self, conversation_id: str, *, sanitized: bool = True
    ) -> builtins.list[ev.Event]:
        cid = validate_id(conversation_id)
        events = parse_log(await self._lines(cid), f"store:{cid}")
        return sanitize(events) if sanitized else events

    async def load_encoded(self, conversation_id: str) -> bytes:
        cid = validate_id(conversation_id)
        return encode_sanitized(await self._lines(cid), f"store:{cid}")

    async def metadata(self, conversation_id: str) -> ConversationMeta:
        cid = validate_id(conversation_id)
        row = await self.one(f"SELECT {META_COLUMNS} FROM jpd_conversations WHERE id = %s", (cid,))
        if row is None:
            raise ConversationNotFound(cid)
        return meta_of(row)

    async def last_turn(self, conversation_id: str) -> tuple[bool, ev.TurnStart | None]:
        cid = validate_id(conversation_id)
        row = await self.one(
            "SELECT turn_open, resumable_start FROM jpd_conversations WHERE id = %s", (cid,)
        )
        if row is None:
            return False, None
        return bool(row[0]), None if row[0] else start_of(row[1])

    async def scan_turns(self) -> builtins.list[tuple[str, bool, ev.TurnStart | None]]:
        rows = await self.all(
            "SELECT id, turn_open, resumable_start FROM jpd_conversations "
            "WHERE turn_open OR resumable_start IS NOT NULL"
        )
        return [
            (cid, bool(is_open), None if is_open else start_of(start))
            for cid, is_open, start in rows
        ]

    # Defined last: inside the class body this name shadows the builtin `list`.
    async def list(self) -> builtins.list[ConversationMeta]:
        rows = await self.all(
            f"SELECT {META_COLUMNS} FROM jpd_conversations ORDER BY updated_at DESC, id DESC"
        )
        return [meta_of(row) for row in rows]
