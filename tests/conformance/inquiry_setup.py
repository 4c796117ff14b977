"""One turn's inquiry router over fakes (clients, log, LLM backend), for the conformance
modules on recording, secrets and the detached policy."""

from __future__ import annotations

from typing import Any

import anyio

from jpd.config.tools import DetachedPolicy, QuestionConfig
from jpd.conversation import events as ev
from jpd.inquiry.recorder import InquiryRecorder
from jpd.inquiry.router import Failed, QuestionContext, Resolved, Router
from jpd.protocol.detached import DetachedMode
from jpd.protocol.question import Question
from tests.unit.fakes import Clients, FakeBackend, FakeLink, FakeLog

TIMEOUT = 0.01


class Setup:
    """A router with its clients, log, backend and turn cache; `ask` asks one question."""

    def __init__(
        self,
        *links: FakeLink,
        backend: FakeBackend | None = None,
        stopping: bool = False,
    ) -> None:
        self.clients = Clients(list(links))
        self.log = FakeLog()
        self.backend = backend if backend is not None else FakeBackend()
        self.pending = self.clients.pending()
        self.cache: dict[str, Any] = {}
        self.stopping = stopping
        self.router = Router(
            self.pending,
            InquiryRecorder(self.log, "c"),
            self.backend,
            turn_cache=self.cache,
            stopping=lambda: self.stopping,
        )

    async def ask(
        self,
        answer_type: dict[str, Any] | None = None,
        *,
        config: dict[str, Any] | None = None,
        mode: DetachedMode = "deny",
        fallback: Any = "deny",
        timeout: float = TIMEOUT,
        call_id: str = "call_1",
        **question: Any,
    ) -> Resolved | Failed:
        """Ask question `q` of tool `x` (boolean unless `answer_type`)."""
        q = Question.model_validate(
            {"id": "q", "text": "Go?", "answer_type": answer_type or {"type": "boolean"}} | question
        )
        ctx = QuestionContext(
            conversation_id="c",
            turn_id="t",
            tool_name="x",
            tool_call_id=call_id,
            source=ev.ToolSource(name="x"),
            question=q,
            config=QuestionConfig.model_validate(config) if config is not None else None,
            detached=DetachedPolicy(mode, timeout, fallback),
        )
        with anyio.fail_after(5):
            return await self.router.resolve(ctx)

    def recorded(self) -> list[dict[str, Any]]:
        """The inquiry events, as on disk, without timestamps."""
        out = []
        for event in self.log.events:
            record = ev.event_to_json(event)
            record.pop("timestamp")
            out.append(record)
        return out

    def outcome(self) -> dict[str, Any]:
        """The one recorded `inquiry_response`, as on disk, without its timestamp."""
        [response] = self.log.responses()
        response.pop("timestamp")
        return response
