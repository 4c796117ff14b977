"""Conformance: forced tool choices and the forced-tool retry (protocol.md 9.2, 10.4).

In process: the LLM inquiry backend and the turn loop over a provider that honours
`tool_choice` like a hosted API (tests/fixtures/choice_provider.py).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import anyio
import pytest

from jpd.conversation import events as ev
from jpd.core.transcript import Transcript
from jpd.core.turn import Turn, TurnSpec
from jpd.inquiry.answer_tool import ANSWER_INQUIRY_TOOL
from jpd.inquiry.router import BackendError
from jpd.llm import anthropic_request
from jpd.llm.anthropic import AnthropicProvider
from jpd.llm.base import (
    AssistantMessage,
    Finish,
    ModelRequest,
    ToolCallPart,
    ToolChoice,
    ToolChoiceAny,
    ToolChoiceAuto,
    ToolChoiceNone,
    ToolChoiceTool,
    ToolDefinition,
    ToolResultMessage,
    UserMessage,
)
from jpd.llm.history import MessageHistory
from jpd.protocol.turn_events import ForcedToolRetried, ReasoningDeltaEvent, TextDeltaEvent
from jpd.tools.base import ToolResultData
from tests.fixtures.choice_provider import (
    ECHO,
    ChoiceProvider,
    Reply,
    ask_assistant,
    call,
    parent_request,
    text,
)
from tests.fixtures.fake_llm_server import FakeLLMServer
from tests.fixtures.llm_support import ANTHROPIC_KEY, FAST_RETRIES, ask, collect, retries
from tests.fixtures.llm_wire import a_text_answer, a_tool_answer, stream_reply
from tests.unit.fakes import FakeLog

ANSWER = ToolChoiceTool(name="answer_inquiry")
ECHO_CHOICE = ToolChoiceTool(name="echo")


async def test_inquiry_keeps_the_parents_choice_on_hosted_providers() -> None:
    """protocol.md 10.4: on a hosted provider the side request's first try keeps the
    parent's `tool_choice` where it lets the model call `answer_inquiry` (`auto`, `any`);
    where it would not (another tool forced, `none`) `answer_inquiry` is forced from the
    first try. The embedded model is forced from the first try."""
    cases = {
        ToolChoiceAuto(): [ToolChoiceAuto()],
        ToolChoiceAny(): [ToolChoiceAny()],
        ToolChoiceTool(name="echo"): [ANSWER],
        ToolChoiceNone(): [ANSWER],
    }
    for choice, sent in cases.items():
        for name in ("anthropic", "openai"):
            provider = ChoiceProvider(name=name)
            assert await ask_assistant(provider, parent_request(choice)) is True
            assert [r.tool_choice for r in provider.requests] == sent
        local = ChoiceProvider(name="local")
        assert await ask_assistant(local, parent_request(choice)) is True
        assert [r.tool_choice for r in local.requests] == [ANSWER]


# --- the turn loop (protocol.md 9.2) ---------------------------------------------------


class Tools:
    """The turn's tools: `echo` (and `answer_inquiry`); every call succeeds."""

    def __init__(self) -> None:
        self.ran: list[str] = []

    def definitions(self) -> tuple[ToolDefinition, ...]:
        return (ECHO, ANSWER_INQUIRY_TOOL)

    async def run(self, calls: list[ToolCallPart], on_result: Callable[..., None]) -> None:
        for c in calls:
            self.ran.append(c.name)
            on_result(ToolResultData(id=c.id, content="echoed", is_error=False))

    def hidden(self, name: str) -> bool:
        return False


class Hub:
    def __init__(self) -> None:
        self.events: list[Any] = []

    def publish(self, conversation_id: str, turn_id: str, event: Any) -> None:
        self.events.append(event)

    def delta_sender(self, conversation_id: str, turn_id: str) -> Callable[[str, str], None]:
        def publish_delta(kind: str, text: str) -> None:
            delta = TextDeltaEvent if kind == "text_delta" else ReasoningDeltaEvent
            self.events.append(delta(text=text))

        return publish_delta


@dataclass
class Ran:
    events: list[ev.Event]
    published: list[Any]
    tools: list[str]
    stop: str

    def of(self, kind: type[Any]) -> list[Any]:
        return [e for e in self.events if isinstance(e, kind)]


async def run_turn(provider: ChoiceProvider, choice: ToolChoice, reasoning: str = "low") -> Ran:
    """One turn `go` whose first call uses `choice`, over `provider`."""
    tools, hub, log_ = Tools(), Hub(), FakeLog()
    spec = TurnSpec(
        conversation_id="c",
        turn_id="t",
        message="go",
        model_id="anthropic/claude",
        provider=provider,
        tools=tools,
        transcript=Transcript(MessageHistory()),
        reasoning_effort=reasoning,  # type: ignore[arg-type]
        first_tool_choice=choice,
    )
    turn = Turn(spec, log_, hub, datetime.now(UTC))  # type: ignore[arg-type]
    with anyio.fail_after(5):
        await turn.run()
    return Ran(log_.events, hub.events, tools.ran, turn.stop_reason)


def soft(words: str = "I would rather talk.") -> Reply:
    """A softened answer that ignores the directive: signed reasoning, then text."""
    return text(words, reasoning="No tool needed.")


async def test_turn_retries_a_missed_soft_forced_tool_once_without_reasoning() -> None:
    """protocol.md 9.2: a forced tool, sent softened while reasoning is on, answered
    without the call: the answer (reasoning and text) stays in the conversation, a
    `forced_tool_retry` event is recorded, and the request is sent once more with the
    real `tool_choice` and reasoning off for that one request only."""
    provider = ChoiceProvider(soft(), name="anthropic", refuses_forced_tool_with_reasoning=True)
    ran = await run_turn(provider, ECHO_CHOICE)
    assert ran.stop == "end_turn" and ran.tools == ["echo"]
    first, retry, after = provider.requests
    assert first.tool_choice == retry.tool_choice == ECHO_CHOICE
    assert first.reasoning_effort == "low" and retry.reasoning_effort == "off"
    assert after.reasoning_effort == "low"  # only that one request
    [kept] = [m for m in retry.messages if isinstance(m, AssistantMessage)]
    assert (kept.content, kept.reasoning) == ("I would rather talk.", "No tool needed.")
    assert retry.messages[-1] == UserMessage(
        content="Your previous answer did not call the `echo` tool. Call it now."
    )
    [recorded] = ran.of(ev.ForcedToolRetry)
    assert recorded.tool == "echo" and recorded.message == retry.messages[-1].content
    said = [e.message for e in ran.of(ev.ChatResponse) if e.message]
    assert said[0] == "I would rather talk."
    # Clients are told, and nothing streamed is voided (no `retry`).
    kinds = [e.kind for e in ran.published]
    assert "retry" not in kinds
    assert ForcedToolRetried(tool="echo", message=recorded.message) in ran.published


async def test_turn_retries_at_most_once() -> None:
    """protocol.md 9.2: there is never a second retry; if the retry skips the tool too,
    its answer stands and the turn ends."""
    provider = ChoiceProvider(
        soft(), text("Still no."), name="anthropic", refuses_forced_tool_with_reasoning=True
    )
    ran = await run_turn(provider, ECHO_CHOICE)
    assert ran.stop == "end_turn" and ran.tools == []
    assert len(provider.requests) == 2 and len(ran.of(ev.ForcedToolRetry)) == 1


async def test_turn_obeyed_soft_force_needs_no_retry() -> None:
    """protocol.md 9.2: a softened request whose answer makes the call is not retried."""
    provider = ChoiceProvider(name="anthropic", refuses_forced_tool_with_reasoning=True)
    ran = await run_turn(provider, ECHO_CHOICE)
    assert ran.tools == ["echo"] and ran.of(ev.ForcedToolRetry) == []
    assert [r.reasoning_effort for r in provider.requests] == ["low", "low"]


async def test_turn_forces_only_its_first_model_call() -> None:
    """protocol.md 9.2: `assistant.tool_choice` applies to the first model call of a
    turn; later calls use `auto`."""
    provider = ChoiceProvider()
    await run_turn(provider, ECHO_CHOICE, reasoning="off")
    assert [r.tool_choice for r in provider.requests] == [ECHO_CHOICE, ToolChoiceAuto()]


async def test_turn_retry_with_tool_choice_any() -> None:
    """protocol.md 9.2: with `tool_choice` `any` a softened answer without any tool call
    is retried once without reasoning, still forcing `any`; the event names no tool."""
    provider = ChoiceProvider(
        soft(), call("echo"), name="anthropic", refuses_forced_tool_with_reasoning=True
    )
    ran = await run_turn(provider, ToolChoiceAny())
    assert ran.tools == ["echo"]
    first, retry, _ = provider.requests
    assert first.tool_choice == retry.tool_choice == ToolChoiceAny()
    assert retry.reasoning_effort == "off"
    [recorded] = ran.of(ev.ForcedToolRetry)
    assert recorded.tool is None
    assert (
        recorded.message
        == "Your previous answer did not call one of the available tools. Call it now."
    )


async def test_turn_does_not_retry_where_forcing_is_not_softened() -> None:
    """protocol.md 9.2: only a provider that declares it refuses forced tools with
    reasoning (and only with reasoning on) gets the retry: elsewhere the API enforced
    the choice, and an answer without the call stands."""
    for refuses, reasoning in ((False, "low"), (True, "off")):
        provider = ChoiceProvider(soft(), refuses_forced_tool_with_reasoning=refuses)
        ran = await run_turn(provider, ECHO_CHOICE, reasoning)
        assert len(provider.requests) == 1 and ran.of(ev.ForcedToolRetry) == []


def test_forced_tool_retry_event_is_read_back_as_the_note_the_model_saw() -> None:
    """protocol.md 12.1: `forced_tool_retry` is persisted; in the conversation sent to
    models it is the user message that preceded the retry."""
    line = (
        '{"timestamp":"2026-11-23T00:00:00Z","type":"forced_tool_retry",'
        '"tool":"echo","message":"Call it."}'
    )
    event = ev.parse_event(line)
    assert isinstance(event, ev.ForcedToolRetry)
    history = MessageHistory([ev.ChatRequest(content="go"), ev.ChatResponse(message="no"), event])
    assert history.messages()[-1] == UserMessage(content="Call it.")
    assert ev.event_to_json(event) == json.loads(line)


# --- the Anthropic provider (protocol.md 9.2) -------------------------------------------


@pytest.fixture
def server() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as fake:
        yield fake


@pytest.fixture
async def anthropic(server: FakeLLMServer) -> AsyncIterator[AnthropicProvider]:
    provider = AnthropicProvider(
        base_url=server.base_url,
        env={"ANTHROPIC_API_KEY": ANTHROPIC_KEY},
        timeout=5.0,
        retry_policy=FAST_RETRIES,
    )
    yield provider
    await provider.aclose()


def forced(reasoning: str = "low") -> ModelRequest:
    return ask(
        "Stage my changes",
        system="You are the stager.",
        tools=(ECHO,),
        tool_choice=ECHO_CHOICE,
        reasoning_effort=reasoning,
    )


async def test_anthropic_softens_a_forced_tool_with_reasoning_and_never_retries_itself(
    anthropic: AnthropicProvider, server: FakeLLMServer
) -> None:
    """protocol.md 9.2: Anthropic declares it refuses forced tools with thinking; such a
    request goes out with `tool_choice: auto` and the directive in the system prompt,
    thinking on, and a miss is the sender's to retry (one request here)."""
    assert anthropic.refuses_forced_tool_with_reasoning
    server.push(stream_reply(*a_text_answer("No tool.")))
    events = await collect(anthropic.stream(forced()))
    assert retries(events) == [] and events[-1] == Finish(reason="end_turn")
    [body] = (json.loads(r.body) for r in server.requests)
    assert body["tool_choice"] == {"type": "auto"} and "thinking" in body
    assert "You MUST call the `echo` tool" in body["system"][0]["text"]


async def test_anthropic_sends_a_forced_tool_without_reasoning_as_is(
    anthropic: AnthropicProvider, server: FakeLLMServer
) -> None:
    """protocol.md 9.2: with reasoning off the real forced `tool_choice` is sent."""
    server.push(stream_reply(*a_tool_answer("toolu_1", "echo", "{}")))
    await collect(anthropic.stream(forced(reasoning="off")))
    body = json.loads(server.requests[0].body)
    assert body["tool_choice"] == {"type": "tool", "name": "echo"}
    assert "IMPORTANT" not in body["system"][0]["text"] and "thinking" not in body


def test_anthropic_continues_a_tool_cycle_begun_by_the_retry_without_thinking() -> None:
    """protocol.md 9.2: a tool cycle begun by an assistant message without a signed
    reasoning block (the retry's) continues with reasoning off on `anthropic`, though
    the conversation holds the first answer's signed reasoning before it."""
    request = ModelRequest(
        model="m",
        messages=(
            UserMessage(content="go"),
            AssistantMessage(content="No.", reasoning="Hm.", reasoning_signature="sig"),
            UserMessage(content="Your previous answer did not call the `echo` tool. Call it now."),
            AssistantMessage(tool_calls=(ToolCallPart(id="c", name="echo", arguments={}),)),
            ToolResultMessage(tool_call_id="c", content="r"),
        ),
        reasoning_effort="medium",
    )
    assert anthropic_request.thinking_budget(request) is None
    assert "thinking" not in anthropic_request.build_body(request)
    signed = request.model_copy(update={"messages": request.messages[:2]})
    assert anthropic_request.thinking_budget(signed) is not None


# --- the inquiry backend (protocol.md 9.2, 10.4) ----------------------------------------


async def test_inquiry_retries_a_missed_soft_forced_answer_inquiry_once() -> None:
    """protocol.md 9.2, 10.4: the parent's `auto` answered in text, so `answer_inquiry` is
    forced; sent softened with reasoning on and missed, it is retried once without
    reasoning after the kept answer and a note."""
    provider = ChoiceProvider(text("hm"), soft("hm"), refuses_forced_tool_with_reasoning=True)
    assert await ask_assistant(provider, parent_request(reasoning="low")) is True
    first, forced_, retry = provider.requests
    assert first.tool_choice == ToolChoiceAuto()
    assert forced_.tool_choice == retry.tool_choice == ANSWER
    assert [r.reasoning_effort for r in provider.requests] == ["low", "low", "off"]
    assert retry.messages[-2] == AssistantMessage(
        content="hm", reasoning="No tool needed.", reasoning_signature="sig"
    )
    assert retry.messages[-1] == UserMessage(
        content="Your previous answer did not call the `answer_inquiry` tool. Call it now. "
        'Use inquiry_id "call_1.go.1".'
    )


async def test_inquiry_soft_force_retry_happens_at_most_once() -> None:
    """protocol.md 9.2: (with 10.4) a retry that misses too ends the inquiry with
    `backend_error`; no further request is sent."""
    provider = ChoiceProvider(
        text("a"), soft(), text("no"), refuses_forced_tool_with_reasoning=True
    )
    with pytest.raises(BackendError, match="did not call answer_inquiry"):
        await ask_assistant(provider, parent_request(reasoning="low"))
    assert len(provider.requests) == 3
