"""Where a fleet's turns run (docs/scale.md): this member's side of the turn queue.

A member runs up to `[daemon.fleet] max_turns` turns. `turn/start` on a member with
room runs the turn here at once (a turn started here may always run here); on a member
without room the turn is validated here, then queued (`port.TurnQueueStore`) with its
`turn/start` params, its client following the conversation as it would a turn of
another member (`core.follow`). Each member with room claims queued turns, oldest first
(a turn pinned to a workspace only on its host), when woken by the queue's `NOTIFY` and
every `interval` s, and starts them here as `turn/start` would, with no client of this
member behind them (`takeover.Unattended`: their questions reach the client that queued
them, on its member, through `core.remote_prompts`); turns whose member stopped are
claimed by the same path and taken over (`takeover.take_over`). `turn/cancel` of a turn
queued or running on another member is asked through the store: the member running it
cancels it; a queued one is claimed by any member and ended `cancelled` without running.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import anyio

from jpd.conversation import events as ev
from jpd.conversation.port import QueueClaim, StoreUnreachable, TurnQueueStore
from jpd.core.parts import DaemonParts
from jpd.core.takeover import Resume, Unattended, take_over
from jpd.core.turn_enqueue import start_options
from jpd.protocol.client_port import ClientLink
from jpd.protocol.errors import Busy, JpdError, StoreUnavailableError
from jpd.protocol.summaries import TurnInfo
from jpd.protocol.turn_events import StopReason, TurnCompleted, TurnStarted

if TYPE_CHECKING:
    from jpd.core.follow import Followers
    from jpd.core.turn import Turn
    from jpd.protocol.turn_requests import TurnStartParams

log = logging.getLogger(__name__)

Start = Callable[..., Awaitable[Any]]


class TurnQueue:
    """See the module docstring."""

    def __init__(
        self,
        queue: TurnQueueStore,
        parts: DaemonParts,
        followers: Followers,
        max_turns: int,
    ) -> None:
        self._queue = queue
        self._parts = parts
        self._followers = followers
        self.max_turns = max_turns

    def room(self) -> bool:
        """Whether this member may start one more turn now."""
        return self._parts.turns.count < self.max_turns

    async def check_store(self) -> None:
        """Raise `StoreUnavailableError` unless the store answers within seconds: a
        `turn/start` during an outage is refused, not left waiting."""
        try:
            await self._queue.check()
        except StoreUnreachable as exc:
            raise StoreUnavailableError(str(exc)) from None

    async def enqueue(self, link: ClientLink, turn: Turn, params: TurnStartParams) -> None:
        """Queue `turn` (validated, not launched) for a member with room; `link` follows
        its conversation from now on. Raises `Busy` if a turn runs or waits there."""
        cid = turn.conversation_id
        self._parts.hub.subscribe(cid, link)
        await self._followers.follow(cid, replay=False)  # before anyone can run it
        try:
            queued = await self._queue.enqueue(
                cid,
                turn.turn_id,
                request=params.model_dump_json(by_alias=True, exclude_none=True),
                model=turn.spec.model_id,
                workspace=turn.spec.workspace,
                pinned=turn.spec.workspace is not None,
            )
        except OSError as exc:
            raise StoreUnavailableError(f"cannot queue the turn: {exc}") from None
        if not queued:
            raise Busy(f"conversation {cid} has a turn running in another jpd")
        log.info("conversation %s: turn %s queued (%d run here)", cid, turn.turn_id, self.max_turns)

    async def queued(self) -> list[TurnInfo]:
        """The turns waiting in the queue (`turn/list` lists them among the running)."""
        rows = await self._queue.queued()
        return [
            TurnInfo(turn_id=turn, conversation_id=cid, model=model, started_at=at)
            for cid, turn, model, at in rows
        ]

    async def cancel(self, turn_id: str) -> bool:
        """`turn/cancel` of a turn that does not run here: asked of the member that runs
        or claims it (False: it is neither queued nor running anywhere)."""
        try:
            return await self._queue.ask_cancel(turn_id)
        except OSError as exc:
            raise StoreUnavailableError(f"cannot cancel the turn: {exc}") from None

    async def run(self, start: Start, resume: Resume, interval: float) -> None:
        """Claim and start turns while this member has room; act on cancellations."""
        while True:
            try:
                await self._round(start, resume)
            except Exception as exc:  # the store is away: try at the next wake
                log.warning("turn queue: %s", exc)
            try:
                await self._queue.wait(interval)
            except Exception as exc:
                log.warning("turn queue: cannot listen: %s", exc)
                await anyio.sleep(interval)

    async def _round(self, start: Start, resume: Resume) -> None:
        asked = await self._queue.cancels()
        for turn_id in asked:
            if self._parts.turns.cancel(turn_id):
                await self._queue.cancelled(turn_id)
                continue
            claim = await self._queue.claim(turn_id)
            if claim is not None:  # queued: ended here without running
                await self._queue.cancelled(turn_id)
                await self.end_unrun(claim, "cancelled", None)
        while self.room():
            claim = await self._queue.claim()
            if claim is None:
                return
            if claim.request is None:
                await take_over(self._parts.store, claim, resume, self._resumable)
            else:
                await self._start(claim, start)

    def _resumable(self, conversation_id: str, start: ev.TurnStart) -> None:
        self._parts.conversations.note_resumable(conversation_id, start)

    async def _start(self, claim: QueueClaim, start: Start) -> None:
        """Start a queued turn here as its `turn/start` asked, under the claimed lease."""
        from jpd.protocol.turn_requests import TurnStartParams

        assert claim.request is not None
        log.warning("conversation %s: running queued turn %s", claim.conversation_id, claim.turn_id)
        try:
            p = TurnStartParams.model_validate_json(claim.request)
            await start(
                Unattended(claim.workspace),
                p.message,
                **(start_options(p) | {"conversation_id": claim.conversation_id}),
                turn_id=claim.turn_id,
                lease=claim.lease,
            )
        except JpdError as exc:  # valid where it was queued, not here
            await self.end_unrun(claim, "error", exc.message, message=_message(claim))
        except Exception as exc:
            log.exception("could not start queued turn %s", claim.turn_id)
            error = f"internal error: {type(exc).__name__}: {exc}"
            await self.end_unrun(claim, "error", error, message=_message(claim))

    async def end_unrun(
        self, claim: QueueClaim, stop: StopReason, error: str | None, message: str | None = None
    ) -> None:
        """End a claimed turn that will not run (cancelled while queued, or that cannot
        start here): its start and end in the log, `turn_started` and `turn_completed`
        to its followers on every member."""
        parts, cid, lease = self._parts, claim.conversation_id, claim.lease
        hub, store = parts.hub, parts.store
        if message is None:
            message = _message(claim)
        events: list[ev.Event] = [
            ev.TurnStart(turn_id=claim.turn_id, model=claim.model, workspace=claim.workspace),
            ev.ChatRequest(content=message),
            ev.TurnEnd(turn_id=claim.turn_id, stop_reason=stop, error=error),
        ]

        relay = parts.turns.relay
        try:
            await hub.prepare(cid)
            floor = lease.seq_floor
            if floor is not None:
                hub.raise_floor(cid, floor)
                lease.track_seqs(lambda: hub.next_seq(cid))
            for event in events:
                store.append(cid, event)
            await store.sync(cid)
            if relay is not None:
                hub.subscribe(cid, relay)
            hub.publish(cid, claim.turn_id, TurnStarted(model=claim.model))
            hub.publish(cid, claim.turn_id, TurnCompleted(stop_reason=stop, error=error))
        except Exception as exc:  # the store is away: the lease expires, a member closes it
            log.warning("could not end turn %s: %s", claim.turn_id, exc)
        finally:
            if relay is not None and not parts.turns.busy(cid):
                hub.unsubscribe(cid, relay)  # its batch holds the events already
            await lease.release()
            await parts.turns.settle(cid)


def _message(claim: QueueClaim) -> str:
    """The message of a queued turn ("" if its request cannot be read)."""
    import json

    try:
        return str(json.loads(claim.request or "{}").get("message", ""))
    except ValueError:
        return ""
