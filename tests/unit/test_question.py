"""The one question model (`jpd.protocol.question`): answer types, the three shapes, answers."""

from __future__ import annotations

import json
import typing
from typing import Any

import pytest
from pydantic import TypeAdapter, ValidationError

from jpd.config.tools import DetachedPolicy
from jpd.conversation import events as ev
from jpd.inquiry.backend import parse_answer, pinned_arguments, question_prompt
from jpd.inquiry.router import QuestionContext
from jpd.protocol.question import (
    ANSWER_TYPE_NAMES,
    AnswerType,
    InvalidAnswer,
    NumberAnswer,
    Question,
    validate_answer,
)
from jpd.protocol.server_requests import InquiryPromptParams, SourceWire
from jpd.tools.outcome import NeedsInput, parse_outcome

ADAPTER: TypeAdapter[Any] = TypeAdapter(AnswerType)


def question(answer_type: dict[str, Any], **fields: Any) -> Question:
    return Question.model_validate({"id": "q", "text": "?", "answer_type": answer_type, **fields})


def test_every_name_has_exactly_one_class() -> None:
    members = typing.get_args(typing.get_args(AnswerType)[0])
    tags = [member.model_fields["type"].default for member in members]

    assert sorted(tags) == sorted(ANSWER_TYPE_NAMES)
    assert len(set(tags)) == len(tags)


# --- the three shapes ----------------------------------------------------------------

MULTI = {"type": "multi_select", "options": ["a", "b", "c"], "min_items": 1, "max_items": 2}


def test_tool_outcome_disk_and_wire_shapes_of_one_question() -> None:
    raw = {"id": "pick", "text": "Which?", "answer_type": MULTI, "default": ["a"]}
    outcome = parse_outcome(json.dumps({"type": "needs_input", "question": raw}), 0)
    assert isinstance(outcome, NeedsInput)
    q = outcome.question

    stored = ev.dump_event(
        ev.InquiryRequest(id="c.pick.1", source=ev.AssistantSource(), question=q)
    )
    assert json.loads(stored)["question"]["answer_type"] == MULTI
    reread = ev.parse_event(stored)
    assert isinstance(reread, ev.InquiryRequest) and reread.question == q

    wire = InquiryPromptParams(
        inquiry_id="c.pick.1",
        conversation_id="c",
        turn_id="t",
        tool_name="x",
        source=SourceWire(type="assistant"),
        question=q,
    ).to_wire()["question"]
    assert wire == {
        "id": "pick",
        "text": "Which?",
        "answerType": {
            "type": "multi_select",
            "options": ["a", "b", "c"],
            "minItems": 1,
            "maxItems": 2,
        },
        "default": ["a"],
        "exclusive": False,
        "persistence": "turn",
    }


def test_unknown_keys_are_ignored_in_every_shape() -> None:
    q = question({"type": "number", "step": 5}, from_the_future=True)

    assert q.answer_type == NumberAnswer()


@pytest.mark.parametrize(
    ("answer_type", "problem"),
    [
        ({"type": "number", "minimum": 5, "maximum": 1}, "minimum 5 is above maximum 1"),
        ({"type": "multi_select", "options": []}, "at least 1 item"),
        ({"type": "multi_select", "options": ["a", "a"]}, "must not repeat"),
        ({"type": "multi_select", "options": ["a"], "min_items": 2}, "more than the 1 options"),
        ({"type": "multi_select", "options": ["a", "b"], "min_items": 2, "max_items": 1}, "above"),
        ({"type": "multi_select", "options": ["a"], "max_items": 0}, "greater than or equal to 1"),
        ({"type": "multi_select"}, "Field required"),
        ({"type": "date"}, "does not match any of the expected tags"),
    ],
)
def test_invalid_answer_types_are_rejected(answer_type: dict[str, Any], problem: str) -> None:
    with pytest.raises(ValidationError) as caught:
        ADAPTER.validate_python(answer_type)

    assert problem in str(caught.value)


# --- answers -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("answer_type", "value", "expected"),
    [
        ({"type": "number"}, 3, 3),
        ({"type": "number"}, -2.5, -2.5),
        ({"type": "number", "integer": True}, 4.0, 4),
        ({"type": "number", "minimum": 1, "maximum": 3}, 1, 1),
        ({"type": "number", "minimum": 1, "maximum": 3}, 3.0, 3.0),
        (MULTI, ["b"], ["b"]),
        (MULTI, ["c", "a"], ["c", "a"]),
        ({"type": "multi_select", "options": ["a"]}, [], []),
    ],
)
def test_valid_answers(answer_type: dict[str, Any], value: Any, expected: Any) -> None:
    answer = validate_answer(question(answer_type), value)

    assert answer == expected and type(answer) is type(expected)


@pytest.mark.parametrize(
    ("answer_type", "value", "message"),
    [
        ({"type": "number"}, "3", "must be a number, got '3'"),
        ({"type": "number"}, True, "must be a number, got True"),
        ({"type": "number"}, None, "must be a number, got None"),
        ({"type": "number"}, float("nan"), "must be a number"),
        ({"type": "number", "integer": True}, 2.5, "must be an integer, got 2.5"),
        ({"type": "number", "minimum": 1}, 0, "must be at least 1, got 0"),
        ({"type": "number", "maximum": 1.5}, 2, "must be at most 1.5, got 2"),
        (MULTI, "a", "must be a list of options from 'a', 'b', 'c', got 'a'"),
        (MULTI, ["a", "z"], "every item must be one of 'a', 'b', 'c', got 'z'"),
        (MULTI, ["a", 1], "got 1"),
        (MULTI, ["a", "a"], "must not pick an option twice"),
        (MULTI, [], "must pick at least 1, got 0"),
        (MULTI, ["a", "b", "c"], "must pick at most 2, got 3"),
    ],
)
def test_invalid_answers(answer_type: dict[str, Any], value: Any, message: str) -> None:
    with pytest.raises(InvalidAnswer) as caught:
        validate_answer(question(answer_type), value)

    assert "answer to question 'q'" in str(caught.value)
    assert message in str(caught.value)


# --- how the assistant answers (protocol.md section 10.4) ------------------------------


def context(answer_type: dict[str, Any]) -> QuestionContext:
    return QuestionContext(
        conversation_id="c",
        turn_id="t",
        tool_name="x",
        tool_call_id="call_1",
        source=ev.ToolSource(name="x"),
        question=question(answer_type),
        config=None,
        detached=DetachedPolicy("auto", 1.0, "deny"),
        inquiry_id="call_1.q.1",
    )


@pytest.mark.parametrize(
    ("answer_type", "line"),
    [
        ({"type": "number"}, "Answer with a number, written as a JSON number."),
        (
            {"type": "number", "integer": True, "minimum": 1, "maximum": 9},
            "Answer with an integer from 1 to 9, written as a JSON number.",
        ),
        ({"type": "number", "minimum": 0}, "Answer with a number of at least 0, written"),
        (
            MULTI,
            "Answer with a JSON array of distinct choices (at least 1 and at most 2) "
            'from: "a", "b", "c".',
        ),
        ({"type": "boolean"}, "Answer exactly `true` or `false`."),
        ({"type": "select", "options": ["x", "y"]}, 'Answer with exactly one of: "x", "y".'),
    ],
)
def test_the_assistant_is_told_how_to_answer(answer_type: dict[str, Any], line: str) -> None:
    assert line in question_prompt(context(answer_type)).splitlines()[-1]


@pytest.mark.parametrize(
    ("answer_type", "raw", "expected"),
    [
        ({"type": "number", "integer": True}, "7", 7),
        ({"type": "number"}, " 2.5 ", 2.5),
        (MULTI, '["b", "a"]', ["b", "a"]),
        ({"type": "boolean"}, "TRUE", True),
    ],
)
def test_assistant_text_answers_are_read_as_the_type(
    answer_type: dict[str, Any], raw: str, expected: Any
) -> None:
    assert (
        parse_answer(context(answer_type), {"inquiry_id": "call_1.q.1", "answer": raw}) == expected
    )


@pytest.mark.parametrize(
    ("answer_type", "raw", "problem"),
    [
        ({"type": "number"}, "seven", "is not a JSON number"),
        ({"type": "number"}, "true", "is not a JSON number"),
        ({"type": "number", "maximum": 3}, "4", "must be at most 3"),
        (MULTI, "a, b", "is not a JSON array"),
        (MULTI, '{"a": 1}', "is not a JSON array"),
        (MULTI, '["a", "b", "c"]', "must pick at most 2"),
    ],
)
def test_invalid_assistant_answers(answer_type: dict[str, Any], raw: str, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        parse_answer(context(answer_type), {"inquiry_id": "call_1.q.1", "answer": raw})


def test_pinned_schema_lists_values_only_for_enumerable_types() -> None:
    def answer_schema(answer_type: dict[str, Any]) -> dict[str, Any]:
        schema: dict[str, Any] = pinned_arguments(context(answer_type))["properties"]["answer"]
        return schema

    assert answer_schema({"type": "boolean"}) == {"type": "string", "enum": ["true", "false"]}
    assert answer_schema({"type": "select", "options": ["x"]}) == {"type": "string", "enum": ["x"]}
    assert answer_schema({"type": "number"}) == {"type": "string"}
    assert answer_schema(MULTI) == {"type": "string"}
