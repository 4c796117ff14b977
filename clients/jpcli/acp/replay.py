"""`session/load`'s replay: the stored conversation as `session/update`s, then the part
of a running turn the daemon's replay buffer holds, so the editor follows it live."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from jpcli.acp.images import image_reader
from jpcli.acp.link import LinkClosed, LinkError
from jpcli.acp.session import Session
from jpcli.acp.updates import history

log = logging.getLogger(__name__)


async def replay(
    session: Session,
    attached: dict[str, Any],
    stored: dict[str, Any],
    data_dir: Callable[[], Awaitable[str | None]],
) -> None:
    """Show the conversation `stored` (`conversation/get`) and the live part of the
    turns `attached` (`turn/attach` from seq 0) names, held in `session.held` since."""
    hidden = await hidden_tools(session)
    events = stored.get("events", [])
    session.choices.restore(events)  # what the conversation last ran with
    running = [t["turnId"] for t in attached.get("runningTurns", [])]
    held, session.held = session.held or [], None
    live = [e for e in held if e.get("turnId") in running]
    has_start = any((e.get("event") or {}).get("kind") == "turn_started" for e in live)
    if running and has_start:
        # The running turn's persisted part is shown from the replay buffer instead,
        # deltas included: cut the log after that turn's user message.
        cut = next((i for i, e in enumerate(events) if e.get("turn_id") == running[0]), len(events))
        events = events[: cut + 2]
    reader = image_reader(await data_dir(), session.session_id)
    await session.send(history(events, hidden, session.translator.ids, reader))
    for params in live if has_start else []:
        await session.forward(params)


async def hidden_tools(session: Session) -> frozenset[str]:
    """Names of the tools not to show in a replay (`style.hidden`); none when the
    workspace's config cannot be read (the replay must not fail over it)."""
    try:
        tools = await session.daemon.request("tool/list")
    except (LinkError, LinkClosed) as exc:
        log.warning("tool/list failed, replaying every tool call: %s", exc)
        return frozenset()
    return frozenset(t["name"] for t in tools.get("tools", []) if t.get("hidden"))
