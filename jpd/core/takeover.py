"""Taking over the turns of a fleet member that stopped (docs/scale.md).

In a fleet (a shared Postgres store) a running turn holds a lease that its daemon
renews. Every few seconds each member scans for open turns; a turn whose lease expired
is claimed (compare-and-set), closed by jpd's own recovery (protocol.md 12.4: the
streamed text kept as interrupted, each cut tool call reported interrupted), and then
resumed here with `takeover` (a cut tool is run again only if it reads or searches),
if its workspace exists here; else it stays resumable for a member or client that has
it. A turn pinned to a workspace is left to the members of the host that ran it for a
few lease TTLs (`PgStore.claimable_turns`): only then does another host close it.
No client follows it at first: its questions go to the detached policy, and any client
can attach to it.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio

from jpd.conversation.events import TurnStart
from jpd.conversation.port import ConversationStorage
from jpd.conversation.recovery import recover_unlocked
from jpd.protocol.client_port import ClientCapabilities, Notification
from jpd.protocol.errors import ConnectionLost

log = logging.getLogger(__name__)

Resume = Callable[..., Awaitable[Any]]
_link_ids = itertools.count(-1, -1)  # below every real client's id


class Unattended:
    """The link a taken-over turn starts with: no client behind it."""

    def __init__(self, workspace: str | None) -> None:
        self._workspace = Path(workspace) if workspace else None
        self._id = next(_link_ids)

    @property
    def link_id(self) -> int:
        return self._id

    @property
    def capabilities(self) -> ClientCapabilities:
        return ClientCapabilities()

    @property
    def workspace_root(self) -> Path | None:
        return self._workspace

    @property
    def peer_verified(self) -> bool:
        return False  # no client, so no peer whose credentials were checked

    def notify(self, method: Any, params: Any) -> None:
        """Nobody to tell."""

    def send(self, notification: Notification) -> None:
        """Nobody to tell."""

    async def request(self, method: Any, params: Any) -> Any:
        raise ConnectionLost("no client follows a taken-over turn")


def claim_expired(store: ConversationStorage) -> list[tuple[str, TurnStart]]:
    """Recover each open turn whose lease is free or expired; returns (conversation id,
    `turn_start`) of each turn this call closed (and so should resume)."""
    closed: list[tuple[str, TurnStart]] = []
    for conversation_id in store.claimable_turns():
        if not recover_unlocked(store, conversation_id):
            continue
        start = store.last_turn(conversation_id)[1]
        if start is not None:
            closed.append((conversation_id, start))
    return closed


async def watch(
    store: ConversationStorage,
    resume: Resume,
    resumable: Callable[[str, TurnStart], None],
    interval: float,
) -> None:
    """Every `interval` seconds, take over the turns other members left (see above);
    `resumable` notes a closed turn that this member does not resume."""
    while True:
        await anyio.sleep(interval)
        try:
            closed = await anyio.to_thread.run_sync(claim_expired, store)
        except Exception as exc:  # the store is away: try at the next scan
            log.warning("takeover scan failed: %s", exc)
            continue
        for conversation_id, start in closed:
            turn_id, workspace = start.turn_id, start.workspace
            if workspace and not await anyio.Path(workspace).is_dir():
                # Its tools act on a workspace this member lacks: leave it resumable
                # (turn/list) for a member or client that has it.
                log.warning("turn %s: workspace %s is not here; not resuming", turn_id, workspace)
                resumable(conversation_id, start)
                continue
            log.warning("conversation %s: taking over turn %s", conversation_id, turn_id)
            try:
                await resume(Unattended(workspace), conversation_id, turn_id, takeover=True)
            except Exception:
                log.exception("could not resume turn %s after taking it over", turn_id)
                resumable(conversation_id, start)
