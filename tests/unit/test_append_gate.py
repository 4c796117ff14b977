"""The append gate: a conversation's events wait while appends made before them are not
committed, then go out in order; those never stored are dropped."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

from jpd.core.append_gate import AppendGate
from jpd.protocol.client_port import Notification
from jpd.protocol.method_table import TURN_EVENT
from jpd.protocol.turn_events import TextDeltaEvent, TurnEventParams
from tests.unit.test_hub import CID, FakeLink, make_hub


class Marks:
    """A writer whose commits the test makes happen."""

    def __init__(self) -> None:
        self.pending: int | None = None
        self.waiters: list[tuple[int, Callable[[int, bool], None]]] = []

    def unwritten(self, conversation_id: str) -> int | None:
        return self.pending

    def when_written(
        self, conversation_id: str, mark: int, callback: Callable[[int, bool], None]
    ) -> None:
        self.waiters.append((mark, callback))

    def commit(self, done: int, ok: bool = True) -> None:
        """Written through `done` (and, not `ok`, no further), as the writer calls back."""
        if not ok or (self.pending or 0) <= done:
            self.pending = None
        due = [w for w in self.waiters if w[0] <= done or not ok]
        self.waiters = [w for w in self.waiters if w not in due]
        for _, callback in due:
            callback(done, ok)


def note(seq: int) -> Notification:
    params = TurnEventParams(
        conversation_id="c-1", turn_id="t-1", seq=seq, event=TextDeltaEvent(text=str(seq))
    )
    return Notification(TURN_EVENT, params)


async def test_events_wait_for_earlier_appends_and_go_out_in_order() -> None:
    marks, sent = Marks(), []
    gate = AppendGate(marks, lambda cid, n, seq: sent.append(seq))
    assert not gate.hold("c-1", note(1), 1)  # nothing unwritten: sent by the hub at once
    marks.pending = 5
    assert gate.hold("c-1", note(2), 2)
    marks.pending = 7
    assert gate.hold("c-1", note(3), 3)
    marks.pending = None  # all committed by now, but behind the held ones
    assert gate.hold("c-1", note(4), 4)
    marks.pending = 7
    marks.commit(5)
    await asyncio.sleep(0.01)
    assert sent == [2]
    marks.commit(7)
    await asyncio.sleep(0.01)
    assert sent == [2, 3, 4]
    assert not gate.hold("c-1", note(5), 5)


async def test_events_whose_appends_failed_are_dropped() -> None:
    marks, sent = Marks(), []
    gate = AppendGate(marks, lambda cid, n, seq: sent.append(seq))
    marks.pending = 3
    gate.hold("c-1", note(1), 1)
    marks.pending = 4
    gate.hold("c-1", note(2), 2)
    marks.commit(3, ok=False)
    await asyncio.sleep(0.01)
    assert sent == [1]  # its appends were committed; the second's never will be
    assert not gate.hold("c-1", note(3), 3)  # the writes stopped: the rest go out


async def test_a_client_attaching_with_from_seq_gets_held_events_once(tmp_path: Path) -> None:
    hub, _ = make_hub(tmp_path)
    marks = Marks()
    hub.gate = AppendGate(marks, hub.send_held)
    first = FakeLink(1)
    hub.subscribe(CID, first)
    marks.pending = 2
    for n in range(3):
        hub.publish(CID, "t-1", TextDeltaEvent(text=str(n)))
    assert first.seqs() == []  # held
    late = FakeLink(2)
    await hub.attach(CID, late, 0)
    assert late.seqs() == [1, 2, 3]  # the replay holds them (they are in the buffer)
    marks.commit(2)
    await asyncio.sleep(0.01)
    assert first.seqs() == [1, 2, 3]
    assert late.seqs() == [1, 2, 3]  # not twice
    hub.publish(CID, "t-1", TextDeltaEvent(text="3"))
    assert late.seqs() == [1, 2, 3, 4]
