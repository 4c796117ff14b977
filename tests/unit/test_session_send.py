"""`Session.send` queues notifications until the connection is closed, then drops them;
a failing sender never reaches the caller (a turn publishing to a dead client)."""

from __future__ import annotations

from typing import Any

from jpd.protocol.client_port import Notification
from jpd.protocol.method_table import TURN_EVENT
from jpd.protocol.turn_events import TurnCompleted, TurnEventParams
from jpd.rpc.session import Session


async def _no_request(method: str, params: dict[str, Any]) -> Any:
    raise AssertionError("no requests expected")


def _note(seq: int) -> Notification:
    params = TurnEventParams(
        conversation_id="c", turn_id="t", seq=seq, event=TurnCompleted(stop_reason="end_turn")
    )
    return Notification(TURN_EVENT, params)


def test_sent_until_closed_then_dropped() -> None:
    sent: list[int] = []
    session = Session(lambda note: sent.append(note.wire["seq"]), _no_request)
    session.send(_note(1))
    session.close(0)
    assert session.closed.is_set() and session.exit_code == 0
    session.send(_note(2))
    assert sent == [1]


def test_a_failing_sender_is_not_the_callers_error() -> None:
    def broken(note: Notification) -> None:
        raise OSError("gone")

    session = Session(broken, _no_request)
    session.send(_note(1))  # logged, not raised
