"""The inquiry router (`jpd.inquiry.router`) with fakes: static answer, turn cache, target
assistant, clients, and each detached mode x exclusive x secret (protocol.md 10.1, 10.2),
with what is recorded."""

from __future__ import annotations

import itertools
from typing import Any

import anyio
import pytest

from jpd.config.tools import DetachedPolicy, QuestionConfig
from jpd.conversation import events as ev
from jpd.inquiry.recorder import InquiryRecorder
from jpd.inquiry.router import BackendError, Failed, QuestionContext, Resolved, Router
from jpd.protocol.detached import DetachedMode
from jpd.protocol.errors import RequestCancelled
from jpd.protocol.question import Question
from tests.unit.fakes import Clients, FakeBackend, FakeLink, FakeLog, replies, until_pending

TIMEOUT = 0.01


class Setup:
    def __init__(self, *links: FakeLink, backend: FakeBackend | None = None) -> None:
        self.clients = Clients(list(links))
        self.log = FakeLog()
        self.backend = backend if backend is not None else FakeBackend()
        self.pending = self.clients.pending()
        self.router = Router(self.pending, InquiryRecorder(self.log, "c"), self.backend)

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
        [response] = self.log.responses()
        response.pop("timestamp")
        return response


# --- static answer, turn cache ---------------------------------------------------------


async def test_static_answer_wins_and_nobody_is_asked() -> None:
    link = FakeLink(1, answer=replies({"answer": False}))
    setup = Setup(link)

    assert await setup.ask(config={"answer": True}) == Resolved(True)
    assert link.requests == [] and setup.backend.asked == []
    request, response = setup.recorded()
    assert request["type"] == "inquiry_request" and request["id"] == "call_1.q.1"
    assert response == {
        "type": "inquiry_response",
        "id": "call_1.q.1",
        "outcome": "answered",
        "answer": True,
    }
    assert setup.log.syncs == 1  # the request is durable before anybody is asked


async def test_invalid_static_answer_fails() -> None:
    setup = Setup()

    result = await setup.ask(config={"answer": "maybe"})

    assert isinstance(result, Failed) and "questions.q.answer" in result.message
    assert setup.outcome()["reason"] == "invalid_static_answer"


@pytest.mark.parametrize(
    ("answer_type", "persistence", "cached"),
    [
        ({"type": "boolean"}, "turn", True),
        ({"type": "boolean"}, "none", False),
        ({"type": "secret"}, "turn", False),
    ],
)
async def test_remembered_answer_is_reused_in_the_turn(
    answer_type: dict[str, Any], persistence: str, cached: bool
) -> None:
    value = "s" if answer_type["type"] == "secret" else True
    link = FakeLink(1, answer=replies(*[{"answer": value, "remember": True}] * 2))
    setup = Setup(link)

    first = await setup.ask(answer_type, persistence=persistence)
    second = await setup.ask(answer_type, persistence=persistence, call_id="call_2")

    assert first == second == Resolved(value)
    assert len(link.requests) == (1 if cached else 2)


# --- target assistant ---------------------------------------------------------------------


async def test_target_assistant_asks_the_backend_with_overrides() -> None:
    setup = Setup(FakeLink(1, answer=replies({"answer": False})))

    plain = await setup.ask({"type": "text"}, config={"target": "assistant"})
    table = await setup.ask(
        {"type": "text"}, config={"target": {"model": {"id": "test/x"}}}, call_id="call_2"
    )

    assert plain == table == Resolved("from the model")
    [(_, none), (_, overrides)] = setup.backend.asked
    assert none is None and overrides is not None


@pytest.mark.parametrize(("exclusive", "secret"), [(True, False), (False, True), (True, True)])
async def test_human_only_question_never_goes_to_the_assistant(
    exclusive: bool, secret: bool
) -> None:
    setup = Setup()

    result = await setup.ask(
        {"type": "secret" if secret else "text"},
        exclusive=exclusive,
        config={"target": "assistant"},
    )

    assert isinstance(result, Failed) and "cannot be routed to the assistant" in result.message
    assert setup.backend.asked == []
    assert setup.outcome()["reason"] == "assistant_routing_denied"


async def test_backend_failure_is_recorded() -> None:
    setup = Setup(backend=FakeBackend(BackendError("no valid answer")))

    result = await setup.ask({"type": "text"}, config={"target": "assistant"})

    assert isinstance(result, Failed) and "no valid answer" in result.message
    assert setup.outcome()["reason"] == "backend_error"


# --- clients ----------------------------------------------------------------------------


async def test_capable_client_answers_and_sees_the_wire_question() -> None:
    link = FakeLink(1, answer=replies({"answer": ["a"]}))
    setup = Setup(link)

    result = await setup.ask(
        {"type": "multi_select", "options": ["a", "b"], "max_items": 1},
        config={"prompt_label": "Pick", "exclusive": True},
        default=["b"],
    )

    assert result == Resolved(["a"])
    [(method, params)] = link.requests
    assert method == "inquiry/prompt"
    assert params["promptLabel"] == "Pick"
    assert params["question"] == {
        "id": "q",
        "text": "Go?",
        "answerType": {"type": "multi_select", "options": ["a", "b"], "maxItems": 1},
        "default": ["b"],
        "exclusive": True,  # the config override
        "persistence": "turn",
    }


async def test_secret_default_is_never_sent_and_the_answer_is_redacted() -> None:
    link = FakeLink(1, answer=replies({"answer": "hunter2"}))
    setup = Setup(link)

    assert await setup.ask({"type": "secret"}, default="s3cret-default") == Resolved("hunter2")
    [(_, params)] = link.requests
    assert "default" not in params["question"]
    assert setup.outcome() == {
        "type": "inquiry_response",
        "id": "call_1.q.1",
        "outcome": "redacted",
    }
    assert "hunter2" not in repr(setup.log.events)


async def test_client_dismissal_fails_with_reason_user() -> None:
    setup = Setup(FakeLink(1, answer=replies(RequestCancelled("no"))))

    result = await setup.ask(mode="auto")

    assert isinstance(result, Failed) and "cancelled the question" in result.message
    assert setup.outcome()["reason"] == "user"


async def test_a_client_that_cannot_prompt_the_type_leaves_it_to_the_policy() -> None:
    link = FakeLink(1, answer_types=("boolean",), answer=replies({"answer": 3}))
    setup = Setup(link)

    result = await setup.ask({"type": "number"}, mode="auto")

    assert result == Resolved("from the model") and link.requests == []


async def test_cancelling_the_turn_records_user() -> None:
    setup = Setup(FakeLink(1))  # asks forever

    with anyio.move_on_after(0.05):
        await setup.ask()

    assert setup.outcome()["reason"] == "user"


# --- detached modes x exclusive x secret --------------------------------------------------

# (mode, exclusive, secret, has default) -> (outcome, reason or answer, message part)
EXPECTED: dict[tuple[str, bool, bool], tuple[str, Any, str]] = {
    ("auto", False, False): ("answered", "from the model", ""),
    ("defaults", False, False): ("answered", "dflt", ""),
    ("deny", False, False): ("cancelled", "no_prompt_backend", "detached policy is `deny`"),
}
HUMAN_ONLY = ("cancelled", "no_prompt_backend", "no interactive terminal")


@pytest.mark.parametrize(
    ("mode", "exclusive", "secret", "via_defer"),
    list(
        itertools.product(["auto", "defaults", "deny"], [False, True], [False, True], [False, True])
    ),
)
async def test_detached_matrix(mode: Any, exclusive: bool, secret: bool, via_defer: bool) -> None:
    setup = Setup()
    kind = "secret" if secret else "text"

    result = await setup.ask(
        {"type": kind},
        exclusive=exclusive,
        default="dflt",
        mode="defer" if via_defer else mode,
        fallback=mode,
    )

    outcome, detail, message = (
        HUMAN_ONLY if exclusive or secret else EXPECTED[(mode, exclusive, secret)]
    )
    recorded = setup.outcome()
    assert recorded["outcome"] == ("redacted" if secret and outcome == "answered" else outcome)
    if outcome == "answered":
        assert result == Resolved(detail)
    else:
        assert isinstance(result, Failed) and message in result.message
        assert recorded["reason"] == detail
    assert setup.backend.asked == (
        [("call_1.q.1", None)] if mode == "auto" and outcome == "answered" else []
    )


@pytest.mark.parametrize(("default", "message"), [(None, "has no default"), (42, "has no default")])
async def test_defaults_without_a_usable_default(default: Any, message: str) -> None:
    setup = Setup()

    result = await setup.ask({"type": "text"}, default=default, mode="defaults")

    assert isinstance(result, Failed) and message in result.message
    assert setup.outcome()["reason"] == "no_prompt_backend"


async def test_defer_is_answered_by_a_client_that_comes_later() -> None:
    setup = Setup()
    result: list[Resolved | Failed] = []

    async with anyio.create_task_group() as tg:

        async def ask() -> None:
            # A long wait: only the newcomer can end it in time.
            result.append(await setup.ask(mode="defer", fallback="deny", timeout=30))

        tg.start_soon(ask)
        await until_pending(setup.pending)
        newcomer = FakeLink(5, answer=replies({"answer": True}))
        setup.clients.links.append(newcomer)
        setup.pending.client_ready(newcomer)

    assert result == [Resolved(True)]
    assert setup.outcome()["outcome"] == "answered"
