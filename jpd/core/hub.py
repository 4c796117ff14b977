"""Event fan-out: per-conversation sequence numbers, a bounded replay buffer, subscribers.

`subscribe` replays buffered events after `from_seq` and adds the subscriber in one
step of the event loop, so a subscriber sees every event exactly once, in order.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from jpd.protocol.client_port import ClientLink, Notification
from jpd.protocol.turn_events import TurnEvent, TurnEventParams

TURN_EVENT = "turn/event"


@dataclass
class _Channel:
    next_seq: int = 1
    buffer: deque[TurnEventParams] = field(default_factory=deque)
    subscribers: dict[int, ClientLink] = field(default_factory=dict)


class EventHub:
    """Assigns `seq` to turn events and delivers them to subscribed clients."""

    def __init__(self, replay_limit: int | Callable[[], int] = 10_000) -> None:
        # A callable is read on first publish, so the config loads with the first turn.
        self._limit_source = replay_limit
        self._limit: int | None = replay_limit if isinstance(replay_limit, int) else None
        self._channels: dict[str, _Channel] = {}

    def _replay_limit(self) -> int:
        if self._limit is None:
            source = self._limit_source
            self._limit = source if isinstance(source, int) else source()
        return self._limit

    def _channel(self, conversation_id: str) -> _Channel:
        return self._channels.setdefault(conversation_id, _Channel())

    def publish(self, conversation_id: str, turn_id: str, event: TurnEvent) -> TurnEventParams:
        """Number `event`, keep it for replay and send it to every subscriber."""
        channel = self._channel(conversation_id)
        params = TurnEventParams(
            conversation_id=conversation_id, turn_id=turn_id, seq=channel.next_seq, event=event
        )
        channel.next_seq += 1
        channel.buffer.append(params)
        while len(channel.buffer) > self._replay_limit():
            channel.buffer.popleft()
        if channel.subscribers:
            # Encoded once, on the first send, for every subscriber.
            note = Notification(TURN_EVENT, params.to_wire())
            for link in list(channel.subscribers.values()):
                link.send(note)
        return params

    def subscribe(self, conversation_id: str, link: ClientLink, from_seq: int | None = None) -> int:
        """Subscribe `link`; replay buffered events with `seq > from_seq` first.

        Returns the last seq assigned so far in this conversation (0 if none).
        """
        channel = self._channel(conversation_id)
        if from_seq is not None:
            for params in channel.buffer:
                if params.seq > from_seq:
                    link.notify(TURN_EVENT, params.to_wire())
        channel.subscribers[link.link_id] = link
        return channel.next_seq - 1

    def oldest_seq(self, conversation_id: str) -> int:
        """The oldest seq still kept for replay (the next seq when nothing is kept).

        Older events are not replayed; their persisted form is in the store.
        """
        channel = self._channel(conversation_id)
        return channel.buffer[0].seq if channel.buffer else channel.next_seq

    def unsubscribe(self, conversation_id: str, link: ClientLink) -> bool:
        """Stop sending this conversation's events to `link`."""
        channel = self._channels.get(conversation_id)
        return channel is not None and channel.subscribers.pop(link.link_id, None) is not None

    def drop(self, link: ClientLink) -> None:
        """Forget a disconnected client everywhere."""
        for channel in self._channels.values():
            channel.subscribers.pop(link.link_id, None)

    def forget(self, conversation_id: str) -> None:
        """Drop a deleted conversation's buffer and subscribers."""
        self._channels.pop(conversation_id, None)

    def subscribers(self, conversation_id: str) -> list[ClientLink]:
        """Clients currently subscribed to a conversation."""
        channel = self._channels.get(conversation_id)
        return list(channel.subscribers.values()) if channel else []
