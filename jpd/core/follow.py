"""Following a turn that runs on another fleet member (docs/scale.md).

`Relay`: on the member running a turn, a subscriber of the turn's conversation like a
client, which hands each `turn/event` to the store's turn stream in batches (every 50
ms, never a write per token). `Followers`: on a member whose client attached to a
conversation that runs no turn here, reads the events other members streamed and
publishes them to this member's clients as if the turn ran here, with the seqs the
running member gave them (reserved in the store: `port.TurnLease.seq_floor`). A
conversation is followed while a client of this member is subscribed to it.
"""

from __future__ import annotations

import itertools
import json
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio

from jpd.conversation.port import TurnStream
from jpd.core.hub import EventHub
from jpd.protocol.client_port import ClientCapabilities, Notification
from jpd.protocol.errors import ConnectionLost
from jpd.protocol.turn_events import TurnEventParams

log = logging.getLogger(__name__)

FLUSH = 0.05
URGENT = frozenset({"turn_started", "turn_completed"})
"""Kinds relayed without waiting for the batch: where a follower waits for a turn."""
WAIT = 0.5
_ids = itertools.count(-1_000_000, -1)  # below real clients' and taken-over turns' ids


class Relay:
    """A pseudo-client that streams the events of this member's turns to the store, and
    shares a conversation's blobs (`share`) once one of its tool calls ended: the file
    snapshots a member taking the turn over needs for `turn/undo`, were this one to die
    mid-turn."""

    def __init__(
        self, stream: TurnStream, share: Callable[[str], Awaitable[None]] | None = None
    ) -> None:
        self._stream = stream
        self._share = share
        self._id = next(_ids)
        self._batches: dict[tuple[str, str], list[str]] = {}
        self._tools_ended: set[str] = set()
        self._urgent = anyio.Event()

    @property
    def link_id(self) -> int:
        return self._id

    @property
    def capabilities(self) -> ClientCapabilities:
        return ClientCapabilities()

    @property
    def workspace_root(self) -> Path | None:
        return None

    @property
    def peer_verified(self) -> bool:
        return False  # it sends no requests

    def notify(self, method: Any, params: Any) -> None:
        """Only `turn/event`s are relayed (they come through `send`)."""

    def send(self, notification: Notification) -> None:
        if notification.method.name != "turn/event":
            return
        wire = notification.wire
        key = (str(wire["conversationId"]), str(wire["turnId"]))
        self._batches.setdefault(key, []).append(json.dumps(wire, separators=(",", ":")))
        kind = wire["event"].get("kind")
        if kind == "tool_result":
            self._tools_ended.add(key[0])
        elif kind in URGENT:  # a turn's start or end: a write per turn, not per token
            self._urgent.set()

    async def request(self, method: Any, params: Any) -> Any:
        raise ConnectionLost("the relay answers nothing")

    async def run(self) -> None:
        while True:
            with anyio.move_on_after(FLUSH):  # or at once for a turn's start or end
                await self._urgent.wait()
            self._urgent = anyio.Event()
            await self.flush()

    async def flush(self) -> None:
        batches, self._batches = self._batches, {}
        shared, self._tools_ended = self._tools_ended, set()
        if not batches:
            return
        try:  # one transaction for all the turns running here
            await self._stream.publish_all(batches)
        except Exception as exc:  # followers miss these; the log has the outcome
            log.warning("could not stream events of %d turns: %s", len(batches), exc)
        if self._share is not None and shared:
            await self._share_all(shared)

    async def _share_all(self, conversation_ids: set[str]) -> None:
        assert self._share is not None
        for conversation_id in conversation_ids:
            try:
                await self._share(conversation_id)
            except Exception as exc:  # shared again when the turn ends
                log.warning("could not share the files of %s: %s", conversation_id, exc)


class Followers:
    """Conversations this member's clients follow while their turns run elsewhere."""

    def __init__(self, stream: TurnStream, hub: EventHub, busy: Callable[[str], bool]) -> None:
        self._stream = stream
        self._hub = hub
        self._busy = busy
        self._cursors: dict[str, int] = {}
        self._pulling = anyio.Lock()  # one reader at a time: nothing relayed twice
        self.on_follow: Callable[[], Awaitable[None]] | None = None
        """Awaited once a conversation is followed (`RemotePrompts.watch_now`: its
        clients are then asked the questions of a turn running elsewhere)."""

    def followed(self) -> list[str]:
        """The conversations this member's clients follow."""
        return list(self._cursors)

    async def follow(self, conversation_id: str, *, replay: bool = True) -> None:
        """A client attached: relay what the conversation's turn streamed so far (not
        with `replay` False: a turn queued now, whose events are all to come), then what
        it streams next."""
        if conversation_id not in self._cursors:
            await self._hub.prepare(conversation_id)  # its seq mark, off the event loop
        if conversation_id not in self._cursors:
            self._cursors[conversation_id] = 0
            await self._stream.follow(conversation_id)  # it wakes the listener
        if replay:
            await self._pull(conversation_id)  # all the store has now, for a replay
        else:
            async with self._pulling:  # an earlier turn's rows are skipped
                after = self._cursors.get(conversation_id, 0)
                rows = await self._stream.read(conversation_id, after)
                if rows:
                    self._cursors[conversation_id] = rows[-1][0]
        if self.on_follow is not None:
            await self.on_follow()

    async def run(self) -> None:
        while True:
            for conversation_id in list(self._cursors):
                if not self._hub.subscribers(conversation_id):
                    del self._cursors[conversation_id]
                    self._stream.unfollow(conversation_id)
            try:
                notified = await self._stream.wait(WAIT)
            except Exception as exc:  # the store is away: the next wait reconnects
                log.warning("could not follow turns of other members: %s", exc)
                await anyio.sleep(WAIT)
                continue
            try:
                await self._pull_all([c for c in notified if c in self._cursors])
            except Exception as exc:  # the store is away: the next wake reads again
                log.warning("could not read the turns of other members: %s", exc)

    async def _pull(self, conversation_id: str) -> None:
        async with self._pulling:
            after = self._cursors.get(conversation_id, 0)
            rows = await self._stream.read(conversation_id, after)
            self._publish(conversation_id, rows)

    async def _pull_all(self, conversation_ids: list[str]) -> None:
        if not conversation_ids:
            return
        async with self._pulling:  # one query for every conversation notified
            cursors = {c: self._cursors[c] for c in conversation_ids if c in self._cursors}
            found = await self._stream.read_all(cursors)
            for conversation_id, rows in found.items():
                if conversation_id in self._cursors:
                    self._publish(conversation_id, rows)

    def _publish(self, conversation_id: str, rows: list[tuple[int, str]]) -> None:
        for position, body in rows:
            self._cursors[conversation_id] = position
            if self._busy(conversation_id):
                continue  # its turn runs here now: this member's own events go out
            try:
                params = TurnEventParams.model_validate(json.loads(body))
            except ValueError:
                continue  # written by a newer jpd
            self._hub.publish_at(params)
