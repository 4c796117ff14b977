"""Taking over the turns of a fleet member that stopped (docs/scale.md).

In a fleet (a shared Postgres store) a running turn holds a lease that its daemon
renews. A member with room claims a turn whose lease expired through the turn queue's
one claim path (`core.turn_queue`: `FOR UPDATE SKIP LOCKED`, then a compare-and-set),
closes it by jpd's own recovery (protocol.md 12.4: the streamed text kept as
interrupted, each cut tool call reported interrupted), and then resumes it here with
`takeover` (a cut tool is run again only if it reads or searches), if its workspace
exists here; else it stays resumable for a member or client that has
it. A turn pinned to a workspace is left to the members of the host that ran it for a
few lease TTLs (`pg.queue.PIN_OK`): only then does another host close it.
No client of this member follows it at first: its questions are offered to the clients
following its conversation on any member (`core.remote_prompts`), and with none the
detached policy decides; any client can attach to it.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio

from jpd.conversation.events import TurnStart
from jpd.conversation.port import ConversationStorage, LeaseLost, QueueClaim
from jpd.conversation.recovery import recover
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


async def take_over(
    store: ConversationStorage,
    claim: QueueClaim,
    resume: Resume,
    resumable: Callable[[str, TurnStart], None],
) -> None:
    """Close the open turn `claim` holds the lease of with jpd's recovery, then resume it
    here (see above); `resumable` notes a closed turn that this member does not resume."""
    cid, lease = claim.conversation_id, claim.lease
    try:
        await recover(store, cid)
        start = (await store.last_turn(cid))[1]
    except (OSError, LeaseLost) as exc:
        log.warning("could not recover conversation %s: %s", cid, exc)
        await lease.release()
        return
    if start is None:  # nothing left to resume (it ended meanwhile)
        await lease.release()
        return
    turn_id, workspace = start.turn_id, start.workspace
    if workspace and not await anyio.Path(workspace).is_dir():
        # Its tools act on a workspace this member lacks: leave it resumable
        # (turn/list) for a member or client that has it.
        log.warning("turn %s: workspace %s is not here; not resuming", turn_id, workspace)
        await lease.release()
        resumable(cid, start)
        return
    log.warning("conversation %s: taking over turn %s", cid, turn_id)
    try:
        await resume(Unattended(workspace), cid, turn_id, takeover=True, lease=lease)
    except Exception:
        log.exception("could not resume turn %s after taking it over", turn_id)
        await lease.release()
        resumable(cid, start)
