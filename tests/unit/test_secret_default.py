"""A secret question's default is a secret too (protocol.md section 10.7)."""

from __future__ import annotations

import json
from pathlib import Path

from jpd.conversation import events as ev
from jpd.conversation.store import ConversationStore
from jpd.inquiry.recorder import InquiryRecorder
from jpd.protocol.question import Question

SECRET = {"id": "token", "text": "Token?", "answer_type": {"type": "secret"}, "default": "hunter2"}


class Log:
    def __init__(self) -> None:
        self.events: list[ev.Event] = []

    def append(self, conversation_id: str, event: ev.Event) -> None:
        self.events.append(event)

    def sync(self, conversation_id: str) -> None:
        """Nothing to sync."""


async def test_the_recorded_question_has_no_default() -> None:
    log = Log()
    recorder = InquiryRecorder(log, "c")
    question = Question.model_validate(SECRET)
    await recorder.request("call_1.token.1", ev.ToolSource(name="deploy"), question)
    (recorded,) = log.events
    assert "hunter2" not in ev.dump_event(recorded)
    assert isinstance(recorded, ev.InquiryRequest) and recorded.question.default is None


def test_an_older_log_reads_back_without_the_default(tmp_path: Path) -> None:
    store = ConversationStore(tmp_path)
    store.create("c-1")
    store.append("c-1", ev.TurnStart(turn_id="t-1"))
    older = ev.InquiryRequest(
        id="call_1.token.1",
        source=ev.ToolSource(name="deploy"),
        question=Question.model_validate(SECRET),
    )
    store.append("c-1", older)  # as an older daemon wrote it
    store.append("c-1", ev.InquiryResponse(response=ev.Redacted(id="call_1.token.1")))
    store.append("c-1", ev.TurnEnd(turn_id="t-1", stop_reason="end_turn"))
    assert "hunter2" in (tmp_path / "conversations" / "c-1" / "events.jsonl").read_text()
    assert b"hunter2" not in store.load_encoded("c-1")
    assert "hunter2" not in json.dumps([ev.event_to_json(e) for e in store.load("c-1")])
    store.close()
