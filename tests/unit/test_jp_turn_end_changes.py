"""The line of changed files at the end of a followed turn: `jp` asks `turn/changes`
only when the turn may have changed files (it ran a tool, or events were missed)."""

from __future__ import annotations

import io
from typing import Any, cast

import pytest
from jpcli.follow import Follow, Follower, Interrupts
from jpcli.render import TurnRenderer
from jpcli.rpc import Connection, Notification
from jpcli.terminal import Spinner


class _LiveConnection:
    """Stands for the daemon: hands out the turn's events, records requests and answers
    `turn/changes` with one changed file."""

    def __init__(self, events: list[Notification]) -> None:
        self.events = list(events)
        self.requests: list[str] = []

    def receive(self, timeout: float | None = None) -> Notification | None:
        return self.events.pop(0) if self.events else None

    def request(self, method: str, params: Any = None, timeout: float | None = None) -> Any:
        self.requests.append(method)
        if method == "turn/changes":
            return {"turnId": "t1", "files": [{"path": "/w/a.py", "created": True}]}
        return {}


def _event(seq: int, kind: str, **fields: Any) -> Notification:
    params = {"conversationId": "c1", "turnId": "t1", "seq": seq, "event": {"kind": kind, **fields}}
    return Notification("turn/event", params)


def _follow(events: list[Notification]) -> tuple[list[str], str]:
    connection = _LiveConnection(events)
    err = io.StringIO()
    follower = Follower(
        cast(Connection, connection),
        Follow("c1", "t1"),
        renderer=TurnRenderer(io.StringIO(), err, out_tty=False, err_tty=False),
        spinner=Spinner(io.StringIO(), enabled=False),
        interrupts=Interrupts(),
    )
    assert follower.run() == 0
    return connection.requests, err.getvalue()


def test_a_turn_seen_from_its_start_without_tools_asks_nothing() -> None:
    requests, err = _follow(
        [
            _event(1, "turn_started", model="test/x"),
            _event(2, "text_delta", text="ok"),
            _event(3, "turn_completed", stopReason="end_turn"),
        ]
    )
    assert requests == []
    assert "Changed:" not in err


@pytest.mark.parametrize(
    "middle",
    [
        [_event(2, "tool_call", id="a", name="fs_create_file", arguments={})],
        [_event(2, "tool_result", id="a", content="done", isError=False)],
        # Fell behind: the missed events may have held tool calls.
        [Notification("turn/lagged", {"conversationId": "c1", "fromSeq": 2})],
    ],
)
def test_a_turn_that_ran_tools_lists_its_changes(middle: list[Notification]) -> None:
    events = [_event(1, "turn_started", model="test/x"), *middle]
    requests, err = _follow([*events, _event(9, "turn_completed", stopReason="end_turn")])
    assert requests[-1] == "turn/changes"
    assert "Changed: /w/a.py (new)" in err


def test_a_turn_followed_from_its_middle_asks() -> None:
    """Without its `turn_started`, earlier tool calls may have gone unseen."""
    requests, err = _follow(
        [_event(5, "text_delta", text="ok"), _event(6, "turn_completed", stopReason="end_turn")]
    )
    assert requests == ["turn/changes"]
    assert "Changed: /w/a.py (new)" in err
