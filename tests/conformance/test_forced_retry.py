"""Conformance: forced tool choices and the forced-tool retry (protocol.md 9.2, 10.4).

In process: the LLM inquiry backend and the turn loop over a provider that honours
`tool_choice` like a hosted API (tests/fixtures/choice_provider.py).
"""

from __future__ import annotations

from jpd.llm.base import ToolChoiceAny, ToolChoiceAuto, ToolChoiceNone, ToolChoiceTool
from tests.fixtures.choice_provider import (
    ChoiceProvider,
    ask_assistant,
    call,
    parent_request,
    text,
)

ANSWER = ToolChoiceTool(name="answer_inquiry")


async def test_inquiry_keeps_a_parent_choice_that_allows_answer_inquiry() -> None:
    """protocol.md 10.4: the side request keeps the parent's `tool_choice` (`auto`, `any`)
    so the cached prefix holds; the model answers in one request."""
    for choice in (ToolChoiceAuto(), ToolChoiceAny()):
        provider = ChoiceProvider()
        assert await ask_assistant(provider, parent_request(choice)) is True
        assert [r.tool_choice for r in provider.requests] == [choice]


async def test_inquiry_forces_answer_inquiry_when_the_parent_forced_another_tool() -> None:
    """protocol.md 10.4: a parent `tool_choice` forcing another tool (or `none`) is not
    kept: the first side request forces `answer_inquiry`, no request is wasted."""
    for choice in (ToolChoiceTool(name="echo"), ToolChoiceNone()):
        provider = ChoiceProvider()
        assert await ask_assistant(provider, parent_request(choice)) is True
        assert [r.tool_choice for r in provider.requests] == [ANSWER]


async def test_inquiry_without_answer_inquiry_is_forced_once() -> None:
    """protocol.md 10.4: a model that answers without calling `answer_inquiry` is asked
    once more with `tool_choice` forced to it."""
    provider = ChoiceProvider(text("I think yes."))
    assert await ask_assistant(provider, parent_request()) is True
    assert [r.tool_choice for r in provider.requests] == [ToolChoiceAuto(), ANSWER]


async def test_inquiry_under_any_calling_another_tool_is_forced_to_answer_inquiry() -> None:
    """protocol.md 10.4: under a kept `tool_choice` `any` the model may call another
    tool; that call is not an answer, and the next request forces `answer_inquiry`."""
    provider = ChoiceProvider(call("echo"))
    assert await ask_assistant(provider, parent_request(ToolChoiceAny())) is True
    assert [r.tool_choice for r in provider.requests] == [ToolChoiceAny(), ANSWER]
