"""Conformance: the assistant answers through `answer_inquiry` (protocol.md 9.3, 10.4, 12.2).

In process: the LLM inquiry backend over a provider that honours `tool_choice` like a
hosted API (tests/fixtures/choice_provider.py), the router and the tool coordinator.
The forced-choice rules of the side request are in test_forced_retry.py. End to end
(tests/e2e/test_inquiry_backend.py): the side request's messages start with the
parent's, parallel inquiries, the inquiry model's settings, trimming to the
embedded model's context, a provider error in the side request.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from jpd.config import Config
from jpd.config.tools import ToolConfig
from jpd.conversation import events as ev
from jpd.core.turn_tools import make_coordinator
from jpd.inquiry.backend import LlmInquiryBackend
from jpd.inquiry.router import BackendError
from jpd.llm.base import (
    Finish,
    ModelRequest,
    StreamEvent,
    ToolCallEvent,
    ToolCallPart,
    ToolChoiceTool,
    ToolResultMessage,
    UserMessage,
)
from jpd.protocol.question import Question
from jpd.tools.builtin import BuiltinContext
from jpd.tools.catalog import EffectiveTool
from jpd.tools.outcome import NeedsInput, Success, ToolOutcome
from jpd.tools.schema import parameters_to_schema
from tests.fixtures.choice_provider import (
    ChoiceProvider,
    Reply,
    View,
    _NoOtherModels,
    ask_assistant,
    call,
    parent_request,
    question,
)
from tests.unit.fakes import Clients, FakeLog


def answer_with(inquiry_id: str, answer: str = "true") -> Reply:
    """A reply calling `answer_inquiry` with this `inquiry_id`, whatever was asked."""

    def reply(request: ModelRequest) -> list[StreamEvent]:
        arguments = {"inquiry_id": inquiry_id, "answer": answer}
        return [
            ToolCallEvent(
                id=f"a{len(request.messages)}", name="answer_inquiry", arguments=arguments
            ),
            Finish(reason="tool_use"),
        ]

    return reply


def asked_ids(provider: ChoiceProvider) -> list[str]:
    """The inquiry id each side request's question names."""
    out = []
    for request in provider.requests:
        asked = [m for m in request.messages if isinstance(m, UserMessage)][-1]
        out.append(asked.content.split('inquiry_id "')[1].split('"')[0])
    return out


def pinned_ids(request: ModelRequest) -> list[str] | None:
    """The `enum` the request's `answer_inquiry` schema pins `inquiry_id` to, if any."""
    [tool] = [t for t in request.tools if t.name == "answer_inquiry"]
    enum: list[str] | None = tool.parameters["properties"]["inquiry_id"].get("enum")
    return enum


# --- the answer itself (protocol.md 10.4) ---------------------------------------------


async def test_an_answer_naming_another_inquiry_is_sent_back_and_asked_again() -> None:
    """protocol.md 10.4: an `answer_inquiry` whose `inquiry_id` is not the one asked is an
    invalid answer: it goes back as an error result and the model is asked again."""
    provider = ChoiceProvider(answer_with("call_9.other.1"))

    assert await ask_assistant(provider, parent_request()) is True

    first, second = provider.requests
    [error] = [m for m in second.messages if isinstance(m, ToolResultMessage) and m.is_error]
    assert error.content == (
        "Invalid answer: inquiry_id must be 'call_1.go.1', got 'call_9.other.1'. "
        "Call answer_inquiry again."
    )
    assert len(second.messages) == len(first.messages) + 2  # the wrong call, its error


async def test_an_invalid_answer_is_retried_at_most_twice_then_the_backend_fails() -> None:
    """protocol.md 10.4: an invalid answer goes back to the model at most twice; failing
    that, the question is cancelled with `backend_error` (the backend raises)."""
    provider = ChoiceProvider(*(call("answer_inquiry", "perhaps") for _ in range(3)))

    with pytest.raises(BackendError, match="no valid answer after 3 attempts"):
        await ask_assistant(provider, parent_request())
    assert len(provider.requests) == 3


PROVIDERS = ["anthropic", "openai", "openai-compatible", "local"]


@pytest.mark.parametrize("name", PROVIDERS)
async def test_every_provider_forces_and_pins_answer_inquiry_from_the_first_try(
    name: str,
) -> None:
    """protocol.md 10.4: for every provider, the first side request forces
    `answer_inquiry` and pins `inquiry_id` (and a boolean's values) with `enum`; the
    other tools are the turn's."""
    provider = ChoiceProvider(name=name)

    assert await ask_assistant(provider, parent_request()) is True

    [first] = provider.requests
    assert first.tool_choice == ToolChoiceTool(name="answer_inquiry")
    assert pinned_ids(first) == ["call_1.go.1"]
    [tool] = [t for t in first.tools if t.name == "answer_inquiry"]
    assert tool.parameters["properties"]["answer"]["enum"] == ["true", "false"]
    others = [t for t in first.tools if t.name != "answer_inquiry"]
    assert others == [t for t in parent_request().tools if t.name != "answer_inquiry"]


@pytest.mark.parametrize("name", PROVIDERS)
async def test_a_select_answer_is_pinned_to_its_options(name: str) -> None:
    """protocol.md 10.4: a select question's `answer` is pinned to its options."""
    provider = ChoiceProvider(call("answer_inquiry", "dev"), name=name)
    select = Question.model_validate(
        {
            "id": "go",
            "text": "Branch?",
            "answer_type": {"type": "select", "options": ["main", "dev"]},
        }
    )
    ctx = dataclasses.replace(question(), question=select)
    backend = LlmInquiryBackend(View(parent_request()), provider, Config(), _NoOtherModels())

    assert await backend.answer(ctx, None) == "dev"

    [tool] = [t for t in provider.requests[0].tools if t.name == "answer_inquiry"]
    assert tool.parameters["properties"]["answer"]["enum"] == ["main", "dev"]
    assert pinned_ids(provider.requests[0]) == ["call_1.go.1"]


async def test_a_reply_without_the_forced_call_fails_the_side_request() -> None:
    """protocol.md 10.4: a model that answers without calling `answer_inquiry` despite
    the forced choice (reasoning off) fails the side request: one request, no retry."""
    provider = ChoiceProvider(lambda request: [Finish(reason="end_turn")])

    with pytest.raises(BackendError, match="did not call answer_inquiry"):
        await ask_assistant(provider, parent_request())
    assert len(provider.requests) == 1


# --- outside an inquiry (protocol.md 9.3) ----------------------------------------------


async def test_answer_inquiry_called_in_the_turn_is_a_tool_error_the_model_reads() -> None:
    """protocol.md 9.3: `answer_inquiry` called by the turn itself (no question open in
    that call) is not run: the model reads an error result saying so."""
    coordinator = make_coordinator(
        tools={},
        pending=Clients([]).pending(),
        log=FakeLog(),
        backend=None,
        conversation_id="c",
        turn_id="t",
        root=Path("/"),
        env={},
        detached="deny",
    )
    arguments = {"inquiry_id": "call_1.go.1", "answer": "true"}
    content, is_error = await coordinator.run_one(
        ToolCallPart(id="call_2", name="answer_inquiry", arguments=arguments)
    )
    assert is_error
    assert content == (
        "answer_inquiry is only for answering a question you were asked about a paused "
        "tool; there is no open question in this call."
    )


# --- attempts (protocol.md 12.2) -------------------------------------------------------


class AsksTwice:
    """A built-in that asks `go` again after its first answer, then reports both."""

    name = "twice"

    def __init__(self) -> None:
        self.seen: list[Any] = []

    def default_config(self) -> ToolConfig:
        return ToolConfig()

    def inquiry_source(self) -> ev.ToolSource | ev.AssistantSource:
        return ev.ToolSource(name=self.name)

    async def run(
        self, arguments: dict[str, Any], answers: dict[str, Any], ctx: BuiltinContext
    ) -> ToolOutcome:
        if "go" in answers:
            self.seen.append(answers.pop("go"))
        if len(self.seen) < 2:
            spec = {"id": "go", "text": "Go?", "answer_type": {"type": "boolean"}}
            return NeedsInput(question=Question.model_validate(spec | {"persistence": "none"}))
        return Success(content=json.dumps(self.seen))


async def test_the_second_ask_of_a_question_is_attempt_2_and_the_model_answers_that_id() -> None:
    """protocol.md 12.2: the inquiry id is `<tool_call_id>.<question_id>.<attempt>`, the
    attempt counted per turn from 1: a question the same call asks again is recorded as
    `.2`, and the assistant is asked, and answers, under that id."""
    tool = AsksTwice()
    config = ToolConfig.model_validate(
        {"run": "unattended", "questions": {"go": {"target": "assistant"}}}
    )
    provider = ChoiceProvider()
    log = FakeLog()
    coordinator = make_coordinator(
        tools={
            tool.name: EffectiveTool(
                name=tool.name,
                source="builtin",
                config=config,
                enabled=True,
                schema=parameters_to_schema({}),
                builtin=tool,  # type: ignore[arg-type]
            )
        },
        pending=Clients([]).pending(),
        log=log,
        backend=LlmInquiryBackend(View(parent_request()), provider, Config(), _NoOtherModels()),
        conversation_id="c",
        turn_id="t",
        root=Path("/"),
        env={},
        detached="deny",
    )

    content, is_error = await coordinator.run_one(
        ToolCallPart(id="call_1", name="twice", arguments={})
    )

    assert (content, is_error) == ("[true, true]", False)
    assert asked_ids(provider) == ["call_1.go.1", "call_1.go.2"]
    recorded = [(e.type, e.id) for e in log.events if isinstance(e, ev.InquiryRequest)]
    assert [i for _, i in recorded] == ["call_1.go.1", "call_1.go.2"]
    answered = [ev.event_to_json(e) for e in log.events if isinstance(e, ev.InquiryResponse)]
    assert [(r["id"], r["outcome"], r["answer"]) for r in answered] == [
        ("call_1.go.1", "answered", True),
        ("call_1.go.2", "answered", True),
    ]
