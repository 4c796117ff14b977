"""Events reach clients only once they are in the store (a fleet's, docs/scale.md).

A fleet member's appends are written by a task per conversation, in batches
(`port.CommitMarks`); a turn publishes an event right after appending what it records.
`AppendGate` holds each `turn/event` of a conversation whose appends are not all
committed until they are, then sends it, in order: a client (or another member's
follower, through the relay) never sees an event the store does not have. Text deltas,
which are not appended (checkpoints are, twice a second), wait only behind such a write.
If the writes stop (an outage past the lease, a lost lease), the held events are dropped
(they are not in the store) and the rest go out: the turn ends with that failure.
"""

from __future__ import annotations

import asyncio
import functools
from collections import deque
from collections.abc import Callable

from jpd.conversation.port import CommitMarks
from jpd.protocol.client_port import Notification

Send = Callable[[str, Notification, int], None]


class AppendGate:
    """See the module docstring; `hold` is called on the event loop."""

    def __init__(self, marks: CommitMarks, send: Send) -> None:
        self._marks = marks
        self._send = send
        self._held: dict[str, deque[tuple[int, Notification, int]]] = {}
        self._awaited: dict[str, int] = {}
        # pygls serves the daemon on asyncio; the callbacks come from the writer's tasks.
        self._loop = asyncio.get_running_loop()

    def hold(self, conversation_id: str, note: Notification, seq: int) -> bool:
        held = self._held.get(conversation_id)
        mark = self._marks.unwritten(conversation_id)
        if mark is None:
            if not held:
                return False  # the common case: nothing waits to be written
            mark = held[-1][0]  # behind the events held before it
        if held is None:
            held = self._held[conversation_id] = deque()
        held.append((mark, note, seq))
        if mark > self._awaited.get(conversation_id, 0):
            self._awaited[conversation_id] = mark
            callback = functools.partial(self._from_thread, conversation_id)
            self._marks.when_written(conversation_id, mark, callback)
        return True

    def _from_thread(self, conversation_id: str, done: int, ok: bool) -> None:
        self._loop.call_soon_threadsafe(self._written, conversation_id, done, ok)

    def _written(self, conversation_id: str, done: int, ok: bool) -> None:
        held = self._held.get(conversation_id)
        while held and held[0][0] <= done:
            _, note, seq = held.popleft()
            self._send(conversation_id, note, seq)
        if held and not ok:
            held.clear()  # never stored: not shown
        if not held:
            self._held.pop(conversation_id, None)
            self._awaited.pop(conversation_id, None)
