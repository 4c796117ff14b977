"""The turns running in this daemon: each runs as a task of the daemon's task group
until it ends, holding its conversation's turn lock; they are cancelled, waited for and
listed here, and a conversation whose turn or tool call ended is settled here."""

from __future__ import annotations

import gc
import logging
import operator
from typing import TYPE_CHECKING

import anyio
from anyio.abc import TaskGroup

from jpd.conversation.port import ConversationStorage
from jpd.core.gc_pacer import pace_while_running
from jpd.core.hub import EventHub
from jpd.protocol.client_port import ClientLink
from jpd.protocol.errors import Busy, NotFound
from jpd.protocol.summaries import TurnInfo
from jpd.protocol.turn_events import StopReason

# The turn loop loads with the first turn (protocol.md section 4, "Start-up").
if TYPE_CHECKING:
    from jpd.conversation.port import TurnLease
    from jpd.core.turn import Turn

log = logging.getLogger(__name__)


def turn_info(turn: Turn) -> TurnInfo:
    """A running turn as `turn/start`, `turn/resume` and `turn/list` report it."""
    return TurnInfo(
        turn_id=turn.turn_id,
        conversation_id=turn.conversation_id,
        model=turn.spec.model_id,
        started_at=turn.started_at,
    )


class RunningTurns:
    """The daemon's running turns by turn id, with the turn lock each one holds."""

    def __init__(self, store: ConversationStorage, hub: EventHub, task_group: TaskGroup) -> None:
        self._store = store
        self._hub = hub
        self._tg = task_group
        self._turns: dict[str, Turn] = {}
        self._infos: dict[str, TurnInfo] = {}
        """Each running turn as `running` lists it, made once (a thousand turns are
        listed on every `turn/list`)."""
        self._changes = 0
        """Bumped after each change of `_infos` (see `running`)."""
        self._listed: tuple[int, list[TurnInfo]] = (-1, [])
        """`running`'s last answer, and the `_changes` it was made at."""
        self._locks: dict[str, TurnLease] = {}
        self.relay: ClientLink | None = None
        """In a fleet: follows every turn here, for other members' clients (core.follow)."""
        self._released: dict[str, anyio.Event] = {}
        self._letting_go: dict[str, anyio.Event] = {}
        """Conversation id -> set once a turn that ended there gave its lease back (a
        fleet's release is a database call: a next turn waits for it, `let_go`)."""
        self._running_in: dict[str, int] = {}
        """Conversation id -> its running turns: `busy` is asked at every turn's end."""
        self._first_ended = False

    @property
    def count(self) -> int:
        """How many turns run here now (from any thread: a dict's length is atomic)."""
        return len(self._turns)

    def busy(self, conversation_id: str) -> bool:
        """Whether a turn of this daemon runs in the conversation."""
        return conversation_id in self._running_in

    def check_idle(self, conversation_id: str) -> None:
        """Raise `Busy` if a turn runs in the conversation."""
        if self.busy(conversation_id):
            raise Busy(f"conversation {conversation_id} already has a running turn")

    def run(self, turn: Turn, lock: TurnLease, link: ClientLink) -> None:
        """Run `turn` as a task, `link` following its conversation; `lock` (the
        conversation's turn lock) is released when the turn ends."""
        self._locks[turn.turn_id] = lock
        self._released[turn.turn_id] = anyio.Event()
        self._turns[turn.turn_id] = turn
        self._infos[turn.turn_id] = turn_info(turn)
        self._changes += 1
        cid = turn.conversation_id
        self._running_in[cid] = self._running_in.get(cid, 0) + 1
        pace_while_running(self)  # the collector, while turns run (jpd.core.gc_pacer)
        floor = lock.seq_floor
        if floor is not None:  # a fleet: seqs go on from every member's
            conversation_id = turn.conversation_id
            self._hub.raise_floor(conversation_id, floor)
            lock.track_seqs(lambda: self._hub.next_seq(conversation_id))
        self._hub.subscribe(turn.conversation_id, link)
        if self.relay is not None:
            self._hub.subscribe(turn.conversation_id, self.relay)
        # A fleet's lease can be lost (another daemon took the turn over): stop the turn
        # and its tools at once; its writes are refused by then (port.LeaseLost).
        lock.on_lost(lambda: self._lost(turn))  # called on the event loop
        self._tg.start_soon(self._run, turn)

    def _lost(self, turn: Turn) -> None:
        """Another daemon took the turn over: stop it, and relay nothing more of it."""
        if self.relay is not None:
            self._hub.unsubscribe(turn.conversation_id, self.relay)
        turn.cancel()

    async def _run(self, turn: Turn) -> None:
        try:
            await turn.run()
        finally:
            letting_go = self._letting_go[turn.conversation_id] = anyio.Event()
            self._infos.pop(turn.turn_id, None)
            self._changes += 1
            if self._turns.pop(turn.turn_id, None) is not None:
                cid = turn.conversation_id
                left = self._running_in.pop(cid) - 1
                if left:
                    self._running_in[cid] = left
            if not self._first_ended:
                # What the first turn loaded (the provider, its HTTP stack, the turn loop,
                # their validators) stays for the daemon's life: out of the collector's
                # full passes, as start-up's modules are (`jpd.__main__`). With a thousand
                # turns alive, those passes otherwise stall every client for 0.5 s.
                self._first_ended = True
                gc.freeze()
            lock = self._locks.pop(turn.turn_id, None)
            if lock is not None:
                with anyio.CancelScope(shield=True):  # a fleet's: a database call
                    await lock.release()
            letting_go.set()
            if self._letting_go.get(turn.conversation_id) is letting_go:
                del self._letting_go[turn.conversation_id]
            if self.relay is not None and not self.busy(turn.conversation_id):
                self._hub.unsubscribe(turn.conversation_id, self.relay)
                with anyio.CancelScope(shield=True):
                    await self.share_blobs(turn.conversation_id)
            with anyio.CancelScope(shield=True):
                await self.settle(turn.conversation_id)
            released = self._released.pop(turn.turn_id, None)
            if released is not None:
                released.set()

    async def let_go(self, conversation_id: str) -> None:
        """Wait until a turn that ended in the conversation gave its lease back (at once
        if none is giving it back): its client may start the next turn at once."""
        letting_go = self._letting_go.get(conversation_id)
        if letting_go is not None:
            await letting_go.wait()

    async def wait_released(self, turn_id: str) -> None:
        """Wait until a turn ended and let go of its conversation (at once if it has)."""
        released = self._released.get(turn_id)
        if released is not None:
            await released.wait()

    async def share_blobs(self, conversation_id: str) -> None:
        """In a fleet: the turn's file snapshots and images, for the other members."""
        try:
            await self._store.share_blobs(conversation_id)
        except Exception as exc:  # an undo elsewhere reports them missing
            log.warning("could not share the files of %s: %s", conversation_id, exc)

    async def settle(self, conversation_id: str) -> None:
        """A conversation's turn or tool call ended: give back what it no longer needs.

        Its log file is closed (reopened by the next append) and, when no client follows
        it, its replay events move to disk, so that a daemon that served thousands of
        conversations holds neither their files nor their events (protocol.md 8.1).
        """
        if self.busy(conversation_id):
            return
        try:
            await self._store.release(conversation_id)
            await self._hub.settle(conversation_id)
        except OSError as exc:
            log.warning("could not release conversation %s: %s", conversation_id, exc)

    def cancel(self, turn_id: str) -> bool:
        """Cancel a running turn; False if it already ended."""
        turn = self._turns.get(turn_id)
        if turn is None:
            return False
        turn.cancel()
        return True

    async def wait(self, turn_id: str) -> StopReason:
        """Wait for a running turn to end; returns its stop reason."""
        turn = self._turns.get(turn_id)
        if turn is None:
            raise NotFound(f"no running turn {turn_id}")
        await turn.done.wait()
        return turn.stop_reason

    def running(self) -> list[TurnInfo]:
        """Turns currently running, oldest first (the list is shared: not to be changed)."""
        # Kept until a turn starts or ends: a client may list a thousand turns every
        # 50 ms. The count is read before the snapshot and bumped after each change, so
        # a list kept under a count is never older than the turns at that count.
        changes, (listed_at, listed) = self._changes, self._listed
        if listed_at == changes:
            return listed
        # A snapshot first (`list` of a dict is one step under the GIL): the connection's
        # reader thread lists turns while the loop starts and ends them.
        infos = list(self._infos.values())
        infos.sort(key=_started_at)
        self._listed = (changes, infos)
        return infos

    def info(self, turn: Turn) -> TurnInfo:
        """`turn_info` of a turn started here: the one made when it started."""
        return self._infos.get(turn.turn_id) or turn_info(turn)

    def has(self, turn_id: str) -> bool:
        """Whether the turn runs (safe from any thread)."""
        return turn_id in self._turns

    async def cancel_all(self) -> None:
        """Cancel every running turn and wait until each has recorded its end."""
        turns = list(self._turns.values())
        for turn in turns:
            turn.cancel()
        for turn in turns:
            await turn.done.wait()


_started_at = operator.attrgetter("started_at")
