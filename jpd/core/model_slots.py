"""A turn's model call holds a slot of its provider's fleet-wide limit while it runs
(`[daemon.fleet.provider_limits]`, docs/scale.md): around the call only, never while a
tool waits for a person. Outside a fleet, or for a provider without a limit, nothing is
held and no thread is used."""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio


@asynccontextmanager
async def model_slot(store: Any, model_id: str) -> AsyncIterator[None]:
    """Hold a slot of `model_id`'s provider in `store` (a `ConversationStorage`; a
    turn's test double without the methods holds nothing) while the body runs."""
    provider = model_id.split("/", 1)[0]
    limited = getattr(store, "limits_model_calls", None)
    if limited is None or not limited(provider):
        yield
        return
    stop = threading.Event()
    try:
        release = await anyio.to_thread.run_sync(
            store.model_slot, provider, stop, abandon_on_cancel=True
        )
    except BaseException:
        stop.set()  # a thread still waiting gives up (and frees a slot it just took)
        raise
    try:
        yield
    finally:
        if release is not None:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(release)
