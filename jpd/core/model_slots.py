"""A turn's model call holds a slot of its provider's fleet-wide limit while it runs
(`[daemon.fleet.provider_limits]`, docs/scale.md): around the call only, never while a
tool waits for a person. Outside a fleet, or for a provider without a limit, nothing is
held and nothing is awaited."""

from __future__ import annotations

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
    release = await store.model_slot(provider)  # a cancelled wait holds nothing
    try:
        yield
    finally:
        if release is not None:
            with anyio.CancelScope(shield=True):
                await release()
