"""A conversation's channel in the event hub (`jpd.core.hub`): its next seq, the events
kept for replay (bounded in count and bytes), and its subscribers."""

from __future__ import annotations

import json
from collections import deque
from dataclasses import dataclass, field

from pydantic_core import PydanticSerializationError

from jpd.protocol.client_port import ClientLink
from jpd.protocol.turn_events import TurnEventParams
from jpd.protocol.turn_notes import TurnEventNote

REPLAY_BYTES = 16 * 1024 * 1024
"""Default bound on a conversation's replay (in memory, and in its file) in bytes."""


def event_size(params: TurnEventParams) -> int:
    """About the bytes an event takes on the wire (what the byte bound counts)."""
    event = params.event
    try:
        return len(event.__pydantic_serializer__.to_json(event)) + 100
    except PydanticSerializationError:  # not UTF-8 (a lone surrogate): sent escaped
        return len(json.dumps(params.to_wire())) + 100


@dataclass
class Channel:
    next_seq: int = 1
    filed_from: int | None = None
    """The oldest seq in the conversation's replay file (None: no file)."""
    buffer: deque[TurnEventNote] = field(default_factory=deque)
    sizes: deque[int] = field(default_factory=deque)
    """The size of each event of `buffer` (`event_size`), in the same order."""
    size: int = 0
    """Their sum."""
    dropped_through: int = 0
    """The newest seq dropped from memory to keep within the bounds: older events (in
    the file too) are no longer replayed, so that the replay has no gap."""
    subscribers: dict[int, ClientLink] = field(default_factory=dict)
    seen: dict[int, int] = field(default_factory=dict)
    """Subscribers that attached with a `fromSeq` not yet reached here (a fleet member
    behind the one running the turn): link id -> that seq, not sent to them again."""
    reserved: int = 0
    """Seqs below this are covered by the mark on disk."""
    durable: bool = True
    """False for a `tool/call` without conversation: no mark, no file."""
    live: bool = False
    """An event was published in this run (`next_seq` is exact, not a reservation)."""

    def first_in_memory(self) -> int:
        return self.buffer[0].seq if self.buffer else self.next_seq

    def pop_oldest(self) -> TurnEventNote:
        self.size -= self.sizes.popleft()
        return self.buffer.popleft()


def to_file(channel: Channel | None) -> bool:
    """Whether `settle` has something to do for `channel`."""
    return channel is not None and not channel.subscribers and channel.durable
