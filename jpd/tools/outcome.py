"""What a tool reports back: success, failure, or a question (DESIGN.md "Local tool protocol").

A local tool prints one JSON outcome on stdout; `parse_outcome` turns that output
and the exit status into an `Outcome`. The older wire shapes (`"answer_type":
"Boolean"`, `{"Select": {"options": [...]}}`, `pre_amble`) are read too, so tools
written for earlier versions keep working.

Outcome models ignore unknown keys: a tool written against a newer protocol should
still be understood by this build rather than rejected over a field it adds.
"""

from __future__ import annotations

import json
import signal
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, model_validator

from jpd.conversation.events import AnswerType as InquiryAnswerType
from jpd.conversation.events import InquiryQuestion
from jpd.tools.schema import json_type

EXCERPT_LIMIT = 8_000
"""Characters of tool output quoted in a failure message (head and tail kept)."""


class _Wire(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


# --- answer types ------------------------------------------------------------------


class BooleanAnswer(_Wire):
    type: Literal["boolean"] = "boolean"


class SelectAnswer(_Wire):
    type: Literal["select"] = "select"
    options: Annotated[list[str], Field(min_length=1)]


class TextAnswer(_Wire):
    type: Literal["text"] = "text"


class SecretAnswer(_Wire):
    """Free-form text that is never echoed nor persisted (RFD 082)."""

    type: Literal["secret"] = "secret"


AnswerType = Annotated[
    BooleanAnswer | SelectAnswer | TextAnswer | SecretAnswer, Field(discriminator="type")
]

_LEGACY_ANSWER_TYPES = {"boolean", "select", "text", "secret"}


def _normalize_answer_type(value: Any) -> Any:
    """Rewrite the older serde shapes to `{"type": ..., "options"?: ...}`."""
    # `"Boolean"`, `"Text"`, `"Secret"`: externally tagged unit variants.
    if isinstance(value, str) and value.lower() in _LEGACY_ANSWER_TYPES:
        return {"type": value.lower()}
    # `{"Select": {"options": [...]}}`: an externally tagged struct variant.
    if isinstance(value, dict) and "type" not in value and len(value) == 1:
        ((key, body),) = value.items()
        if isinstance(key, str) and key.lower() in _LEGACY_ANSWER_TYPES:
            fields = dict(body) if isinstance(body, dict) else {}
            return {**fields, "type": key.lower()}
    return value


class Question(_Wire):
    """A question a tool asks before it can finish (RFD 028/082/083)."""

    id: Annotated[str, Field(min_length=1)]
    text: str
    context: str | None = None
    """Shown before the question; `pre_amble` in older tools."""
    answer_type: AnswerType
    default: Any = None
    exclusive: bool = False
    persistence: Literal["turn", "none"] = "turn"

    @model_validator(mode="before")
    @classmethod
    def _legacy_shapes(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        data = dict(data)
        preamble = data.pop("pre_amble", None)
        if data.get("context") is None and preamble is not None:
            data["context"] = preamble
        if "answer_type" in data:
            data["answer_type"] = _normalize_answer_type(data["answer_type"])
        return data


# --- outcomes ----------------------------------------------------------------------


class Success(_Wire):
    type: Literal["success"] = "success"
    content: str


class Failure(_Wire):
    """The tool failed; `message` (and `trace`) is what the model is told."""

    type: Literal["error"] = "error"
    message: str
    trace: list[str] = []
    transient: bool = False
    """The same call may succeed if retried (e.g. a network hiccup)."""

    def render(self) -> str:
        """The message followed by the trace lines, as one text for the model."""
        if not self.trace:
            return self.message
        return "\n".join([self.message, *self.trace])


class NeedsInput(_Wire):
    type: Literal["needs_input"] = "needs_input"
    question: Question


Outcome = Annotated[Success | Failure | NeedsInput, Field(discriminator="type")]

OUTCOME_ADAPTER: TypeAdapter[Outcome] = TypeAdapter(Outcome)


# --- parsing a tool's output -------------------------------------------------------


def _subject(name: str | None) -> str:
    return f"tool {name!r}" if name else "the tool"


def excerpt(text: str, limit: int = EXCERPT_LIMIT) -> str:
    """`text` cut to about `limit` characters, keeping its start and (mostly) its end."""
    if len(text) <= limit:
        return text
    head = limit // 4
    tail = limit - head
    omitted = len(text) - head - tail
    return f"{text[:head]}\n[... {omitted} characters omitted ...]\n{text[-tail:]}"


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def plain_outcome(text: str, exit_code: int, *, name: str | None = None) -> Outcome:
    """The outcome of output that is not read as JSON: judged by the exit status alone.

    Exit 0 is a success with `text` as content; a non-zero exit or a signal
    (negative `exit_code`, as `subprocess` reports it) is a failure quoting the
    output (bounded by `EXCERPT_LIMIT`).
    """
    subject = _subject(name)
    if exit_code == 0:
        return Success(content=text)
    if exit_code < 0:
        what = f"{subject} was killed by {_signal_name(-exit_code)} ({-exit_code})"
    else:
        what = f"{subject} exited with code {exit_code}"
    body = text.strip()
    if not body:
        return Failure(message=f"{what} and printed nothing")
    return Failure(message=f"{what}; its output:\n{excerpt(body)}")


def _explain(error: ValidationError) -> str:
    parts = []
    for item in error.errors(include_url=False):
        location = ".".join(str(part) for part in item["loc"])
        parts.append(f"{location}: {item['msg']}" if location else item["msg"])
    return "; ".join(parts)


def parse_outcome(stdout: str, exit_code: int, *, name: str | None = None) -> Outcome:
    """Read a tool's outcome from what it printed and how it exited.

    Output starting with `{` is taken as the protocol's one JSON outcome, whatever the
    exit code; if it is not valid JSON or not a valid outcome, the result is a failure
    saying what was wrong. Any other output is judged by `plain_outcome`. A tool killed
    by a signal (negative `exit_code`) has failed whatever it printed.
    """
    if exit_code < 0 or not stdout.lstrip().startswith("{"):
        return plain_outcome(stdout, exit_code, name=name)
    subject = _subject(name)
    try:
        data = json.loads(stdout)
    except json.JSONDecodeError as error:
        return Failure(
            message=f"{subject} printed invalid JSON ({error}); expected one JSON outcome "
            f"object. Its output:\n{excerpt(stdout.strip())}"
        )
    try:
        return OUTCOME_ADAPTER.validate_python(data)
    except ValidationError as error:
        return Failure(
            message=f"{subject} printed JSON that is not a valid outcome ({_explain(error)}); "
            'expected {"type": "success" | "error" | "needs_input", ...}. '
            f"Its output:\n{excerpt(stdout.strip())}"
        )


# --- questions and answers ---------------------------------------------------------


def question_to_inquiry(question: Question) -> InquiryQuestion:
    """The persisted form of `question` (for the `inquiry_request` event)."""
    answer_type = question.answer_type
    options = answer_type.options if isinstance(answer_type, SelectAnswer) else None
    return InquiryQuestion(
        id=question.id,
        text=question.text,
        context=question.context,
        answer_type=InquiryAnswerType(type=answer_type.type, options=options),
        default=question.default,
        exclusive=question.exclusive,
        persistence=question.persistence,
    )


class InvalidAnswer(ValueError):
    """An answer does not fit the question's answer type."""


def _describe(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _json_type(value: Any) -> str:
    """The JSON type of `value` with an article, for messages ("a string", "null")."""
    name = json_type(value)
    if name in ("integer", "number"):
        return "a number"
    if name in ("array", "object"):
        return f"an {name}"
    return name if name == "null" else f"a {name}"


def validate_answer(question: Question, value: Any) -> Any:
    """Return `value` if it answers `question`, else raise `InvalidAnswer`.

    Boolean questions take a JSON boolean, select questions one of the options
    (exactly), text and secret questions a string. The message never quotes the
    value of a secret answer.
    """
    answer_type = question.answer_type
    where = f"answer to question {question.id!r}"
    if isinstance(answer_type, BooleanAnswer):
        if not isinstance(value, bool):
            raise InvalidAnswer(f"{where} must be true or false, got {_describe(value)}")
    elif isinstance(answer_type, SelectAnswer):
        if not isinstance(value, str) or value not in answer_type.options:
            choices = ", ".join(repr(option) for option in answer_type.options)
            raise InvalidAnswer(f"{where} must be one of {choices}, got {_describe(value)}")
    elif not isinstance(value, str):
        # Text and secret; only the type is named, so a secret never leaks into logs.
        raise InvalidAnswer(f"{where} must be a string, got {_json_type(value)}")
    return value
