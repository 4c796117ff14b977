"""Event fan-out: per-conversation sequence numbers, bounded replay, subscribers.

`subscribe` (and `attach`, which replays first) adds the subscriber in the same step of
the event loop as the replay, so a subscriber sees every event exactly once, in order.

Memory is bounded by what is active: when a conversation goes idle (no turn runs, no
client follows), `settle` moves its replay buffer to a replay file and keeps only its
next seq and where its replay starts; `attach` replays from the file, then from memory
(protocol.md sections 5.8 and 8.1).

Seqs go on across daemon runs: a conversation's first channel of a run starts at its
seq mark (`ReplayFiles.read_mark`), and seqs are reserved on disk in blocks before they
are sent, so a daemon killed mid-turn never makes the next run repeat a seq (section 7.2).

A turn's text and reasoning deltas (most of its events) go through `delta_sender`, which
builds no model per delta (`jpd.protocol.turn_notes`); the channel keeps every event as
the notification it sends (`jpd.core.hub_channel`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Protocol

import anyio

from jpd.conversation.batched import Batched
from jpd.conversation.replay import RESERVE_BLOCK, Filed, ReplayFiles
from jpd.core.hub_channel import REPLAY_BYTES, Channel, event_size, to_file
from jpd.core.hub_marks import SeqMarks
from jpd.protocol.client_port import ClientLink, Notification
from jpd.protocol.turn_events import TurnEvent, TurnEventParams
from jpd.protocol.turn_notes import DeltaKind, DeltaNotes, TurnEventNote

__all__ = ["REPLAY_BYTES", "RESERVE_BLOCK", "EventHub", "HoldGate", "event_size"]

log = logging.getLogger(__name__)


class HoldGate(Protocol):
    def hold(self, conversation_id: str, note: Notification, seq: int) -> bool:
        """Keep `note` to send later (True), or let it go now (False)."""


class EventHub:
    """Assigns `seq` to turn events and delivers them to subscribed clients."""

    def __init__(
        self,
        files: ReplayFiles,
        replay_limit: int | Callable[[], int] = 10_000,
        replay_bytes: int | Callable[[], int] = REPLAY_BYTES,
    ) -> None:
        self._files = files
        # A callable is read on first use, so the config loads with the first turn.
        self._limit_source = replay_limit
        self._limit: int | None = replay_limit if isinstance(replay_limit, int) else None
        self._bytes_source = replay_bytes
        self._bytes: int | None = replay_bytes if isinstance(replay_bytes, int) else None
        self._channels: dict[str, Channel] = {}
        self._marks = SeqMarks(files)
        # Moving events between memory and files, and replaying them, never interleave.
        self._filing = anyio.Lock()
        self._settling = Batched(self._file, self._filing)
        """The conversations waiting for the next filing hop (`settle`)."""
        self.gate: HoldGate | None = None
        """In a fleet: holds each event until the appends made before it are committed
        (`jpd.core.append_gate`), so that a client sees only what the store has."""

    def _replay_limit(self) -> int:
        if self._limit is None:
            source = self._limit_source
            self._limit = source if isinstance(source, int) else source()
        return self._limit

    def _replay_bytes(self) -> int:
        if self._bytes is None:
            source = self._bytes_source
            self._bytes = source if isinstance(source, int) else source()
        return self._bytes

    def _keep_from(self, channel: Channel) -> int:
        """The oldest seq still replayed by the bounds (count and dropped bytes)."""
        return max(channel.next_seq - self._replay_limit(), channel.dropped_through + 1)

    def _channel(self, conversation_id: str) -> Channel:
        channel = self._channels.get(conversation_id)
        if channel is None:
            next_seq, filed_from = self._marks.take(conversation_id)
            channel = self._channels[conversation_id] = Channel(next_seq, filed_from)
            self._marks.open(conversation_id, channel)
        return channel

    def prepare_new(self, conversation_id: str) -> None:
        """`prepare` a conversation this daemon has just named: it has no mark to read
        (its seqs start at 1), and no file is touched before its first turn starts."""
        if conversation_id not in self._channels:
            self._marks.name_new(conversation_id)

    async def prepare(self, conversation_id: str) -> None:
        """Read a conversation's seq mark in a worker thread before it is used.

        An idle conversation's mark is read again: a private daemon (`jp --stdio`) on the
        same data dir may have run a turn in it meanwhile, and seqs must still only grow.
        """
        if conversation_id in self._channels:
            return
        state = await self._marks.refresh(conversation_id)
        if conversation_id not in self._channels:
            self._marks.idle[conversation_id] = state

    def ephemeral(self, channel_id: str) -> None:
        """Open a channel that is never marked nor filed (a `tool/call` without
        conversation; `discard` ends it)."""
        self._channels[channel_id] = Channel(durable=False)

    def publish(self, conversation_id: str, turn_id: str, event: TurnEvent) -> TurnEventParams:
        """Number `event`, keep it for replay and send it to every subscriber."""
        channel = self._channel(conversation_id)
        if channel.durable and channel.next_seq >= channel.reserved:
            self._marks.reserve(conversation_id, channel)
        # Its fields are the daemon's own, `event` a model built already: not validated
        # again for each of a turn's events.
        params = TurnEventParams.model_construct(
            conversation_id=conversation_id, turn_id=turn_id, seq=channel.next_seq, event=event
        )
        note = TurnEventNote(params)
        # Its size is its encoded message's, encoded once for every subscriber (as a
        # delta's), not the event encoded once more only to be measured.
        self._deliver(channel, note, len(note.body))
        return params

    def delta_sender(self, conversation_id: str, turn_id: str) -> Callable[[DeltaKind, str], None]:
        """`publish` for a turn's text and reasoning deltas, which builds no model per
        delta: its notification is spliced into the turn's encoded JSON (`turn_notes`)."""
        note = DeltaNotes(conversation_id, turn_id).note
        channels, deliver = self._channels, self._deliver

        def publish_delta(kind: DeltaKind, text: str) -> None:
            # Once per token: the channel looked up directly (`_channel` makes a missing one).
            channel = channels.get(conversation_id) or self._channel(conversation_id)
            seq = channel.next_seq
            if seq >= channel.reserved and channel.durable:
                self._marks.reserve(conversation_id, channel)
            delta = note(seq, kind, text)
            deliver(channel, delta, len(delta.body))

        return publish_delta

    def publish_at(self, params: TurnEventParams) -> bool:
        """In a fleet: publish an event another member numbered (relayed through the
        store), with its seq; False (nothing sent) if this seq was already published.
        Its member reserved the seq in the store, so no mark is written here."""
        channel = self._channel(params.conversation_id)
        if params.seq < channel.next_seq and channel.live:
            return False
        self._jump(channel, params.seq)
        note = TurnEventNote(params)
        self._deliver(channel, note, len(note.body))
        return True

    def raise_floor(self, conversation_id: str, floor: int) -> None:
        """In a fleet: this member's next seq is at least `floor` (other members sent
        the seqs below it)."""
        channel = self._channel(conversation_id)
        if channel.next_seq < floor:
            self._jump(channel, floor)

    @staticmethod
    def _jump(channel: Channel, seq: int) -> None:
        # Seqs this member never saw: nothing older than `seq` is replayed (no gap in a
        # replay), which `oldestSeq` tells a client re-attaching with an older cursor.
        if seq != channel.next_seq:
            channel.next_seq = seq
            channel.dropped_through = max(channel.dropped_through, seq - 1)
            channel.buffer.clear()
            channel.sizes.clear()
            channel.size = 0

    def next_seq(self, conversation_id: str) -> int:
        """The seq the conversation's next event gets here (safe from any thread)."""
        channel = self._channels.get(conversation_id)
        if channel is not None:
            return channel.next_seq
        state = self._marks.idle.get(conversation_id)
        if state is None:
            raise KeyError(conversation_id)
        return state[0]

    def _deliver(self, channel: Channel, note: TurnEventNote, size: int) -> None:
        seq = note.seq
        channel.live = True
        channel.next_seq = seq + 1
        buffer = channel.buffer
        buffer.append(note)
        channel.sizes.append(size)
        channel.size += size
        limit = self._limit if self._limit is not None else self._replay_limit()
        max_bytes = self._bytes if self._bytes is not None else self._replay_bytes()
        while buffer and (len(buffer) > limit or channel.size > max_bytes):
            channel.dropped_through = channel.pop_oldest().seq
        subscribers = channel.subscribers
        if subscribers:
            # Encoded once, on the first send, for every subscriber.
            gate = self.gate
            if gate is not None and gate.hold(note.conversation_id, note, seq):
                return  # sent once what was appended before it is in the store
            if len(subscribers) == 1 and not channel.seen:  # the common case, per token
                for link in subscribers.values():
                    link.send(note)  # a dict changed by `send` ends no loop: it returns
                    return
            self._send(channel, note, seq)

    @staticmethod
    def _send(channel: Channel, note: Notification, seq: int) -> None:
        seen, subscribers = channel.seen, channel.subscribers
        for link in list(subscribers.values()):
            if seen and seen.get(link.link_id, 0) >= seq:
                continue
            link.send(note)

    def send_held(self, conversation_id: str, note: Notification, seq: int) -> None:
        """Send an event the gate held (its appends are in the store now)."""
        channel = self._channels.get(conversation_id)
        if channel is not None:
            self._send(channel, note, seq)

    def subscribe(self, conversation_id: str, link: ClientLink) -> int:
        """Subscribe `link` without replay; returns the last seq assigned so far (0: none)."""
        channel = self._channel(conversation_id)
        channel.subscribers[link.link_id] = link
        channel.seen.pop(link.link_id, None)
        return channel.next_seq - 1

    async def attach(
        self, conversation_id: str, link: ClientLink, from_seq: int | None
    ) -> tuple[int, int]:
        """Subscribe `link`, first replaying the kept events with `seq > from_seq`.

        Returns (last seq assigned so far, oldest seq kept for replay).
        """
        await self.prepare(conversation_id)
        if from_seq is None:
            return self.subscribe(conversation_id, link), self.oldest_seq(conversation_id)
        async with self._filing:  # the file cannot change under the replay
            channel = self._channel(conversation_id)
            filed: list[dict[str, Any]] = []
            if channel.filed_from is not None and from_seq + 1 < channel.first_in_memory():
                after = max(from_seq, self.oldest_seq(conversation_id) - 1)
                filed = await anyio.to_thread.run_sync(self._files.read, conversation_id, after)
            # From here to the subscription, one step of the event loop: nothing is missed.
            channel = self._channel(conversation_id)
            oldest = self.oldest_seq(conversation_id)
            first_in_memory = channel.first_in_memory()
            for wire in filed:
                if oldest <= wire["seq"] < first_in_memory:
                    link.send(TurnEventNote.filed(wire))
            for note in channel.buffer:
                if note.seq > from_seq and note.seq >= oldest:
                    link.send(note)
            channel.subscribers[link.link_id] = link
            if from_seq >= channel.next_seq:
                channel.seen[link.link_id] = from_seq
            elif self.gate is not None:  # events the gate still holds were just replayed
                channel.seen[link.link_id] = channel.next_seq - 1
            else:
                channel.seen.pop(link.link_id, None)
            return channel.next_seq - 1, oldest

    def oldest_seq(self, conversation_id: str) -> int:
        """The oldest seq still kept for replay (the next seq when nothing is kept).

        Older events are not replayed; their persisted form is in the store.
        """
        channel = self._channels.get(conversation_id)
        if channel is not None:
            filed_from = channel.filed_from
            first = filed_from if filed_from is not None else channel.first_in_memory()
            return max(first, self._keep_from(channel))
        next_seq, filed_from = self._marks.state(conversation_id)
        first = filed_from if filed_from is not None else next_seq
        return max(first, next_seq - self._replay_limit())

    async def settle(self, conversation_id: str) -> None:
        """If no client follows the conversation, move its replay buffer to its file and
        free its memory (the caller knows that no turn runs in it); raises the `OSError`
        of its file. Conversations settled meanwhile (turns that ended together) share
        the next worker-thread hop, rather than paying one each."""
        if not to_file(self._channels.get(conversation_id)):
            # Nothing to file (checked again under the lock otherwise): a followed
            # conversation's turn ends without the lock's checkpoints. Its follower's
            # detach or disconnect settles it.
            return
        await self._settling.run(conversation_id)

    async def _file(self, ids: list[str]) -> dict[str, Exception]:
        """`settle` the conversations `ids` (run holding `_filing`); the error of each
        that failed."""
        jobs: list[tuple[str, Channel, list[Filed], int, bool]] = []
        errors: dict[str, Exception] = {}
        max_bytes = self._replay_bytes()
        for conversation_id in dict.fromkeys(ids):
            channel = self._channels.get(conversation_id)
            if channel is None or not to_file(channel):
                continue
            if channel.buffer:
                events = [(note.seq, note.params_json()) for note in channel.buffer]
                fresh = conversation_id in self._marks.fresh
                jobs.append((conversation_id, channel, events, self._keep_from(channel), fresh))
            else:
                self._idle_now(conversation_id, channel)
        if not jobs:
            return errors
        filing = [(job[0], job[2], job[3], job[4]) for job in jobs]
        try:
            results = await anyio.to_thread.run_sync(self._files.write_many, filing, max_bytes)
        except Exception as exc:  # each caller with events to file learns it
            return dict.fromkeys((job[0] for job in jobs), exc)
        for (conversation_id, channel, events, _keep, _fresh), oldest in zip(
            jobs, results, strict=True
        ):
            self._marks.fresh.discard(conversation_id)
            if isinstance(oldest, OSError):
                errors[conversation_id] = oldest
                continue
            if self._channels.get(conversation_id) is not channel:
                continue  # forgotten meanwhile
            # A new turn may have added events meanwhile: drop only what was filed.
            last_filed = events[-1][0]
            while channel.buffer and channel.buffer[0].seq <= last_filed:
                channel.pop_oldest()
            channel.filed_from = oldest if oldest <= last_filed else None
            self._idle_now(conversation_id, channel)
        return errors

    def _idle_now(self, conversation_id: str, channel: Channel) -> None:
        """Drop a channel whose events are all filed and that no client follows."""
        if channel.buffer or channel.subscribers:
            return
        # The exact mark, in the same step as the channel goes: no publish can slip
        # between (a tiny write, like a reservation).
        if self._marks.go_idle(conversation_id, channel):
            del self._channels[conversation_id]

    async def close(self) -> None:
        """The daemon stops (no turn runs any more): file every conversation's events and
        mark its exact next seq, so the next run replays them and goes on from there."""
        for conversation_id, channel in list(self._channels.items()):
            channel.subscribers.clear()
            try:
                await self.settle(conversation_id)
            except OSError as exc:
                log.warning("could not file the events of %s: %s", conversation_id, exc)

    def unsubscribe(self, conversation_id: str, link: ClientLink) -> bool:
        """Stop sending this conversation's events to `link`."""
        channel = self._channels.get(conversation_id)
        if channel is None:
            return False
        channel.seen.pop(link.link_id, None)
        return channel.subscribers.pop(link.link_id, None) is not None

    def drop(self, link: ClientLink) -> list[str]:
        """Forget a disconnected client everywhere; returns the conversations it followed."""
        followed = []
        for conversation_id, channel in self._channels.items():
            channel.seen.pop(link.link_id, None)
            if channel.subscribers.pop(link.link_id, None) is not None:
                followed.append(conversation_id)
        return followed

    async def forget(self, conversation_id: str) -> None:
        """Drop a deleted conversation's events, replay file and subscribers."""
        async with self._filing:
            channel = self._channels.pop(conversation_id, None)
            self._marks.forget(conversation_id)
            if channel is None or channel.durable:
                await anyio.to_thread.run_sync(self._files.forget_all, conversation_id)

    def discard(self, channel_id: str) -> None:
        """Drop a channel that never reaches a file (a `tool/call` without conversation)."""
        self._channels.pop(channel_id, None)

    def subscribers(self, conversation_id: str) -> list[ClientLink]:
        """Clients currently subscribed to a conversation."""
        channel = self._channels.get(conversation_id)
        return list(channel.subscribers.values()) if channel else []
