"""The question model: what a tool (or the model, through `ask_user`) asks, and its answer type.

One definition serves three shapes (protocol.md section 10.1):

- the tool outcome (`needs_input`, section 9.4) and the persisted `inquiry_request`
  (section 12.2) use the field names, snake_case (`answer_type`, `min_items`);
- the wire (`inquiry/prompt`, section 10.3) dumps the same models by alias, camelCase
  (`answerType`, `minItems`), through `WireModel.to_wire()`.

Unknown keys are ignored: a tool or a log written by a newer version still reads. The
older tool shapes (`"answer_type": "Boolean"`, `{"Select": {"options": [...]}}`,
`pre_amble` for `context`) are read too.

An answer type is one class here: its fields, how an answer is validated, and how the
assistant is told to write one (section 10.4). Adding one means a class and its name in
`AnswerTypeName`.
"""

import json
import math
from typing import Annotated, Any, Literal, get_args

from pydantic import (
    AliasGenerator,
    BaseModel,
    ConfigDict,
    Field,
    model_validator,
)
from pydantic.alias_generators import to_camel

from jpd.protocol.json_types import with_article

AnswerTypeName = Literal["boolean", "select", "text", "secret", "number", "multi_select"]
"""Every answer type; clients list those they can prompt in `capabilities.prompt`."""
ANSWER_TYPE_NAMES: tuple[AnswerTypeName, ...] = get_args(AnswerTypeName)
Persistence = Literal["turn", "none"]


class InvalidAnswer(ValueError):
    """An answer does not fit the question's answer type."""


class _Model(BaseModel):
    # Field names on disk and in tool outcomes; camelCase aliases when dumped for the wire.
    model_config = ConfigDict(
        extra="ignore",
        frozen=True,
        alias_generator=AliasGenerator(serialization_alias=to_camel),
        defer_build=True,
    )


def _describe(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _quoted(options: list[str]) -> str:
    return ", ".join(repr(option) for option in options)


def _json_list(options: list[str]) -> str:
    return ", ".join(json.dumps(option) for option in options)


# --- answer types ------------------------------------------------------------------


class BooleanAnswer(_Model):
    """A JSON boolean."""

    type: Literal["boolean"] = "boolean"

    def check(self, value: Any, where: str) -> Any:
        """`value` if it is a valid answer, else `InvalidAnswer` (`where` starts the message)."""
        if not isinstance(value, bool):
            raise InvalidAnswer(f"{where} must be true or false, got {_describe(value)}")
        return value

    def instructions(self) -> str:
        """How the assistant writes an answer (the last line of its question)."""
        return "Answer exactly `true` or `false`."

    def choices(self) -> list[str] | None:
        """Every text the assistant may answer, when there are few; else None."""
        return ["true", "false"]

    def from_text(self, raw: str) -> Any:
        """The answer the assistant's text stands for; ValueError if it is none."""
        lowered = raw.strip().lower()
        if lowered not in ("true", "false"):
            raise ValueError(f"{raw!r} is not `true` or `false`")
        return lowered == "true"


class SelectAnswer(_Model):
    """Exactly one of `options`."""

    type: Literal["select"] = "select"
    options: Annotated[list[str], Field(min_length=1)]

    def check(self, value: Any, where: str) -> Any:
        """`value` if it is a valid answer, else `InvalidAnswer`."""
        if not isinstance(value, str) or value not in self.options:
            raise InvalidAnswer(
                f"{where} must be one of {_quoted(self.options)}, got {_describe(value)}"
            )
        return value

    def instructions(self) -> str:
        """How the assistant writes an answer."""
        return f"Answer with exactly one of: {_json_list(self.options)}."

    def choices(self) -> list[str] | None:
        """The options."""
        return list(self.options)

    def from_text(self, raw: str) -> Any:
        """The option named by `raw`, exactly."""
        if raw not in self.options:
            raise ValueError(f"{raw!r} is not one of {', '.join(self.options)}")
        return raw


class _StringAnswer(_Model):
    def check(self, value: Any, where: str) -> Any:
        """`value` if it is a string; the message names only its type (never the value)."""
        if not isinstance(value, str):
            raise InvalidAnswer(f"{where} must be a string, got {with_article(value)}")
        return value

    def instructions(self) -> str:
        """How the assistant writes an answer."""
        return "Answer with free-form text."

    def choices(self) -> list[str] | None:
        """Any text will do."""
        return None

    def from_text(self, raw: str) -> Any:
        """The text itself."""
        return raw


class TextAnswer(_StringAnswer):
    """Free-form text."""

    type: Literal["text"] = "text"


class SecretAnswer(_StringAnswer):
    """Free-form text that is never echoed, persisted, or given to a model (section 10.7)."""

    type: Literal["secret"] = "secret"


class NumberAnswer(_Model):
    """A JSON number, within `minimum`..`maximum` (inclusive) when set; whole with `integer`."""

    type: Literal["number"] = "number"
    minimum: int | float | None = None
    maximum: int | float | None = None
    integer: bool = False

    @model_validator(mode="after")
    def _bounds(self) -> "NumberAnswer":
        if self.minimum is not None and self.maximum is not None and self.minimum > self.maximum:
            raise ValueError(f"minimum {self.minimum} is above maximum {self.maximum}")
        return self

    def check(self, value: Any, where: str) -> Any:
        """`value` if it is a valid answer (an integral float becomes an int), else
        `InvalidAnswer`."""
        wanted = "an integer" if self.integer else "a number"
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise InvalidAnswer(f"{where} must be {wanted}, got {_describe(value)}")
        if isinstance(value, float):
            if not math.isfinite(value):
                raise InvalidAnswer(f"{where} must be {wanted}, got {_describe(value)}")
            if self.integer:
                # JSON does not tell 3 from 3.0; JSON Schema counts both as integers.
                if not value.is_integer():
                    raise InvalidAnswer(f"{where} must be {wanted}, got {_describe(value)}")
                value = int(value)
        if self.minimum is not None and value < self.minimum:
            raise InvalidAnswer(f"{where} must be at least {self.minimum}, got {value}")
        if self.maximum is not None and value > self.maximum:
            raise InvalidAnswer(f"{where} must be at most {self.maximum}, got {value}")
        return value

    def instructions(self) -> str:
        """How the assistant writes an answer: the number in JSON."""
        what = "an integer" if self.integer else "a number"
        if self.minimum is not None and self.maximum is not None:
            what += f" from {self.minimum} to {self.maximum}"
        elif self.minimum is not None:
            what += f" of at least {self.minimum}"
        elif self.maximum is not None:
            what += f" of at most {self.maximum}"
        return f"Answer with {what}, written as a JSON number."

    def choices(self) -> list[str] | None:
        """Too many to list."""
        return None

    def from_text(self, raw: str) -> Any:
        """The JSON number in `raw`."""
        try:
            value = json.loads(raw)
        except ValueError:
            raise ValueError(f"{raw!r} is not a JSON number") from None
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValueError(f"{raw!r} is not a JSON number")
        return value


class MultiSelectAnswer(_Model):
    """Distinct options, between `min_items` and `max_items` of them when set."""

    type: Literal["multi_select"] = "multi_select"
    options: Annotated[list[str], Field(min_length=1)]
    min_items: Annotated[int, Field(ge=0)] | None = None
    max_items: Annotated[int, Field(ge=1)] | None = None

    @model_validator(mode="after")
    def _counts(self) -> "MultiSelectAnswer":
        if len(set(self.options)) != len(self.options):
            raise ValueError("options must not repeat a choice")
        low, high = self.min_items, self.max_items
        if low is not None and high is not None and low > high:
            raise ValueError(f"min_items {low} is above max_items {high}")
        if low is not None and low > len(self.options):
            raise ValueError(f"min_items {low} is more than the {len(self.options)} options")
        return self

    def check(self, value: Any, where: str) -> Any:
        """`value` if it is a valid answer, else `InvalidAnswer`."""
        if not isinstance(value, list):
            raise InvalidAnswer(
                f"{where} must be a list of options from {_quoted(self.options)}, "
                f"got {_describe(value)}"
            )
        for item in value:
            if not isinstance(item, str) or item not in self.options:
                raise InvalidAnswer(
                    f"{where}: every item must be one of {_quoted(self.options)}, "
                    f"got {_describe(item)}"
                )
        if len(set(value)) != len(value):
            raise InvalidAnswer(f"{where} must not pick an option twice, got {_describe(value)}")
        if self.min_items is not None and len(value) < self.min_items:
            raise InvalidAnswer(f"{where} must pick at least {self.min_items}, got {len(value)}")
        if self.max_items is not None and len(value) > self.max_items:
            raise InvalidAnswer(f"{where} must pick at most {self.max_items}, got {len(value)}")
        return value

    def instructions(self) -> str:
        """How the assistant writes an answer: a JSON array of options."""
        counts = []
        if self.min_items is not None:
            counts.append(f"at least {self.min_items}")
        if self.max_items is not None:
            counts.append(f"at most {self.max_items}")
        how_many = f" ({' and '.join(counts)})" if counts else ""
        return (
            f"Answer with a JSON array of distinct choices{how_many} from: "
            f"{_json_list(self.options)}."
        )

    def choices(self) -> list[str] | None:
        """Combinations: too many to list."""
        return None

    def from_text(self, raw: str) -> Any:
        """The JSON array in `raw`."""
        try:
            value = json.loads(raw)
        except ValueError:
            raise ValueError(f"{raw!r} is not a JSON array of choices") from None
        if not isinstance(value, list):
            raise ValueError(f"{raw!r} is not a JSON array of choices")
        return value


AnswerType = Annotated[
    BooleanAnswer | SelectAnswer | TextAnswer | SecretAnswer | NumberAnswer | MultiSelectAnswer,
    Field(discriminator="type"),
]


def _normalize_answer_type(value: Any) -> Any:
    """Rewrite the older serde shapes to `{"type": ..., "options"?: ...}`."""
    # `"Boolean"`, `"Text"`, `"Secret"`: externally tagged unit variants.
    if isinstance(value, str) and value.lower() in ANSWER_TYPE_NAMES:
        return {"type": value.lower()}
    # `{"Select": {"options": [...]}}`: an externally tagged struct variant.
    if isinstance(value, dict) and "type" not in value and len(value) == 1:
        ((key, body),) = value.items()
        if isinstance(key, str) and key.lower() in ANSWER_TYPE_NAMES:
            fields = dict(body) if isinstance(body, dict) else {}
            return {**fields, "type": key.lower()}
    return value


# --- the question ------------------------------------------------------------------


class Question(_Model):
    """A question asked before a tool can finish (protocol.md sections 9.4, 10.1)."""

    id: Annotated[str, Field(min_length=1)]
    text: str
    context: str | None = None
    """Shown before the question; `pre_amble` in older tools."""
    answer_type: AnswerType
    default: Any = None
    exclusive: bool = False
    """Only a human may answer it."""
    persistence: Persistence = "turn"
    """`turn`: an answer may be remembered for the rest of the turn; `none`: never."""

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

    @property
    def secret(self) -> bool:
        """A secret answer reaches the tool only (section 10.7)."""
        return isinstance(self.answer_type, SecretAnswer)


def validate_answer(question: Question, value: Any) -> Any:
    """Return `value` if it answers `question` (normalized: `3.0` for an integer is `3`),
    else raise `InvalidAnswer`. The message never quotes the value of a secret answer."""
    return question.answer_type.check(value, f"answer to question {question.id!r}")
