"""The fleet's parts of `store.PgStore` (docs/scale.md): what other members run, the
model-call slots they share, the turn queue, the turn stream, the question board, and
the blobs (file snapshots, images) they exchange."""

from __future__ import annotations

import builtins
from collections.abc import Awaitable, Callable

from jpd.conversation import events as ev
from jpd.conversation.pg import blobs
from jpd.conversation.pg.connections import PgConnections
from jpd.conversation.pg.questions import PgQuestionBoard
from jpd.conversation.pg.queue import PgTurnQueue
from jpd.conversation.pg.rows import start_of
from jpd.conversation.pg.slots import ModelSlots
from jpd.conversation.pg.stream import PgTurnStream


class PgFleet(PgConnections):
    """What the members of a fleet share through the store."""

    holder: str
    lease_ttl: float
    _slots: ModelSlots
    _queue: PgTurnQueue
    _stream: PgTurnStream

    @property
    def takeover_interval(self) -> float | None:
        """Often enough that a turn is taken over within a second or so of its expiry."""
        return min(1.0, self.lease_ttl / 3)

    async def turns_elsewhere(self) -> builtins.list[tuple[str, ev.TurnStart]]:
        # A short retry: `turn/list` answers with this member's turns during an outage.
        rows = await self.all(
            "SELECT id, last_start FROM jpd_conversations WHERE turn_open "
            "AND lease_holder <> %s AND lease_expires > now()",
            (self.holder,),
            retry_for=1.0,
        )
        found = [(str(cid), start_of(line)) for cid, line in rows]
        return [(cid, start) for cid, start in found if start is not None]

    def limits_model_calls(self, provider: str) -> bool:
        return self._slots.limited(provider)

    async def model_slot(self, provider: str) -> Callable[[], Awaitable[None]] | None:
        return await self._slots.acquire(provider)

    def turn_queue(self) -> PgTurnQueue:
        return self._queue

    def turn_stream(self) -> PgTurnStream:
        return self._stream

    def question_board(self) -> PgQuestionBoard:
        return PgQuestionBoard(self, self.holder)

    async def share_blobs(self, conversation_id: str) -> None:
        await blobs.share(self, conversation_id, self.conversation_dir(conversation_id))

    async def fetch_blobs(self, conversation_id: str) -> None:
        await blobs.fetch(self, conversation_id, self.conversation_dir(conversation_id))
