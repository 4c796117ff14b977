"""The worker's server (`local_worker_main._Server`) with a stand-in model: the model
thread writes each command's replies, in order, and a stop flag ends a generation
between steps (or before it starts)."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator

from jpd.llm import local_frames as frames
from jpd.llm.base import Finish, ModelRequest, StreamEvent, TextDelta, UserMessage
from jpd.llm.errors import ContextOverflow
from jpd.llm.local_worker_main import _Server

REQUEST = ModelRequest(model="smollm2", messages=(UserMessage(content="hi"),))


class StandIn:
    """Steps like `LocalProvider.generate`: a prompt chunk (None), then text, then finish."""

    def __init__(self, stop_after: threading.Event | None = None, fail: bool = False) -> None:
        self.started = 0
        self.closed = False
        self._stop_after = stop_after
        self._fail = fail

    def generate(self, request: ModelRequest) -> Iterator[StreamEvent | None]:
        self.started += 1
        try:
            yield None
            if self._fail:
                raise ContextOverflow("does not fit")
            yield TextDelta(text="a")
            if self._stop_after is not None:
                self._stop_after.set()  # as if `cancel` came in while this token was made
            yield TextDelta(text="b")
            yield Finish(reason="end_turn")
        finally:
            self.closed = True

    def count(self, request: ModelRequest) -> int:
        return 7


def _answer(
    model: StandIn, command: frames.Generate | frames.CountTokens, stop: threading.Event
) -> list[frames.Reply]:
    read, write = os.pipe()
    try:
        _Server(model, write, 60.0)._answer(command, stop)  # type: ignore[arg-type]
        os.close(write)
        data = b""
        while chunk := os.read(read, 65536):
            data += chunk
    finally:
        os.close(read)
    replies: list[frames.Reply] = []
    while data:
        size = int.from_bytes(data[:4], "big")
        replies.append(frames.REPLY.validate_json(data[4 : 4 + size]))
        data = data[4 + size :]
    return replies


def test_replies_are_written_in_order_then_done() -> None:
    replies = _answer(StandIn(), frames.Generate(id=3, request=REQUEST), threading.Event())
    events = [e for r in replies if isinstance(r, frames.Events) for e in r.events]
    assert events == [TextDelta(text="a"), TextDelta(text="b"), Finish(reason="end_turn")]
    assert replies[-1] == frames.Done(id=3) and all(r.id == 3 for r in replies)


def test_a_stop_ends_the_generation_at_the_next_step_and_confirms() -> None:
    stop = threading.Event()
    model = StandIn(stop_after=stop)
    replies = _answer(model, frames.Generate(id=4, request=REQUEST), stop)
    assert replies == [frames.Events(id=4, events=[TextDelta(text="a")]), frames.Done(id=4)]
    assert model.closed  # the model's generator was closed: the model is free


def test_a_command_cancelled_before_it_started_is_not_run() -> None:
    stop = threading.Event()
    stop.set()
    model = StandIn()
    assert _answer(model, frames.Generate(id=5, request=REQUEST), stop) == [frames.Done(id=5)]
    assert model.started == 0


def test_errors_and_counts_are_replies_too() -> None:
    replies = _answer(StandIn(fail=True), frames.Generate(id=6, request=REQUEST), threading.Event())
    assert replies[-1] == frames.Failed(id=6, message="does not fit", overflow=True)
    count = _answer(StandIn(), frames.CountTokens(id=7, request=REQUEST), threading.Event())
    assert count == [frames.Count(id=7, tokens=7)]
