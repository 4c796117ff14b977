"""Asking a client of another fleet member (docs/scale.md): the part of the question
board (`questions.PgQuestionBoard`) that lets a question reach the clients attached to
its conversation on any member.

Each member records which of its clients able to answer (a prompt's answer types, or
permission requests) are subscribed to which conversations (`watch`, `jpd_watchers`,
refreshed every few seconds: a member that stops is forgotten once its rows age). The
member whose turn asks reads them (`watchers`) and relays a request to one of those
clients (`relay`, `jpd_relayed`); the client's member sends it, stores the client's
reply (`reply`), and the asker reads it (`replies`) and drops the row. A notification
(`inquiry/resolved`) travels the same way, dropped by the member that delivered it.
"""

from __future__ import annotations

import builtins
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from jpd.conversation.pg.connections import Conn, PgConnections

STALE = 6.0
"""Seconds after which a member's watcher rows count as gone (it refreshes every 2)."""
FORGOTTEN = 86_400
"""Seconds after which a relayed row nobody dropped (its members stopped) is deleted."""


class PgPromptRelay:
    """`port.QuestionBoard`'s relay of requests to the clients of other members."""

    _db: PgConnections
    _holder: str

    async def watch(self, rows: builtins.list[tuple[str, int, str]]) -> None:
        """This member's capable clients and the conversations they are subscribed to
        ((conversation, link id, capabilities as JSON)), replacing the earlier ones."""

        async def work(conn: Conn) -> None:
            async with conn.transaction():  # never seen without its clients
                await conn.execute("DELETE FROM jpd_watchers WHERE member = %s", (self._holder,))
                if rows:
                    async with conn.cursor() as cur:
                        await cur.executemany(
                            "INSERT INTO jpd_watchers (conversation_id, member, link_id, "
                            "capabilities) VALUES (%s, %s, %s, %s)",
                            [(cid, self._holder, link, caps) for cid, link, caps in rows],
                        )
            await conn.execute(
                "DELETE FROM jpd_relayed WHERE made < now() - make_interval(secs => %s)",
                (FORGOTTEN,),
            )

        await self._db.run(work)

    async def watchers(
        self, conversation_ids: builtins.list[str]
    ) -> builtins.list[tuple[str, str, int, str]]:
        """Other members' live capable clients of these conversations: (conversation,
        member, link id, capabilities as JSON); a short retry, like `others`."""
        rows = await self._db.all(
            "SELECT conversation_id, member, link_id, capabilities FROM jpd_watchers "
            "WHERE conversation_id = ANY(%s) AND member <> %s "
            "AND seen > now() - make_interval(secs => %s)",
            (conversation_ids, self._holder, STALE),
            retry_for=1.0,
        )
        return [(str(c), str(m), int(i), str(caps)) for c, m, i, caps in rows]

    async def relay(self, member: str, link_id: int, method: str, params: str) -> int:
        """Send a request (or a notification) to a client of `member`; returns its id."""
        row = await self._db.one(
            "INSERT INTO jpd_relayed (asker, member, link_id, method, params) "
            "VALUES (%s, %s, %s, %s, %s) RETURNING id",
            (self._holder, member, link_id, method, params),
        )
        assert row is not None
        return int(row[0])

    async def relayed(self) -> builtins.list[tuple[int, int, str, str]]:
        """What other members sent to this member's clients, not replied to yet:
        (id, link id, method, params)."""
        rows = await self._db.all(
            "SELECT id, link_id, method, params FROM jpd_relayed "
            "WHERE member = %s AND reply IS NULL ORDER BY id",
            (self._holder,),
        )
        return [(int(i), int(link), str(m), str(p)) for i, link, m, p in rows]

    async def reply(self, relayed_id: int, body: str | None) -> None:
        """The client's reply to a relayed request (None: a notification was delivered,
        the row goes)."""
        if body is None:
            await self._db.execute(
                "DELETE FROM jpd_relayed WHERE id = %s AND member = %s",
                (relayed_id, self._holder),
            )
            return
        await self._db.execute(
            "UPDATE jpd_relayed SET reply = %s WHERE id = %s AND member = %s",
            (body, relayed_id, self._holder),
        )

    async def replies(self, ids: builtins.list[int]) -> dict[int, str]:
        """The replies to this member's relayed requests among `ids`."""
        rows = await self._db.all(
            "SELECT id, reply FROM jpd_relayed WHERE id = ANY(%s) AND asker = %s "
            "AND reply IS NOT NULL",
            (ids, self._holder),
        )
        return {int(i): str(body) for i, body in rows}

    async def drop(self, ids: builtins.list[int]) -> None:
        """Forget this member's relayed requests (answered, or no longer asked)."""
        await self._db.execute(
            "DELETE FROM jpd_relayed WHERE id = ANY(%s) AND asker = %s", (ids, self._holder)
        )
