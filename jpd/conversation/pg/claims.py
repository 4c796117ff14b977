"""Turn leases of `store.PgStore`: claiming a conversation's lease (`lease.CLAIM_SQL`),
holding it (`lease.PgLease` renews it and fences this member's appends), and what this
member remembers of the leases it gave back."""

from __future__ import annotations

import functools
import time
from datetime import datetime
from typing import Any

from jpd.conversation.paths import validate_id
from jpd.conversation.pg.connections import START_WAIT, PgConnections
from jpd.conversation.pg.lease import CLAIM_SQL, SEQ_BLOCK, PgLease
from jpd.conversation.pg.writer import OrderedWriter
from jpd.conversation.port import ConversationNotFound


class PgClaims(PgConnections):
    """This member's turn leases, by conversation."""

    holder: str
    lease_ttl: float
    _writer: OrderedWriter
    _leases: dict[str, PgLease]
    _released: dict[str, int]  # conversation -> epoch of our last lease

    async def lock_turn(self, conversation_id: str) -> PgLease | None:
        cid = validate_id(conversation_id)
        started = time.monotonic()
        params = self.claim_params(cid, queued=False)
        # A bounded wait: `turn/start` during an outage answers within seconds.
        row = await self.one(CLAIM_SQL, params, retry_for=START_WAIT)
        if row is None:
            if not await self.exists(cid):
                raise ConversationNotFound(cid)
            return None
        return await self.hold(cid, row, started)

    def claim_params(self, cid: str, *, queued: bool) -> dict[str, Any]:
        """The parameters of `lease.CLAIM_SQL` for this member."""
        return {
            "cid": cid,
            "holder": self.holder,
            "ttl": self.lease_ttl,
            "block": SEQ_BLOCK,
            "queued": queued,
        }

    async def hold(self, cid: str, row: tuple[Any, ...], started: float) -> PgLease:
        """The lease `CLAIM_SQL` returned `row` for (claimed at `started`, monotonic),
        renewed from now on and fencing this member's appends."""
        await self._writer.forget(cid)  # a new holder: an earlier one's write error is not its
        lease = PgLease(
            await self.pool(),
            cid,
            self.holder,
            int(row[0]),
            self.lease_ttl,
            started,
            self._forget,
            seq_floor=int(row[1]),
            drain=functools.partial(self._writer.written, cid, check=False),
        )
        self._leases[cid] = lease
        return lease

    def _forget(self, lease: PgLease) -> None:
        if self._leases.get(lease.conversation_id) is lease:
            del self._leases[lease.conversation_id]
        if not lease.lost:
            self._released[lease.conversation_id] = lease.epoch

    async def unchanged_since_mine(self, conversation_id: str) -> bool:
        """Whether the lease's epoch is still that of this member's last lease there,
        released: every claim raises it, so nobody else wrote a turn since."""
        cid = validate_id(conversation_id)
        mine = self._released.get(cid)
        if mine is None:
            return False
        row = await self.one("SELECT lease_epoch FROM jpd_conversations WHERE id = %s", (cid,))
        return row is not None and int(row[0]) == mine

    async def lease_expiry(self, conversation_id: str) -> datetime | None:
        """When the conversation's turn lease expires (None: free); for tests and tools."""
        row = await self.one(
            "SELECT lease_expires FROM jpd_conversations WHERE id = %s", (conversation_id,)
        )
        return None if row is None else row[0]
