"""A conversation's attributes (title, labels, archive, pin, kept attachments, expiry:
jpd/conversation/attributes.py) in `jpd_attributes`, so that every member of a fleet
sees them: one JSON body per conversation, changed under its row lock, so that two
members changing it at once lose neither change. A body this jpd cannot read counts as
no attributes (a warning), as a damaged `attributes.json` does."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from pydantic import ValidationError

from jpd.conversation.attributes import Attributes
from jpd.conversation.port import ConversationNotFound

if TYPE_CHECKING:
    from jpd.conversation.pg.connections import Conn, PgConnections

log = logging.getLogger(__name__)


def _parse(cid: str, body: str) -> Attributes:
    try:
        return Attributes.model_validate_json(body)
    except ValidationError:
        log.warning("ignoring the damaged attributes of %s", cid)
        return Attributes()


async def read(db: PgConnections, cid: str) -> Attributes:
    """The conversation's attributes (the defaults when it has none)."""
    row = await db.one("SELECT body FROM jpd_attributes WHERE conversation_id = %s", (cid,))
    return Attributes() if row is None else _parse(cid, row[0])


async def read_all(db: PgConnections) -> dict[str, Attributes]:
    """Every conversation's attributes that has any."""
    rows = await db.all("SELECT conversation_id, body FROM jpd_attributes")
    return {str(cid): _parse(cid, body) for cid, body in rows}


async def update(
    db: PgConnections, cid: str, change: Callable[[Attributes], Attributes]
) -> Attributes:
    """Apply `change` under the row lock and store the result; `ConversationNotFound`
    when the conversation does not exist. A retry after a lost connection applies
    `change` again to what is stored then."""

    async def work(conn: Conn) -> Attributes:
        async with conn.transaction():
            await conn.execute(
                "INSERT INTO jpd_attributes (conversation_id, body) SELECT id, '{}' "
                "FROM jpd_conversations WHERE id = %s ON CONFLICT DO NOTHING",
                (cid,),
            )
            cur = await conn.execute(
                "SELECT body FROM jpd_attributes WHERE conversation_id = %s FOR UPDATE", (cid,)
            )
            row = await cur.fetchone()
            if row is None:
                raise ConversationNotFound(cid)
            updated = change(_parse(cid, row[0]))
            await conn.execute(
                "UPDATE jpd_attributes SET body = %s WHERE conversation_id = %s",
                (updated.model_dump_json(exclude_defaults=True), cid),
            )
            return updated

    return await db.run(work)
