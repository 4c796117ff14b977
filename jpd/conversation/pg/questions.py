"""Questions pending in one member of a fleet, answerable from any member.

The member whose turn asks posts the question (`post`) and withdraws it once resolved;
another member lists them and answers one by compare-and-set (`answer`: the first
answer stored wins, a later one is told it was answered already). The asking member
collects the answers to its questions (`answers`) and checks them as its own clients'
(an invalid one is cleared with `reopen`, and the question waits on).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Literal, TypeVar

import psycopg

from jpd.conversation.pg.prompts import PgPromptRelay

T = TypeVar("T")
Key = tuple[str, str, str]
Run = Callable[[Callable[[psycopg.Connection[Any]], T]], T]


class PgQuestionBoard(PgPromptRelay):
    """`port.QuestionBoard` on the `jpd_questions` table (and the relay of requests to
    other members' clients: `prompts`)."""

    def __init__(self, run: Run[Any], holder: str, list_run: Run[Any] | None = None) -> None:
        self._run = run
        self._holder = holder
        self._list_run = list_run or run
        """`others` retries briefly: `inquiry/list` answers during an outage."""

    def post(self, key: Key, info_json: str) -> None:
        self._run(
            lambda conn: conn.execute(
                "INSERT INTO jpd_questions (conversation_id, turn_id, inquiry_id, holder, info) "
                "VALUES (%s, %s, %s, %s, %s) ON CONFLICT (conversation_id, turn_id, inquiry_id) "
                "DO UPDATE SET holder = excluded.holder, info = excluded.info, answer = NULL, "
                "answered_by = NULL",
                (*key, self._holder, info_json),
            )
        )

    def withdraw(self, key: Key) -> None:
        self._run(
            lambda conn: conn.execute(
                "DELETE FROM jpd_questions WHERE conversation_id = %s AND turn_id = %s "
                "AND inquiry_id = %s AND holder = %s",
                (*key, self._holder),
            )
        )

    def others(self) -> list[str]:
        """The questions other members wait on, unanswered (their `info_json`)."""
        rows = self._list_run(
            lambda conn: conn.execute(
                "SELECT info FROM jpd_questions WHERE holder <> %s AND answer IS NULL",
                (self._holder,),
            ).fetchall()
        )
        return [str(row[0]) for row in rows]

    def answer(
        self,
        inquiry_id: str,
        conversation_id: str | None,
        turn_id: str | None,
        value: Any,
        remember: bool,
        by: str,
    ) -> Literal["answered", "already", "missing", "ambiguous"]:
        """Store the answer to another member's question if it has none yet."""

        def work(
            conn: psycopg.Connection[Any],
        ) -> Literal["answered", "already", "missing", "ambiguous"]:
            rows = conn.execute(
                "SELECT conversation_id, turn_id, answer IS NOT NULL FROM jpd_questions "
                "WHERE inquiry_id = %s AND holder <> %s "
                "AND (%s::text IS NULL OR conversation_id = %s) "
                "AND (%s::text IS NULL OR turn_id = %s)",
                (inquiry_id, self._holder, conversation_id, conversation_id, turn_id, turn_id),
            ).fetchall()
            if not rows:
                return "missing"
            if len(rows) > 1:
                return "ambiguous"
            cid, tid, _ = rows[0]
            done = conn.execute(
                "UPDATE jpd_questions SET answer = %s, remember = %s, answered_by = %s "
                "WHERE conversation_id = %s AND turn_id = %s AND inquiry_id = %s "
                "AND answer IS NULL RETURNING 1",
                (json.dumps(value), remember, by, cid, tid, inquiry_id),
            ).fetchone()
            return "answered" if done is not None else "already"

        result: Literal["answered", "already", "missing", "ambiguous"] = self._run(work)
        return result

    def answers(self) -> list[tuple[Key, Any, bool, str]]:
        """Answers stored for this member's questions: (key, value, remember, by)."""
        rows = self._run(
            lambda conn: conn.execute(
                "SELECT conversation_id, turn_id, inquiry_id, answer, remember, answered_by "
                "FROM jpd_questions WHERE holder = %s AND answer IS NOT NULL",
                (self._holder,),
            ).fetchall()
        )
        return [((c, t, i), json.loads(a), bool(r), str(b)) for c, t, i, a, r, b in rows]

    def reopen(self, key: Key, by: str) -> None:
        """Clear an answer this member found invalid; the question waits on."""
        self._run(
            lambda conn: conn.execute(
                "UPDATE jpd_questions SET answer = NULL, answered_by = NULL "
                "WHERE conversation_id = %s AND turn_id = %s AND inquiry_id = %s "
                "AND answered_by = %s",
                (*key, by),
            )
        )
