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
import threading
from collections.abc import Callable
from typing import Any, TypeVar

import psycopg
from psycopg import sql

log = logging.getLogger(__name__)

T = TypeVar("T")
Run = Callable[[Callable[[psycopg.Connection[Any]], T]], T]


def channel(conversation_id: str) -> str:
    """The conversation's notification channel (an identifier of bounded length)."""
    return "jpd_" + hashlib.sha1(conversation_id.encode()).hexdigest()[:24]


class PgTurnStream:
    """`port.TurnStream` on `jpd_stream` and LISTEN/NOTIFY."""

    def __init__(self, run: Run[Any], url: str, member: str) -> None:
        self._run = run
        self._url = url
        self._member = member
        self._turns: dict[str, str] = {}  # conversation -> the turn whose rows it keeps
        self._lock = threading.Lock()
        self._wanted: dict[str, str] = {}  # channel -> conversation
        self._listening: set[str] = set()
        self._listener: psycopg.Connection[Any] | None = None
        self._wake_channel = channel("wake:" + member)
        self._wake_sql = sql.SQL("NOTIFY {}").format(sql.Identifier(self._wake_channel))

    def publish(self, conversation_id: str, turn_id: str, bodies: list[str]) -> None:
        self.publish_all({(conversation_id, turn_id): bodies})

    def publish_all(self, batches: dict[tuple[str, str], list[str]]) -> None:
        """Every conversation's batch in one transaction (one round trip per flush,
        however many turns run here)."""
        new_turns = [(c, t) for c, t in batches if self._turns.get(c) != t]
        rows = [(c, self._member, t, b) for (c, t), bodies in batches.items() for b in bodies]

        def work(conn: psycopg.Connection[Any]) -> None:
            with conn.transaction(), conn.cursor() as cur:
                if new_turns:  # the rows of earlier turns are no longer followed
                    cur.executemany(
                        "DELETE FROM jpd_stream WHERE conversation_id = %s AND turn_id <> %s",
                        new_turns,
                    )
                cur.executemany(
                    "INSERT INTO jpd_stream (conversation_id, member, turn_id, body) "
                    "VALUES (%s, %s, %s, %s)",
                    rows,
                )
                for name in sorted({channel(c) for c, _ in batches}):
                    cur.execute(sql.SQL("NOTIFY {}").format(sql.Identifier(name)))

        self._run(work)
        for conversation_id, turn_id in batches:
            self._turns[conversation_id] = turn_id

    def read(self, conversation_id: str, after: int) -> list[tuple[int, str]]:
        """Rows other members wrote after position `after`: (position, body)."""
        return self.read_all({conversation_id: after}).get(conversation_id, [])

    def read_all(self, cursors: dict[str, int]) -> dict[str, list[tuple[int, str]]]:
        """`read` of several conversations in one query: conversation -> its rows."""
        ids, afters = list(cursors), [cursors[c] for c in cursors]
        rows = self._run(
            lambda conn: conn.execute(
                "SELECT s.conversation_id, s.n, s.body FROM jpd_stream s "
                "JOIN unnest(%s::text[], %s::bigint[]) AS c(id, after) "
                "ON s.conversation_id = c.id AND s.n > c.after "
                "WHERE s.member <> %s ORDER BY s.n",
                (ids, afters, self._member),
            ).fetchall()
        )
        found: dict[str, list[tuple[int, str]]] = {}
        for cid, n, body in rows:
            found.setdefault(str(cid), []).append((int(n), str(body)))
        return found

    def follow(self, conversation_id: str) -> None:
        """Listen on the conversation's channel: the waiting listener is woken (its own
        channel) to LISTEN at once and read what was written before."""
        with self._lock:
            self._wanted[channel(conversation_id)] = conversation_id
            waiting = self._listener is not None
        if waiting:
            try:
                self._run(lambda conn: conn.execute(self._wake_sql))
            except Exception as exc:  # it listens at its next wait
                log.warning("could not wake the listener: %s", exc)

    def unfollow(self, conversation_id: str) -> None:
        with self._lock:
            self._wanted.pop(channel(conversation_id), None)

    def wait(self, timeout: float) -> set[str]:
        """Block up to `timeout` s for notifications; the conversations notified (all
        followed ones after a (re)connection, whose notifications may have been missed).
        Called from one thread at a time."""
        fresh = self._listener is None or self._listener.closed
        try:
            if fresh:
                self._listener = psycopg.connect(self._url, autocommit=True)
                self._listener.execute(
                    sql.SQL("LISTEN {}").format(sql.Identifier(self._wake_channel))
                )
                self._listening = set()
            conn = self._listener
            assert conn is not None
            with self._lock:
                wanted = dict(self._wanted)
            added = set(wanted) - self._listening
            for name in added:
                conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(name)))
                self._listening.add(name)
            for name in self._listening - set(wanted):
                conn.execute(sql.SQL("UNLISTEN {}").format(sql.Identifier(name)))
                self._listening.discard(name)
            # Rows written before a LISTEN sent no notification here: read them too.
            notified = set(wanted.values()) if fresh else {wanted[name] for name in added}
            if not notified:  # wait for the first, then take what else came with it
                for note in conn.notifies(timeout=timeout, stop_after=1):
                    notified.add(wanted.get(note.channel, ""))
                for note in conn.notifies(timeout=0.001):
                    notified.add(wanted.get(note.channel, ""))
            notified.discard("")
            return notified
        except psycopg.Error:
            if self._listener is not None:
                self._listener.close()
            self._listener = None
            raise

    def close(self) -> None:
        if self._listener is not None:
            self._listener.close()
