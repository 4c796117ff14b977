"""The live events of the turns a fleet member runs, for clients of other members.

The member running a turn writes its `turn/event`s (as sent to its own clients) into
`jpd_stream` in batches, never a write per token, then `NOTIFY`s the conversation's
channel. Members with a client attached to that conversation `LISTEN` on it (and only
they: a member with none receives nothing), read the rows after their cursor and hand
them to their clients. A conversation keeps the rows of its latest turn only.
"""

from __future__ import annotations

import hashlib
import logging
from typing import TYPE_CHECKING, Any

import anyio
import psycopg
from psycopg import sql

if TYPE_CHECKING:
    from jpd.conversation.pg.connections import Conn, PgConnections

log = logging.getLogger(__name__)


def channel(conversation_id: str) -> str:
    """The conversation's notification channel (an identifier of bounded length)."""
    return "jpd_" + hashlib.sha1(conversation_id.encode()).hexdigest()[:24]


_PUBLISH = """
WITH earlier AS (  -- the rows of earlier turns are no longer followed
  DELETE FROM jpd_stream s USING unnest(%s::text[], %s::text[]) AS n(cid, turn)
   WHERE s.conversation_id = n.cid AND s.turn_id <> n.turn),
added AS (
  INSERT INTO jpd_stream (conversation_id, member, turn_id, body)
  SELECT r.cid, %s, r.turn, r.body
    FROM unnest(%s::text[], %s::text[], %s::text[]) WITH ORDINALITY AS r(cid, turn, body, ord)
   ORDER BY r.ord)
SELECT pg_notify(name, '') FROM unnest(%s::text[]) AS name
"""


class PgTurnStream:
    """`port.TurnStream` on `jpd_stream` and LISTEN/NOTIFY, on the event loop: the
    listener is a connection of its own, awaited by one task (`Followers.run`)."""

    def __init__(self, db: PgConnections, url: str, member: str) -> None:
        self._db = db
        self._url = url
        self._member = member
        self._turns: dict[str, str] = {}  # conversation -> the turn whose rows it keeps
        self._wanted: dict[str, str] = {}  # channel -> conversation
        self._listening: set[str] = set()
        self._listener: psycopg.AsyncConnection[Any] | None = None
        self._waiting = False
        self._wake_channel = channel("wake:" + member)
        self._wake_sql = sql.SQL("NOTIFY {}").format(sql.Identifier(self._wake_channel))

    async def publish(self, conversation_id: str, turn_id: str, bodies: list[str]) -> None:
        await self.publish_all({(conversation_id, turn_id): bodies})

    async def publish_all(self, batches: dict[tuple[str, str], list[str]]) -> None:
        """Every conversation's batch in one statement (one round trip per flush, however
        many turns run here; atomic, and its notifications go out on its commit)."""
        new_turns = [(c, t) for c, t in batches if self._turns.get(c) != t]
        rows = [(c, t, b) for (c, t), bodies in batches.items() for b in bodies]
        params = (
            [c for c, _ in new_turns],
            [t for _, t in new_turns],
            self._member,
            [c for c, _, _ in rows],
            [t for _, t, _ in rows],
            [b for _, _, b in rows],
            sorted({channel(c) for c, _ in batches}),
        )
        await self._db.execute(_PUBLISH, params)
        for conversation_id, turn_id in batches:
            self._turns[conversation_id] = turn_id

    async def read(self, conversation_id: str, after: int) -> list[tuple[int, str]]:
        """Rows other members wrote after position `after`: (position, body)."""
        return (await self.read_all({conversation_id: after})).get(conversation_id, [])

    async def read_all(self, cursors: dict[str, int]) -> dict[str, list[tuple[int, str]]]:
        """`read` of several conversations in one query: conversation -> its rows."""
        ids, afters = list(cursors), [cursors[c] for c in cursors]
        rows = await self._db.all(
            "SELECT s.conversation_id, s.n, s.body FROM jpd_stream s "
            "JOIN unnest(%s::text[], %s::bigint[]) AS c(id, after) "
            "ON s.conversation_id = c.id AND s.n > c.after "
            "WHERE s.member <> %s ORDER BY s.n",
            (ids, afters, self._member),
        )
        found: dict[str, list[tuple[int, str]]] = {}
        for cid, n, body in rows:
            found.setdefault(str(cid), []).append((int(n), str(body)))
        return found

    async def follow(self, conversation_id: str) -> None:
        """Listen on the conversation's channel: the waiting listener is woken (its own
        channel) to LISTEN at once and read what was written before."""
        self._wanted[channel(conversation_id)] = conversation_id
        if self._waiting:

            async def wake(conn: Conn) -> None:
                await conn.execute(self._wake_sql)

            try:
                await self._db.run(wake)
            except Exception as exc:  # it listens at its next wait
                log.warning("could not wake the listener: %s", exc)

    def unfollow(self, conversation_id: str) -> None:
        self._wanted.pop(channel(conversation_id), None)

    async def wait(self, timeout: float) -> set[str]:  # noqa: ASYNC109 - a bound, not a deadline
        """Wait up to `timeout` s for notifications; the conversations notified (all
        followed ones after a (re)connection, whose notifications may have been missed).
        Awaited by one task at a time."""
        fresh = self._listener is None or self._listener.closed
        self._waiting = True  # a `follow` from now on wakes it
        try:
            if fresh:
                self._listener = await psycopg.AsyncConnection.connect(self._url, autocommit=True)
                await self._listener.execute(
                    sql.SQL("LISTEN {}").format(sql.Identifier(self._wake_channel))
                )
                self._listening = set()
            conn = self._listener
            assert conn is not None
            wanted = dict(self._wanted)
            added = set(wanted) - self._listening
            for name in added:
                await conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(name)))
                self._listening.add(name)
            for name in self._listening - set(wanted):
                await conn.execute(sql.SQL("UNLISTEN {}").format(sql.Identifier(name)))
                self._listening.discard(name)
            # Rows written before a LISTEN sent no notification here: read them too.
            notified = set(wanted.values()) if fresh else {wanted[name] for name in added}
            if not notified:  # wait for the first, then take what else came with it
                async for note in conn.notifies(timeout=timeout, stop_after=1):
                    notified.add(self._wanted.get(note.channel, ""))
                async for note in conn.notifies(timeout=0.001):
                    notified.add(self._wanted.get(note.channel, ""))
            notified.discard("")
            return notified
        except BaseException:  # an error, or cancelled mid-statement: a new one next time
            await self.close()
            raise
        finally:
            self._waiting = False

    async def close(self) -> None:
        conn, self._listener = self._listener, None
        if conn is not None:
            with anyio.CancelScope(shield=True):
                await conn.close()
