"""Questions pending in one member of a fleet, answerable from any member.

The member whose turn asks posts the question (`post`) and withdraws it once resolved;
another member lists them and answers one by compare-and-set (`answer`: the first
answer stored wins, a later one is told it was answered already). The asking member
collects the answers to its questions (`answers`) and checks them as its own clients'
(an invalid one is cleared with `reopen`, and the question waits on).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Literal

from jpd.conversation.pg.prompts import PgPromptRelay

if TYPE_CHECKING:
    from jpd.conversation.pg.connections import Conn, PgConnections

Key = tuple[str, str, str]
Outcome = Literal["answered", "already", "missing", "ambiguous"]


class PgQuestionBoard(PgPromptRelay):
    """`port.QuestionBoard` on the `jpd_questions` table (and the relay of requests to
    other members' clients: `prompts`)."""

    def __init__(self, db: PgConnections, holder: str) -> None:
        self._db = db
        self._holder = holder

    async def post(self, key: Key, info_json: str) -> None:
        await self._db.execute(
            "INSERT INTO jpd_questions (conversation_id, turn_id, inquiry_id, holder, info) "
            "VALUES (%s, %s, %s, %s, %s) ON CONFLICT (conversation_id, turn_id, inquiry_id) "
            "DO UPDATE SET holder = excluded.holder, info = excluded.info, answer = NULL, "
            "answered_by = NULL",
            (*key, self._holder, info_json),
        )

    async def withdraw(self, key: Key) -> None:
        await self._db.execute(
            "DELETE FROM jpd_questions WHERE conversation_id = %s AND turn_id = %s "
            "AND inquiry_id = %s AND holder = %s",
            (*key, self._holder),
        )

    async def others(self) -> list[str]:
        """The questions other members wait on, unanswered (their `info_json`); a short
        retry: `inquiry/list` answers during an outage."""
        rows = await self._db.all(
            "SELECT info FROM jpd_questions WHERE holder <> %s AND answer IS NULL",
            (self._holder,),
            retry_for=1.0,
        )
        return [str(row[0]) for row in rows]

    async def answer(
        self,
        inquiry_id: str,
        conversation_id: str | None,
        turn_id: str | None,
        value: Any,
        remember: bool,
        by: str,
    ) -> Outcome:
        """Store the answer to another member's question if it has none yet."""

        async def work(conn: Conn) -> Outcome:
            cur = await conn.execute(
                "SELECT conversation_id, turn_id, answer IS NOT NULL FROM jpd_questions "
                "WHERE inquiry_id = %s AND holder <> %s "
                "AND (%s::text IS NULL OR conversation_id = %s) "
                "AND (%s::text IS NULL OR turn_id = %s)",
                (inquiry_id, self._holder, conversation_id, conversation_id, turn_id, turn_id),
            )
            rows = await cur.fetchall()
            if not rows:
                return "missing"
            if len(rows) > 1:
                return "ambiguous"
            cid, tid, _ = rows[0]
            cur = await conn.execute(
                "UPDATE jpd_questions SET answer = %s, remember = %s, answered_by = %s "
                "WHERE conversation_id = %s AND turn_id = %s AND inquiry_id = %s "
                "AND answer IS NULL RETURNING 1",
                (json.dumps(value), remember, by, cid, tid, inquiry_id),
            )
            return "answered" if await cur.fetchone() is not None else "already"

        return await self._db.run(work)

    async def answers(self) -> list[tuple[Key, Any, bool, str]]:
        """Answers stored for this member's questions: (key, value, remember, by)."""
        rows = await self._db.all(
            "SELECT conversation_id, turn_id, inquiry_id, answer, remember, answered_by "
            "FROM jpd_questions WHERE holder = %s AND answer IS NOT NULL",
            (self._holder,),
        )
        return [((c, t, i), json.loads(a), bool(r), str(b)) for c, t, i, a, r, b in rows]

    async def reopen(self, key: Key, by: str) -> None:
        """Clear an answer this member found invalid; the question waits on."""
        await self._db.execute(
            "UPDATE jpd_questions SET answer = NULL, answered_by = NULL "
            "WHERE conversation_id = %s AND turn_id = %s AND inquiry_id = %s "
            "AND answered_by = %s",
            (*key, by),
        )
