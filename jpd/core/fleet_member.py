"""What a daemon runs as a member of a fleet (a store other daemons share, see
docs/scale.md): following turns of other members, the turn queue (and the takeover of
turns whose member stopped), questions answerable from any member, and the listing of
turns that run elsewhere. Imported only when the store is a fleet's."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from anyio.abc import TaskGroup

from jpd.conversation.port import ConversationStorage, QueueingStorage
from jpd.core.follow import Followers, Relay
from jpd.core.parts import DaemonParts
from jpd.core.remote_prompts import RemotePrompts
from jpd.core.shared_questions import SharedQuestions
from jpd.core.turn_queue import TurnQueue
from jpd.core.turn_start import TurnStarter
from jpd.inquiry.pending import PendingQuestions
from jpd.protocol.summaries import TurnInfo

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class FleetMember:
    """The fleet's parts of one daemon (None: the store has no such part)."""

    followers: Followers
    queue: TurnQueue | None
    shared: SharedQuestions | None


def join_fleet(
    parts: DaemonParts,
    starter: TurnStarter,
    questions: PendingQuestions,
    remote: RemotePrompts | None,
    task_group: TaskGroup,
    max_turns: int,
) -> FleetMember:
    """Wire and start the fleet's parts (the store has a `turn_stream`)."""
    store = parts.store
    stream = store.turn_stream()
    assert stream is not None
    relay = Relay(stream, store.share_blobs)  # clients elsewhere follow turns here
    parts.turns.relay = relay
    followers = Followers(stream, parts.hub, parts.turns.busy)  # and here, turns elsewhere
    task_group.start_soon(relay.run)
    task_group.start_soon(followers.run)
    if remote is not None:
        remote.followed = followers.followed
        followers.on_follow = remote.watch_now
        task_group.start_soon(remote.run)
    queue: TurnQueue | None = None
    interval = store.takeover_interval
    if interval is not None and isinstance(store, QueueingStorage):
        # Queued turns, and the turns others left, run where there is room.
        queue = TurnQueue(store.turn_queue(), parts, followers, max_turns)
        starter.queue = queue
        task_group.start_soon(queue.run, starter.start, starter.resume, interval)
    shared: SharedQuestions | None = None
    board = store.question_board()
    if board is not None:  # questions answerable from any member
        shared = SharedQuestions(board, questions)
        task_group.start_soon(shared.run)
    return FleetMember(followers, queue, shared)


async def turns_elsewhere(store: ConversationStorage, queue: TurnQueue | None) -> list[TurnInfo]:
    """The turns other members run, and those queued for a member (listed as they will
    run); [] while the store is away (this member's own turns still list)."""
    try:
        elsewhere = await store.turns_elsewhere()
        queued = await queue.queued() if queue is not None else []
    except Exception as exc:
        log.warning("could not list the turns of other members: %s", exc)
        return []
    return queued + [
        TurnInfo(
            turn_id=start.turn_id,
            conversation_id=conversation_id,
            model=start.model or "",
            started_at=start.timestamp,
        )
        for conversation_id, start in elsewhere
    ]
