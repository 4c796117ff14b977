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
    AssistantMessage,
    Finish,
    ModelRequest,
    StreamEvent,
    TextDelta,
    ToolCallEvent,
    ToolCallPart,
    ToolChoiceAny,
    ToolChoiceAuto,
    ToolChoiceNone,
    ToolChoiceTool,
    ToolResultMessage,
    UserMessage,
)
from jpd.llm.openai_request import build_body
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
    text,
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


HOSTED = ["anthropic", "openai", "openai-compatible"]
PINNED = {
    "type": "object",
    "properties": {
        "inquiry_id": {"type": "string", "enum": ["call_1.go.1"]},
        "answer": {"type": "string", "enum": ["true", "false"]},
    },
    "required": ["inquiry_id", "answer"],
    "additionalProperties": False,
}


@pytest.mark.parametrize("name", HOSTED)
async def test_a_hosted_provider_gets_the_parents_tools_and_tool_choice_unpinned(
    name: str,
) -> None:
    """protocol.md 10.4 (RFD 033): on a hosted provider the first side request keeps the
    parent's tools and `tool_choice` as they are and pins nothing, so its prefix is the
    parent's cached one."""
    provider = ChoiceProvider(name=name)
    parent = parent_request()

    assert await ask_assistant(provider, parent) is True

    [first] = provider.requests
    assert first.tools == parent.tools and first.tool_choice == parent.tool_choice
    assert first.pinned_arguments is None
    assert first.messages[: len(parent.messages)] == parent.messages


async def test_the_embedded_model_is_forced_and_pinned_without_changing_the_tools() -> None:
    """protocol.md 10.4: a provider that constrains decoding (the embedded model) gets
    `answer_inquiry` forced from the first try, the id and a boolean's values pinned in
    `pinned_arguments` (its grammar); the tools it reads stay the parent's."""
    provider = ChoiceProvider(name="local")
    parent = parent_request()

    assert await ask_assistant(provider, parent) is True

    [first] = provider.requests
    assert first.tool_choice == ToolChoiceTool(name="answer_inquiry")
    assert first.pinned_arguments == PINNED
    assert first.tools == parent.tools


async def test_a_select_answer_is_pinned_to_its_options_on_the_embedded_model() -> None:
    """protocol.md 10.4: a select question's `answer` is pinned to its options."""
    provider = ChoiceProvider(call("answer_inquiry", "dev"), name="local")
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

    pinned = provider.requests[0].pinned_arguments
    assert pinned is not None
    assert pinned["properties"]["answer"]["enum"] == ["main", "dev"]
    assert pinned["properties"]["inquiry_id"]["enum"] == ["call_1.go.1"]


async def test_an_answer_without_the_call_is_asked_again_forced_then_fails() -> None:
    """protocol.md 10.4: an answer on the parent's `tool_choice` that does not call
    `answer_inquiry` is followed by one request forcing it (after the answer and a
    note); a forced request answered without the call fails the side request."""
    provider = ChoiceProvider(text("Sure."), lambda request: [Finish(reason="end_turn")])

    with pytest.raises(BackendError, match="did not call answer_inquiry"):
        await ask_assistant(provider, parent_request())

    first, forced = provider.requests
    assert first.tool_choice == ToolChoiceAuto()
    assert forced.tool_choice == ToolChoiceTool(name="answer_inquiry")
    assert forced.tools == first.tools
    assert forced.messages[len(first.messages) :] == (
        AssistantMessage(content="Sure."),
        UserMessage(
            content="Your previous answer did not call the `answer_inquiry` tool. Call it "
            'now. Use inquiry_id "call_1.go.1".'
        ),
    )


@pytest.mark.parametrize("name", [*HOSTED, "google", "ollama"])
async def test_a_parent_that_forced_another_tool_gets_answer_inquiry_forced(name: str) -> None:
    """protocol.md 10.4: a parent that forced another tool would make the model call that
    one: the side request forces `answer_inquiry` from the first try instead (on
    `openai-compatible`, pins the answer as its retries do); its tools and messages stay
    the parent's, and the model answers at once."""
    pinned_text = '{"inquiry_id": "call_1.go.1", "answer": "true"}'
    replies = [lambda request: [TextDelta(text=pinned_text), Finish(reason="end_turn")]]
    provider = ChoiceProvider(*(replies if name == "openai-compatible" else []), name=name)
    parent = parent_request(ToolChoiceTool(name="echo"))

    assert await ask_assistant(provider, parent) is True

    [first] = provider.requests
    if name == "openai-compatible":
        assert first.tool_choice == ToolChoiceNone() and first.pinned_arguments == PINNED
    else:
        assert first.tool_choice == ToolChoiceTool(name="answer_inquiry")
        assert first.pinned_arguments is None
    assert first.tools == parent.tools
    assert first.messages[: len(parent.messages)] == parent.messages


async def test_a_call_of_another_tool_on_the_parents_choice_is_asked_again_forced() -> None:
    """protocol.md 10.4: on a parent's `any`, a call of another tool is not run, and the
    retry forces `answer_inquiry`, which it answers."""
    provider = ChoiceProvider(call("echo", "x"))

    assert await ask_assistant(provider, parent_request(ToolChoiceAny())) is True

    first, forced = provider.requests
    assert first.tool_choice == ToolChoiceAny()
    assert forced.tool_choice == ToolChoiceTool(name="answer_inquiry")
    assert forced.messages == first.messages  # nothing was said: the same question again


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


async def test_openai_compatible_pins_the_retry_in_a_response_format() -> None:
    """protocol.md 10.4: on `openai-compatible` (maybe a small model behind a llama.cpp
    server) the first try keeps the parent's prefix; the retry after an invalid answer
    decodes the answer under `pinned_arguments` as JSON text (`tool_choice` `none`),
    tools unchanged."""
    pinned_text = '{"inquiry_id": "call_1.go.1", "answer": "false"}'
    provider = ChoiceProvider(
        call("answer_inquiry", "perhaps"),
        lambda request: [TextDelta(text=pinned_text), Finish(reason="end_turn")],
        name="openai-compatible",
    )
    parent = parent_request()

    assert await ask_assistant(provider, parent) is False

    first, retry = provider.requests
    assert first.pinned_arguments is None and first.tool_choice == parent.tool_choice
    assert retry.pinned_arguments == PINNED and retry.tool_choice == ToolChoiceNone()
    assert retry.tools == parent.tools
    body = build_body(retry, compatible=True)
    assert body["response_format"] == {"type": "json_object", "schema": PINNED}
    assert "response_format" not in build_body(first, compatible=True)
