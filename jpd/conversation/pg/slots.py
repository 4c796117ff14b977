"""Per-provider limits on model calls across a fleet (`[daemon.fleet.provider_limits]`):
at most N calls at once to a provider on all members together. A call holds one of the
provider's N session advisory locks on a connection of its own while it runs; the lock
goes with the connection, so a member that dies frees its slots at once. Waiting polls
(`pg_try_advisory_lock`, every 50 to 250 ms). A database that cannot be reached never
stalls a turn: the call then runs without a slot (logged). A wait cancelled (the turn
was) closes its connection: nothing stays held.
"""

from __future__ import annotations

import hashlib
import logging
import random
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import anyio
import psycopg

log = logging.getLogger(__name__)


def provider_key(provider: str) -> int:
    """The first key (a signed 32-bit integer) of the provider's advisory locks."""
    return int.from_bytes(
        hashlib.sha1(b"jpd-model:" + provider.encode()).digest()[:4], "big", signed=True
    )


class ModelSlots:
    """See the module docstring."""

    def __init__(self, url: str, limits: Mapping[str, int]) -> None:
        self._url = url
        self._limits = dict(limits)

    def limited(self, provider: str) -> bool:
        return provider in self._limits

    async def acquire(self, provider: str) -> Callable[[], Awaitable[None]] | None:
        """Wait until a slot of `provider` is held; returns how to give it back. None at
        once for a provider without a limit, or when the store cannot be reached."""
        limit = self._limits.get(provider)
        if limit is None:
            return None
        key = provider_key(provider)
        pause = 0.05
        try:
            conn: psycopg.AsyncConnection[Any] = await psycopg.AsyncConnection.connect(
                self._url, autocommit=True, connect_timeout=5
            )
        except psycopg.Error as exc:
            log.warning("model call to %s without a fleet slot: %s", provider, exc)
            return None
        try:
            while True:
                for slot in random.sample(range(limit), limit):
                    cur = await conn.execute("SELECT pg_try_advisory_lock(%s, %s)", (key, slot))
                    row = await cur.fetchone()
                    if row is not None and row[0]:
                        return conn.close
                await anyio.sleep(pause)
                pause = min(pause * 2, 0.25)
        except psycopg.Error as exc:
            log.warning("model call to %s without a fleet slot: %s", provider, exc)
        except BaseException:  # cancelled: the lock (if taken) goes with the connection
            with anyio.CancelScope(shield=True):
                await conn.close()
            raise
        await conn.close()
        return None
