"""Inquiry side requests on another model: settings laid over the turn's, and trimming."""

from __future__ import annotations

from jpd.config import Config
from jpd.config.models import PartialAssistantConfig
from jpd.inquiry.backend import changed_settings
from jpd.inquiry.trim import context_limit, estimate_tokens, fit_history
from jpd.llm.base import (
    AssistantMessage,
    Message,
    ModelRequest,
    ToolCallPart,
    ToolResultMessage,
    UserMessage,
)

CALL = ToolCallPart(id="c1", name="asker", arguments={})


def history(old_text: str) -> list[Message]:
    return [
        UserMessage(content=old_text),
        AssistantMessage(content="noted"),
        UserMessage(content="go"),
        AssistantMessage(tool_calls=(CALL,)),
    ]


TAIL: list[Message] = [
    ToolResultMessage(tool_call_id="c1", content="Tool paused"),
    UserMessage(content="Question: proceed?"),
]
REQUEST = ModelRequest(model="m", messages=(), max_tokens=16)


def test_history_that_fits_is_kept_whole() -> None:
    messages = history("short")
    assert fit_history(messages, TAIL, REQUEST, limit=1000) == messages


def test_oldest_exchanges_are_dropped_until_it_fits() -> None:
    messages = history("x" * 3000)
    kept = fit_history(messages, TAIL, REQUEST, limit=300)
    assert kept == messages[2:]  # starts at a user message; the asking call is kept


def test_running_exchange_is_kept_even_when_too_large() -> None:
    messages = history("x" * 3000)
    assert fit_history(messages, TAIL, REQUEST, limit=10) == messages[2:]


def test_reserve_and_system_count_against_the_limit() -> None:
    messages = history("x" * 300)
    roomy = fit_history(messages, TAIL, REQUEST, limit=400)
    assert roomy == messages
    system = REQUEST.model_copy(update={"system": "s" * 900})
    assert fit_history(messages, TAIL, system, limit=400) == messages[2:]
    assert estimate_tokens("abcd") == 2  # generous: rounds up at 3 characters a token


def test_context_limit_is_known_for_the_embedded_model_only() -> None:
    local = Config.model_validate(
        {"assistant": {"model": {"id": "local/smollm2"}}, "providers": {"local": {"n_ctx": 999}}}
    )
    assert context_limit(local) == 999
    hosted = Config.model_validate({"assistant": {"model": {"id": "anthropic/claude"}}})
    assert context_limit(hosted) is None


def test_only_settings_the_inquiry_changes_are_applied() -> None:
    config = Config.model_validate(
        {
            "assistant": {"system_prompt": "Main.", "model": {"parameters": {"temperature": 0.5}}},
            "conversation": {"inquiry": {"assistant": {"reasoning": {"effort": "low"}}}},
        }
    )
    assert changed_settings(config.assistant, config.assistant) == {}
    inquiry = config.inquiry_assistant(
        PartialAssistantConfig.model_validate({"model": {"parameters": {"max_tokens": 5}}})
    )
    assert changed_settings(config.assistant, inquiry) == {
        "max_tokens": 5,
        "reasoning_effort": "low",
    }
