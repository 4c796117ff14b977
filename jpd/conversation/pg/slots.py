"""Per-provider limits on model calls across a fleet (`[daemon.fleet.provider_limits]`):
at most N calls at once to a provider on all members together. A call holds one of the
provider's N session advisory locks on a connection of its own while it runs; the lock
goes with the connection, so a member that dies frees its slots at once. Waiting polls
(`pg_try_advisory_lock`, every 50 to 250 ms). A database that cannot be reached never
stalls a turn: the call then runs without a slot (logged).
"""

from __future__ import annotations

import hashlib
import logging
import random
import threading
from collections.abc import Callable, Mapping
from typing import Any

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

    def acquire(self, provider: str, stop: threading.Event) -> Callable[[], None] | None:
        """Block until a slot of `provider` is held (or `stop` is set: None); returns
        how to give it back. None at once for a provider without a limit."""
        limit = self._limits.get(provider)
        if limit is None:
            return None
        key = provider_key(provider)
        pause = 0.05
        try:
            conn: psycopg.Connection[Any] = psycopg.connect(
                self._url, autocommit=True, connect_timeout=5
            )
        except psycopg.Error as exc:
            log.warning("model call to %s without a fleet slot: %s", provider, exc)
            return None
        try:
            while not stop.is_set():
                for slot in random.sample(range(limit), limit):
                    row = conn.execute(
                        "SELECT pg_try_advisory_lock(%s, %s)", (key, slot)
                    ).fetchone()
                    if row is not None and row[0]:
                        if stop.is_set():  # given up meanwhile: nobody would release it
                            break
                        return conn.close
                stop.wait(pause)
                pause = min(pause * 2, 0.25)
        except psycopg.Error as exc:
            log.warning("model call to %s without a fleet slot: %s", provider, exc)
        conn.close()
        return None
