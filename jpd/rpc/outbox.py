"""One connection's send queue, bounded by bytes (protocol.md section 7.3).

Frames are queued already encoded. Responses, daemon-to-client requests and small
notifications are always queued; `turn/event` notifications are queued only while the
client keeps up. When the queued bytes are past the limit, the client is *lagging* for the
conversation whose event did not fit: that conversation's events are dropped (never
queued) until the client re-attaches, and once the queue has drained it is told with a
`turn/lagged` notification carrying the seq to re-attach from. A client whose queue
grows past `HARD_FACTOR` times the limit (it reads nothing, even responses) is stuck:
`on_stuck` is called, and the connection is closed.

Answers go ahead of everything else queued (`put_answer`): a client that follows a
thousand streaming turns still gets `turn/list` or `turn/cancel` answered at once, not
after the deltas queued before it (protocol.md section 3 lets answers and notifications
come in any order, except where a method says otherwise: `turn/attach`).
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

import anyio

log = logging.getLogger(__name__)

HARD_FACTOR = 4
"""Queued bytes beyond `HARD_FACTOR * limit` mean the client is stuck."""

_BATCH_FRAMES = 256  # frames joined into one write


@dataclass(frozen=True)
class ConnectionLimits:
    """Per-connection limits (`daemon.*` config keys, protocol.md sections 2 and 7.3)."""

    max_frame: int = 64 * 1024 * 1024
    """Largest body of an incoming frame, in bytes; a larger one is skipped unread."""
    max_nesting: int = 256
    """Deepest nesting of arrays and objects in an incoming message."""
    send_queue: int = 8 * 1024 * 1024
    """Bytes queued for one client before it is lagging."""
    stall_timeout: float = 60.0
    """Seconds one write to a client may block before the client is dropped as stuck."""


class Outbox:
    """The frames waiting to be written to one client."""

    def __init__(
        self,
        limit: int,
        lagged_frame: Callable[[str, int], bytes],
        on_stuck: Callable[[], None],
        label: str = "client",
    ) -> None:
        self.label = label
        self._limit = max(limit, 1)
        self._lagged_frame = lagged_frame
        self._on_stuck = on_stuck
        self._frames: deque[bytes] = deque()
        self._answers: deque[bytes] = deque()
        """Frames that go out before `_frames` (answers to requests)."""
        self._wake = anyio.Event()
        self._woken = False
        """`_wake` is set: the writer will take what is queued (no set per frame)."""
        self._room = anyio.Event()
        self._closed = False
        self.queued = 0
        """Bytes queued and not yet taken by the writer."""
        self._last_seq: dict[str, int] = {}
        """Per conversation, the seq of the last event queued."""
        self._dropping: set[str] = set()
        """Conversations whose events are dropped until the client re-attaches."""
        self._to_tell: dict[str, int] = {}
        """Conversations the client must be told about (`turn/lagged`) once drained."""

    @property
    def lagging(self) -> bool:
        """True while some conversation's events are being dropped for this client."""
        return bool(self._dropping)

    def put(self, frame: bytes) -> None:
        """Queue a frame that must not be dropped (response, request, notification)."""
        if self._closed:
            log.debug("dropping %d bytes for a closed connection", len(frame))
            return
        self._append(frame)
        self._check_stuck()

    def _check_stuck(self) -> None:
        if self.queued > HARD_FACTOR * self._limit:
            log.warning(
                "%s is stuck: %d bytes queued (limit %d); closing it",
                self.label,
                self.queued,
                self._limit,
            )
            self.close()
            self._on_stuck()

    def put_answer(self, frame: bytes) -> None:
        """Queue a frame ahead of every frame queued with `put` and `put_event`."""
        if self._closed:
            log.debug("dropping %d bytes for a closed connection", len(frame))
            return
        self._answers.append(frame)
        self.queued += len(frame)
        self._woken = True
        self._wake.set()
        self._check_stuck()

    def put_event(self, conversation_id: str, seq: int, frame: bytes) -> bool:
        """Queue a `turn/event` frame; False when it was dropped because the client lags."""
        if self._closed or conversation_id in self._dropping:
            return False
        if self.queued > self._limit:
            # Judged on the backlog, not on this frame: one event larger than the limit
            # still gets through to a client that keeps up (else it could never catch up).
            self._dropping.add(conversation_id)
            self._to_tell[conversation_id] = self._last_seq.get(conversation_id, seq - 1)
            log.warning(
                "%s lags: %d bytes queued; dropping events of %s from seq %d",
                self.label,
                self.queued,
                conversation_id,
                seq,
            )
            return False
        self._last_seq[conversation_id] = seq
        self._frames.append(frame)  # `_append`, inlined: once per token
        self.queued += len(frame)
        if not self._woken:
            self._woken = True
            self._wake.set()
        return True

    def reattached(self, conversation_id: str) -> None:
        """The client asked for a conversation's events again (`turn/attach`)."""
        self._dropping.discard(conversation_id)
        self._to_tell.pop(conversation_id, None)

    def close(self) -> None:
        """Take no more frames; `take` returns what is left, then None."""
        self._closed = True
        self._wake.set()
        self._room.set()

    async def wait_room(self) -> None:
        """Wait until the queue is below its limit (the reader pauses meanwhile, so a
        client that sends requests without reading the answers cannot grow it)."""
        while self.queued > self._limit and not self._closed:
            await self._room.wait()

    async def take(self) -> bytes | None:
        """The next batch of frames, joined into one write; None once closed and empty."""
        while not self._frames and not self._answers:
            if self._closed:
                return None
            await self._wake.wait()
            self._wake = anyio.Event()
            self._woken = False
        chunks: list[bytes] = []
        while self._answers:
            frame = self._answers.popleft()
            self.queued -= len(frame)
            chunks.append(frame)
        while self._frames and len(chunks) < _BATCH_FRAMES:
            frame = self._frames.popleft()
            self.queued -= len(frame)
            chunks.append(frame)
        if self.queued <= self._limit:
            self._room.set()
            self._room = anyio.Event()
        if self._to_tell and self.queued <= self._limit // 4:
            # Drained far enough: tell the client where to re-attach from, after the
            # events still queued (they come before `fromSeq`).
            told, self._to_tell = self._to_tell, {}
            for cid, seq in told.items():
                log.info("%s drained: told to re-attach to %s from seq %d", self.label, cid, seq)
                self._append(self._lagged_frame(cid, seq))
        return b"".join(chunks)

    def _append(self, frame: bytes) -> None:
        self._frames.append(frame)
        self.queued += len(frame)
        self._woken = True
        self._wake.set()
