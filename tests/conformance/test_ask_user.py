"""Conformance: the `ask_user` built-in (protocol.md 9.5): arguments, the two-call flow,
config and toggles.

Its end-to-end rules, against the real daemon, are in tests/e2e/test_ask_user.py (round trip
with a prompting client, bad arguments reach the model, no remembering, relabelling keeps
the source, static answer, invalid static answer, nobody to ask, detached policy from config,
`defaults` without a default and never the model's own default, assistant target refused,
a deferred question reaching a later client, toggles).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from jpd.config import Config, load_config, parse_assignment
from jpd.config.loader import validate_layer
from jpd.conversation import events as ev
from jpd.protocol.errors import InvalidParams
from jpd.protocol.question import BooleanAnswer, SelectAnswer, TextAnswer
from jpd.protocol.turn_requests import ToolToggle
from jpd.tools.builtin import BuiltinContext, default_registry
from jpd.tools.builtin.ask_user import DESCRIPTION, AskUser, build_question
from jpd.tools.catalog import EffectiveTool, build_catalog
from jpd.tools.outcome import Failure, NeedsInput, Success, ToolOutcome
from jpd.tools.schema import validate_arguments

CTX = BuiltinContext(conversation_id=None, tool_docs={})


async def run(arguments: dict[str, Any], answers: dict[str, Any] | None = None) -> ToolOutcome:
    return await AskUser().run(arguments, answers or {}, CTX)


def catalog(
    settings: dict[str, Any] | None = None, toggles: list[ToolToggle] | None = None
) -> dict[str, EffectiveTool]:
    config = validate_layer({"conversation": {"tools": settings or {}}}, source="test")
    return build_catalog(config, default_registry(), toggles or [])


# --- arguments -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ({}, "`question` is required"),
        ({"question": ""}, "`question` is required"),
        ({"question": "   "}, "`question` is required"),
        ({"question": 42}, "`question` is required"),
        ({"question": "Proceed?\nReally?"}, "single line"),
        ({"question": "Proceed?\n"}, "single line"),
        ({"question": "Proceed?\r\nReally?"}, "single line"),
        ({"question": "Q?", "context": ["a"]}, "`context` must be a string"),
        ({"question": "Q?", "answer_type": "number"}, '`answer_type` must be "boolean"'),
        ({"question": "Q?", "answer_type": "select"}, "`options` is required when answer_type"),
        ({"question": "Q?", "answer_type": "select", "options": []}, "`options` is required"),
        (
            {"question": "Q?", "answer_type": "select", "options": ["a", 1]},
            "only strings",
        ),
        (
            {"question": "Q?", "answer_type": "select", "options": ["a", "a"]},
            "must not repeat",
        ),
        ({"question": "Q?", "options": ["a", "b"]}, 'answer_type is "text"'),
        (
            {"question": "Q?", "answer_type": "boolean", "options": ["yes", "no"]},
            '`options` is only allowed when answer_type is "select"',
        ),
        (
            {"question": "Q?", "answer_type": "boolean", "default": "yes"},
            '`default` must be true or false when answer_type is "boolean", got "yes"',
        ),
        (
            {"question": "Q?", "answer_type": "text", "default": True},
            '`default` must be a string when answer_type is "text", got true',
        ),
        (
            {"question": "Q?", "answer_type": "select", "options": ["a", "b"], "default": True},
            '`default` must be a string when answer_type is "select"',
        ),
        (
            {"question": "Q?", "answer_type": "select", "options": ["a", "b"], "default": "c"},
            '`default` "c" is not one of `options` ["a", "b"]',
        ),
    ],
)
async def test_bad_arguments_fail_with_an_actionable_message(
    arguments: dict[str, Any], expected: str
) -> None:
    """protocol.md 9.5: bad `ask_user` arguments fail with `ask_user: invalid arguments: ...
    Fix them and call again.`"""
    outcome = await run(arguments)
    assert isinstance(outcome, Failure)
    assert outcome.message.startswith("ask_user: invalid arguments: ")
    assert expected in outcome.message
    assert outcome.message.endswith("Fix them and call again.")


async def test_every_problem_is_reported_at_once() -> None:
    """protocol.md 9.5: `ask_user` reports every problem of its arguments at once."""
    outcome = await run({"question": "a\nb", "options": ["x"], "default": 3})
    assert isinstance(outcome, Failure)
    assert "single line" in outcome.message
    assert "`options` is only allowed" in outcome.message
    assert "`default` must be a string" in outcome.message


async def test_unknown_answer_type_does_not_blame_options_or_default() -> None:
    """protocol.md 9.5: `answer_type` is boolean, select or text; an unknown one is blamed alone."""
    outcome = await run({"question": "Q?", "answer_type": "multi", "options": ["a"]})
    assert isinstance(outcome, Failure)
    assert "`answer_type`" in outcome.message and "`options`" not in outcome.message


async def test_null_optional_arguments_count_as_absent() -> None:
    """protocol.md 9.5: `context`, `answer_type`, `options`, `default` are optional (null is
    absent)."""
    outcome = await run(
        {"question": "Q?", "context": None, "answer_type": None, "options": None, "default": None}
    )
    assert isinstance(outcome, NeedsInput)
    assert isinstance(outcome.question.answer_type, TextAnswer)


def test_the_schema_is_the_only_other_gate() -> None:
    """protocol.md 9.5: cross-field rules are not in the schema (so every provider accepts
    it): the tool checks them."""
    schema = catalog()["ask_user"].schema
    assert validate_arguments(schema, {"question": "Q?", "options": ["a"]}) == []
    assert validate_arguments(schema, {"question": "Q?", "default": True}) == []
    assert validate_arguments(schema, {}) == ["missing required argument 'question'"]


# --- the two calls -------------------------------------------------------------------


async def test_first_call_asks_one_human_only_question() -> None:
    """protocol.md 9.5: `ask_user` asks one question `answer`, exclusive, `persistence: "none"`."""
    outcome = await run(
        {
            "question": "Apply with backup, without, or abort?",
            "context": "This modifies production config.\nIn place.",
            "answer_type": "select",
            "options": ["backup", "overwrite", "abort"],
            "default": "backup",
        }
    )
    assert isinstance(outcome, NeedsInput)
    question = outcome.question
    assert question.id == "answer"
    assert question.text == "Apply with backup, without, or abort?"
    assert question.context == "This modifies production config.\nIn place."
    assert question.answer_type == SelectAnswer(options=["backup", "overwrite", "abort"])
    assert question.default == "backup"
    assert question.exclusive is True
    assert question.persistence == "none"


async def test_answer_type_defaults_to_text() -> None:
    """protocol.md 9.5: `answer_type` defaults to `"text"`."""
    outcome = await run({"question": "Where to?"})
    assert isinstance(outcome, NeedsInput)
    assert isinstance(outcome.question.answer_type, TextAnswer)
    assert outcome.question.context is None and outcome.question.default is None


@pytest.mark.parametrize(
    ("arguments", "answer", "body"),
    [
        ({"answer_type": "boolean"}, True, {"answer_type": "boolean", "answer": True}),
        (
            {"answer_type": "select", "options": ["true", "no"]},
            "true",
            {"answer_type": "select", "answer": "true"},
        ),
        ({}, "/tmp/output", {"answer_type": "text", "answer": "/tmp/output"}),
        ({"answer_type": "text"}, "true", {"answer_type": "text", "answer": "true"}),
    ],
)
async def test_second_call_returns_the_typed_answer_as_json(
    arguments: dict[str, Any], answer: Any, body: dict[str, Any]
) -> None:
    """protocol.md 9.5: the result is the answer with its type, as JSON text."""
    outcome = await run({"question": "Q?", **arguments}, {"answer": answer})
    assert isinstance(outcome, Success)
    assert json.loads(outcome.content) == body


async def test_success_body_keeps_non_ascii_readable() -> None:
    """protocol.md 9.5: the JSON result keeps non-ASCII text as it is."""
    outcome = await run({"question": "Q?"}, {"answer": "Zürich"})
    assert isinstance(outcome, Success) and outcome.content == (
        '{"answer_type": "text", "answer": "Zürich"}'
    )


@pytest.mark.parametrize(
    ("arguments", "answer"),
    [
        ({"answer_type": "boolean"}, "yes"),
        ({"answer_type": "select", "options": ["a", "b"]}, "c"),
        ({"answer_type": "text"}, 3),
    ],
)
async def test_mistyped_accumulated_answer_fails_generically(
    arguments: dict[str, Any], answer: Any
) -> None:
    """protocol.md 10.1: every answer is checked against the answer type (the tool checks again)."""
    outcome = await run({"question": "Q?", **arguments}, {"answer": answer})
    assert isinstance(outcome, Failure)
    assert "the accumulated answer does not match the requested answer type" in outcome.message


async def test_arguments_are_checked_again_on_the_second_call() -> None:
    """protocol.md 9.5: `ask_user` checks its arguments on every call."""
    outcome = await run({"question": "a\nb"}, {"answer": "x"})
    assert isinstance(outcome, Failure) and "single line" in outcome.message


def test_build_question_boolean() -> None:
    """protocol.md 9.5: `answer_type: "boolean"` asks a boolean question with its default."""
    question = build_question({"question": "Go?", "answer_type": "boolean", "default": False})
    assert not isinstance(question, Failure)
    assert question.answer_type == BooleanAnswer() and question.default is False


def test_questions_are_attributed_to_the_assistant() -> None:
    """protocol.md 12.2: `ask_user` questions have source `{"type": "assistant"}`, from the tool."""
    assert AskUser().inquiry_source() == ev.AssistantSource()


# --- what the model is told ----------------------------------------------------------


def test_definition_sends_the_long_description_and_schema() -> None:
    """protocol.md 9.5: the model is offered `ask_user` with its description and schema."""
    tool = catalog()["ask_user"]
    assert tool.source == "builtin" and tool.enabled
    assert tool.config.summary is None
    definition = tool.definition
    assert definition.name == "ask_user"
    assert definition.description == DESCRIPTION
    assert "Do not use `ask_user` to collect secrets" in definition.description
    schema = definition.parameters
    assert list(schema["properties"]) == [
        "question",
        "context",
        "answer_type",
        "options",
        "default",
    ]
    assert schema["required"] == ["question"]
    assert schema["additionalProperties"] is False
    props = schema["properties"]
    assert props["question"]["type"] == "string"
    assert props["context"]["type"] == "string"
    assert props["answer_type"]["enum"] == ["boolean", "select", "text"]
    assert props["answer_type"]["default"] == "text"
    assert props["options"] == {**props["options"], "type": "array", "items": {"type": "string"}}
    assert props["default"]["type"] == ["boolean", "string"]


# --- config --------------------------------------------------------------------------


def test_builtin_defaults() -> None:
    """protocol.md 9.5: on by default, `allow_toggle = "if_named"`, unattended, label
    `Assistant`."""
    config = catalog()["ask_user"].config
    assert (config.enabled, config.allow_toggle) == (True, "if_named")
    assert (config.run, config.result) == ("unattended", "unattended")
    assert config.style.hidden is True
    assert config.questions["answer"].prompt_label == "Assistant"
    assert config.questions["answer"].target == "user"
    assert config.questions["answer"].answer is None


def test_user_label_keeps_the_other_builtin_defaults() -> None:
    """protocol.md 9.1: settings merge field by field over the built-in's defaults."""
    config = catalog({"ask_user": {"questions": {"answer": {"prompt_label": "Claude"}}}})[
        "ask_user"
    ].config
    assert config.questions["answer"].prompt_label == "Claude"
    assert (config.enabled, config.allow_toggle) == (True, "if_named")
    assert config.run == "unattended" and config.description == DESCRIPTION
    assert "question" in config.parameters


def test_user_run_keeps_the_builtin_label() -> None:
    """protocol.md 9.1: settings merge field by field (`questions` key by key)."""
    config = catalog({"ask_user": {"run": "ask"}})["ask_user"].config
    assert config.run == "ask"
    assert config.questions["answer"].prompt_label == "Assistant"
    assert config.allow_toggle == "if_named" and config.description == DESCRIPTION


def test_static_answer_merges_beside_the_label() -> None:
    """protocol.md 9.5: `conversation.tools.ask_user.questions.answer` configures its question."""
    config = catalog({"ask_user": {"questions": {"answer": {"answer": "yes"}}}})["ask_user"].config
    assert config.questions["answer"].answer == "yes"
    assert config.questions["answer"].prompt_label == "Assistant"


def test_partial_enable_table_disables_and_keeps_if_named() -> None:
    """protocol.md 9.1: an `enable` table sets only the fields it names."""
    config = catalog({"ask_user": {"enable": {"state": False}}})["ask_user"].config
    assert (config.enabled, config.allow_toggle) == (False, "if_named")


def test_config_layers_from_files(tmp_path: Path) -> None:
    """protocol.md 9.5: config relabels the question; the source stays the tool's."""
    user = tmp_path / "user.toml"
    user.write_text(
        "[conversation.tools.ask_user.questions.answer]\nprompt_label = 'Bot'\n", encoding="utf-8"
    )
    config: Config = load_config(
        env={"JP_CONFIG": str(user)},
        overrides=[("-c", parse_assignment("conversation.tools.ask_user.run=ask"))],
    )
    tool = build_catalog(config, default_registry())["ask_user"]
    assert tool.config.questions["answer"].prompt_label == "Bot"
    assert tool.config.run == "ask"
    assert (tool.enabled, tool.config.allow_toggle) == (True, "if_named")
    # The label is display only: provenance still comes from the tool.
    assert tool.builtin is not None and tool.builtin.inquiry_source() == ev.AssistantSource()


# --- toggles (RFD 081) ---------------------------------------------------------------


def test_bulk_disable_leaves_it_on() -> None:
    """protocol.md 9.5: only a named toggle turns `ask_user` off."""
    tools = catalog(toggles=[ToolToggle(enable=False)])
    assert tools["ask_user"].enabled is True
    assert tools["describe_tools"].enabled is False


def test_named_disable_turns_it_off() -> None:
    """protocol.md 9.5: a named toggle turns `ask_user` off."""
    tools = catalog(toggles=[ToolToggle(enable=False, name="ask_user")])
    assert tools["ask_user"].enabled is False
    assert tools["describe_tools"].enabled is True


def test_bulk_then_named_disable_turns_everything_off() -> None:
    """protocol.md 9.1: toggles apply left to right."""
    tools = catalog(toggles=[ToolToggle(enable=False), ToolToggle(enable=False, name="ask_user")])
    assert not any(tool.enabled for tool in tools.values())


def test_bulk_enable_does_not_revive_a_configured_off() -> None:
    """protocol.md 9.1: a toggle without `name` leaves `if_named` tools as they are."""
    tools = catalog({"ask_user": {"enable": {"state": False}}}, [ToolToggle(enable=True)])
    assert tools["ask_user"].enabled is False
    named = catalog(
        {"ask_user": {"enable": {"state": False}}}, [ToolToggle(enable=True, name="ask_user")]
    )
    assert named["ask_user"].enabled is True


def test_enable_always_forbids_the_named_toggle() -> None:
    """protocol.md 9.1: a named toggle of an `allow_toggle = "never"` tool is refused (-32602)."""
    with pytest.raises(InvalidParams, match="never"):
        catalog({"ask_user": {"enable": "always"}}, [ToolToggle(enable=False, name="ask_user")])
