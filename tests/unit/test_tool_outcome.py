"""Tool outcomes: parsing a tool's output, the older wire shapes, answers (`jpd.tools.outcome`)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from jpd.conversation import events as ev
from jpd.protocol.question import (
    BooleanAnswer,
    InvalidAnswer,
    Question,
    SecretAnswer,
    SelectAnswer,
    TextAnswer,
    validate_answer,
)
from jpd.tools.outcome import Failure, NeedsInput, Success, parse_outcome


def question(**fields: Any) -> Question:
    base: dict[str, Any] = {"id": "q", "text": "Go?", "answer_type": {"type": "boolean"}}
    return Question.model_validate({**base, **fields})


def needs_input(question: dict[str, Any]) -> Question:
    outcome = parse_outcome(json.dumps({"type": "needs_input", "question": question}), 0)
    assert isinstance(outcome, NeedsInput), outcome
    return outcome.question


# --- the three outcomes --------------------------------------------------------------


def test_success() -> None:
    assert parse_outcome('{"type": "success", "content": "done"}', 0) == Success(content="done")


def test_error_with_trace_and_transient() -> None:
    outcome = parse_outcome(
        '{"type": "error", "message": "boom", "trace": ["a", "b"], "transient": true}', 0
    )

    assert outcome == Failure(message="boom", trace=["a", "b"], transient=True)
    assert isinstance(outcome, Failure)
    assert outcome.render() == "boom\na\nb"


def test_error_defaults() -> None:
    outcome = parse_outcome('{"type": "error", "message": "boom"}', 1)

    assert outcome == Failure(message="boom", trace=[], transient=False)
    assert isinstance(outcome, Failure) and outcome.render() == "boom"


def test_needs_input_full_question() -> None:
    q = needs_input(
        {
            "id": "pick",
            "text": "Which one?",
            "context": "There are two.",
            "answer_type": {"type": "select", "options": ["a", "b"]},
            "default": "a",
            "exclusive": True,
            "persistence": "none",
        }
    )

    assert q == Question(
        id="pick",
        text="Which one?",
        context="There are two.",
        answer_type=SelectAnswer(options=["a", "b"]),
        default="a",
        exclusive=True,
        persistence="none",
    )


def test_question_defaults() -> None:
    q = needs_input({"id": "q", "text": "Go?", "answer_type": {"type": "text"}})

    assert (q.context, q.default, q.exclusive, q.persistence) == (None, None, False, "turn")
    assert q.answer_type == TextAnswer()


def test_unknown_fields_are_ignored() -> None:
    outcome = parse_outcome('{"type": "success", "content": "x", "from_the_future": 1}', 0)

    assert outcome == Success(content="x")


def test_json_outcome_wins_over_exit_code() -> None:
    assert parse_outcome('{"type": "success", "content": "ok"}', 3) == Success(content="ok")


# --- older shapes --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("wire", "expected"),
    [
        ("Boolean", BooleanAnswer()),
        ("Text", TextAnswer()),
        ("Secret", SecretAnswer()),
        ({"Select": {"options": ["x", "y"]}}, SelectAnswer(options=["x", "y"])),
        ({"type": "secret"}, SecretAnswer()),
    ],
)
def test_legacy_answer_types(wire: Any, expected: Any) -> None:
    q = needs_input({"id": "q", "text": "?", "answer_type": wire})

    assert q.answer_type == expected


def test_pre_amble_is_the_old_context() -> None:
    assert needs_input(
        {"id": "q", "text": "?", "answer_type": "Boolean", "pre_amble": "Before you answer"}
    ).context == ("Before you answer")


def test_context_wins_over_pre_amble() -> None:
    q = needs_input(
        {"id": "q", "text": "?", "answer_type": "Text", "context": "new", "pre_amble": "old"}
    )

    assert q.context == "new"


# --- plain output and exit status ----------------------------------------------------


def test_plain_stdout_with_exit_zero_is_success() -> None:
    assert parse_outcome("hello\nworld\n", 0) == Success(content="hello\nworld\n")


def test_empty_stdout_with_exit_zero_is_empty_success() -> None:
    assert parse_outcome("", 0) == Success(content="")


@pytest.mark.parametrize("text", ["[1, 2]", "42", '"quoted"', "true"])
def test_json_that_is_not_an_object_is_plain_text(text: str) -> None:
    assert parse_outcome(text, 0) == Success(content=text)


def test_non_zero_exit_names_code_and_output() -> None:
    outcome = parse_outcome("cannot open file.txt\n", 2, name="reader")

    assert isinstance(outcome, Failure)
    assert "tool 'reader' exited with code 2" in outcome.message
    assert "cannot open file.txt" in outcome.message


def test_non_zero_exit_without_output() -> None:
    outcome = parse_outcome("  \n", 1)

    assert isinstance(outcome, Failure)
    assert "exited with code 1 and printed nothing" in outcome.message


def test_output_quoted_in_failure_is_bounded() -> None:
    text = "a" * 50_000 + "THE END"
    outcome = parse_outcome(text, 1)

    assert isinstance(outcome, Failure)
    assert len(outcome.message) < 10_000
    assert "characters omitted" in outcome.message
    assert outcome.message.endswith("THE END")


def test_signal_is_named_even_with_valid_json() -> None:
    outcome = parse_outcome('{"type": "success", "content": "x"}', -11, name="t")

    assert isinstance(outcome, Failure)
    assert "tool 't' was killed by SIGSEGV (11)" in outcome.message


# --- garbage -------------------------------------------------------------------------


def test_malformed_json_is_a_failure() -> None:
    outcome = parse_outcome('{"type": "success", "content": ', 0, name="t")

    assert isinstance(outcome, Failure)
    assert "tool 't' printed invalid JSON" in outcome.message


def test_two_json_objects_are_a_failure() -> None:
    outcome = parse_outcome('{"type": "success", "content": "a"}\n{"type": "success"}', 0)

    assert isinstance(outcome, Failure)
    assert "invalid JSON" in outcome.message


@pytest.mark.parametrize(
    ("data", "explanation"),
    [
        ({"type": "succes", "content": "x"}, "type"),
        ({"content": "x"}, "type"),
        ({"type": "success"}, "success.content"),
        ({"type": "success", "content": 5}, "success.content"),
        ({"type": "error"}, "error.message"),
        ({"type": "needs_input", "question": {"id": "q", "text": "?"}}, "answer_type"),
        (
            {
                "type": "needs_input",
                "question": {"id": "q", "text": "?", "answer_type": {"type": "select"}},
            },
            "options",
        ),
        (
            {
                "type": "needs_input",
                "question": {"id": "q", "text": "?", "answer_type": "Maybe"},
            },
            "answer_type",
        ),
    ],
)
def test_invalid_outcome_is_a_failure_explaining_why(
    data: dict[str, Any], explanation: str
) -> None:
    outcome = parse_outcome(json.dumps(data), 0, name="t")

    assert isinstance(outcome, Failure)
    assert "tool 't' printed JSON that is not a valid outcome" in outcome.message
    assert explanation in outcome.message


# --- the persisted shape (the same model, stored by field name) ------------------------


def persisted(q: Question) -> dict[str, Any]:
    """The question as an `inquiry_request` line stores it, read back."""
    event = ev.InquiryRequest(id="c.q.1", source=ev.ToolSource(name="t"), question=q)
    stored = ev.parse_event(ev.dump_event(event))
    assert isinstance(stored, ev.InquiryRequest)
    assert stored.question == q
    record: dict[str, Any] = json.loads(ev.dump_event(event))["question"]
    return record


def test_question_to_inquiry_select() -> None:
    q = question(
        id="pick",
        context="ctx",
        answer_type={"type": "select", "options": ["a", "b"]},
        default="b",
        exclusive=True,
        persistence="none",
    )

    assert persisted(q) == {
        "id": "pick",
        "text": "Go?",
        "context": "ctx",
        "answer_type": {"type": "select", "options": ["a", "b"]},
        "default": "b",
        "exclusive": True,
        "persistence": "none",
    }


@pytest.mark.parametrize("kind", ["boolean", "text", "secret"])
def test_question_to_inquiry_keeps_answer_type(kind: str) -> None:
    record = persisted(question(answer_type={"type": kind}))

    assert record["answer_type"] == {"type": kind}
    assert record["persistence"] == "turn"


# --- answers -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("answer_type", "value"),
    [
        ({"type": "boolean"}, True),
        ({"type": "boolean"}, False),
        ({"type": "select", "options": ["a", "b"]}, "b"),
        ({"type": "text"}, ""),
        ({"type": "secret"}, "hunter2"),
    ],
)
def test_valid_answers_are_returned(answer_type: dict[str, Any], value: Any) -> None:
    assert validate_answer(question(answer_type=answer_type), value) == value


@pytest.mark.parametrize(
    ("answer_type", "value", "message"),
    [
        ({"type": "boolean"}, "yes", "must be true or false, got 'yes'"),
        ({"type": "boolean"}, 1, "must be true or false, got 1"),
        ({"type": "select", "options": ["a", "b"]}, "c", "must be one of 'a', 'b', got 'c'"),
        ({"type": "select", "options": ["a", "b"]}, "A", "must be one of"),
        ({"type": "select", "options": ["1"]}, 1, "must be one of '1', got 1"),
        ({"type": "text"}, 5, "must be a string, got a number"),
        ({"type": "text"}, None, "must be a string, got null"),
    ],
)
def test_invalid_answers_are_rejected(
    answer_type: dict[str, Any], value: Any, message: str
) -> None:
    with pytest.raises(InvalidAnswer) as caught:
        validate_answer(question(id="q1", answer_type=answer_type), value)

    assert "answer to question 'q1'" in str(caught.value)
    assert message in str(caught.value)
    assert isinstance(caught.value, ValueError)


def test_invalid_secret_answer_is_not_quoted() -> None:
    with pytest.raises(InvalidAnswer) as caught:
        validate_answer(question(answer_type={"type": "secret"}), 9_876_543_210)

    assert "must be a string, got a number" in str(caught.value)
    assert "9876543210" not in str(caught.value)
