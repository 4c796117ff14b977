"""Recording of inquiries (protocol.md 12.2): ids with per-turn attempt counters, and the
request/response pair written for every question whatever path answers it.

Secret answers are recorded as `redacted`: the answer reaches the tool in memory only.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Protocol

from jpd.conversation import events as ev
from jpd.conversation.sanitize import without_secret_default
from jpd.protocol.question import Question


class EventLog(Protocol):
    def append(self, conversation_id: str, event: ev.Event) -> None: ...
    async def sync(self, conversation_id: str) -> None: ...


class InquiryRecorder:
    """Writes inquiry events for one turn of one conversation."""

    def __init__(self, log: EventLog, conversation_id: str) -> None:
        self._log = log
        self._conversation_id = conversation_id
        self._attempts: Counter[tuple[str, str]] = Counter()

    def seed(self, attempts: dict[tuple[str, str], int]) -> None:
        """Continue counting from `attempts` ((tool call id, question id) -> attempts
        made), so that a resumed turn asks a question again under its id (protocol.md 12.4)."""
        self._attempts.update(attempts)

    def next_id(self, tool_call_id: str, question_id: str) -> str:
        """`<tool_call_id>.<question_id>.<attempt>`, attempt counted per turn from 1."""
        key = (tool_call_id, question_id)
        self._attempts[key] += 1
        return f"{tool_call_id}.{question_id}.{self._attempts[key]}"

    async def request(
        self,
        inquiry_id: str,
        source: ev.ToolSource | ev.AssistantSource,
        question: Question,
    ) -> None:
        """Record the question and fsync, before anybody is asked (a secret's default,
        a secret too, is not written: protocol.md section 10.7)."""
        request = ev.InquiryRequest(id=inquiry_id, source=source, question=question)
        self._log.append(self._conversation_id, without_secret_default(request))
        await self._log.sync(self._conversation_id)

    def answered(self, inquiry_id: str, question: Question, answer: Any) -> None:
        """Record an answer (`redacted` for a secret question)."""
        outcome: ev.Answered | ev.Redacted
        if question.secret:
            outcome = ev.Redacted(id=inquiry_id)
        else:
            outcome = ev.Answered(id=inquiry_id, answer=answer)
        self._log.append(self._conversation_id, ev.InquiryResponse(response=outcome))

    def cancelled(self, inquiry_id: str, reason: ev.CancellationReason) -> None:
        """Record that the question was closed without an answer."""
        self._log.append(
            self._conversation_id,
            ev.InquiryResponse(response=ev.Cancelled(id=inquiry_id, reason=reason)),
        )
