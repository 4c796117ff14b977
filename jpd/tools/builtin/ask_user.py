"""`ask_user`: the assistant asks the human a typed question mid-turn (protocol.md 9.5).

The first call checks the arguments and returns one question (id `answer`) that
only a human may answer (`exclusive`) and that is never remembered for the turn
(`persistence = "none"`); the router decides who is asked and records the exchange
with source `assistant`. The second call, with the answer, returns it as
`{"answer_type": ..., "answer": ...}` so the model sees its type as well as its value.
"""

from __future__ import annotations

import json
from typing import Any, Literal, cast, get_args

from jpd.config.tools import ToolConfig
from jpd.conversation import events as ev
from jpd.protocol.question import (
    BooleanAnswer,
    InvalidAnswer,
    Question,
    SelectAnswer,
    TextAnswer,
    validate_answer,
)
from jpd.tools.builtin import BuiltinContext
from jpd.tools.outcome import Failure, NeedsInput, Success, ToolOutcome

NAME = "ask_user"
QUESTION_ID = "answer"
"""The one question's id: the key of `conversation.tools.ask_user.questions.<id>`."""
PROMPT_LABEL = "Assistant"
AskedType = Literal["boolean", "select", "text"]
"""The answer types the model may ask for (never `secret`: its answers reach the model)."""
ANSWER_TYPES: tuple[AskedType, ...] = get_args(AskedType)

DESCRIPTION = (
    "Ask the user a typed question (boolean, select, or text) and receive their answer. "
    "Use only when the conversation does not provide the information you need and the user "
    "can reasonably be expected to answer. When in doubt, answer the user's original question "
    "directly; do not call `ask_user` for clarification you can derive from context or for "
    "confirmation of obvious next steps. Do not use `ask_user` to collect secrets (passwords, "
    "API keys, SSH passphrases): answers are returned to the model and persisted in the "
    "conversation stream."
)
"""Sent to the model as the tool's description (there is deliberately no summary, so
this usage guard is what the model reads in every request)."""

PARAMETERS: dict[str, dict[str, Any]] = {
    "question": {
        "type": "string",
        "required": True,
        "description": "The question to ask, on a single line. Put any background in `context`.",
    },
    "context": {
        "type": "string",
        "description": "Optional background shown to the user above the question; "
        "may span several lines.",
    },
    "answer_type": {
        "type": "string",
        "enum": list(ANSWER_TYPES),
        "default": "text",
        "description": "`boolean` for yes/no, `select` to pick one of `options`, `text` for "
        "a free-form answer. Defaults to `text`.",
    },
    "options": {
        "type": "array",
        "items": {"type": "string"},
        "description": 'The choices; required when answer_type is "select", not allowed otherwise.',
    },
    "default": {
        "type": ["boolean", "string"],
        "description": "Optional pre-filled answer: true or false for `boolean`, one of "
        "`options` for `select`, a string for `text`.",
    },
}


def _default_problem(answer_type: AskedType, default: Any, options: list[str]) -> str | None:
    """Why `default` does not fit the answer type, or None when it does."""
    if answer_type == "boolean":
        if not isinstance(default, bool):
            return (
                f'`default` must be true or false when answer_type is "boolean", '
                f"got {json.dumps(default)}"
            )
        return None
    if not isinstance(default, str):
        return (
            f'`default` must be a string when answer_type is "{answer_type}", '
            f"got {json.dumps(default)}"
        )
    if answer_type == "select" and options and default not in options:
        return f"`default` {json.dumps(default)} is not one of `options` {json.dumps(options)}"
    return None


def build_question(arguments: dict[str, Any]) -> Question | Failure:
    """The question the arguments describe, or a failure listing every problem.

    Absent and `null` optional arguments are treated alike.
    """
    problems: list[str] = []

    text = arguments.get("question")
    if not isinstance(text, str) or not text.strip():
        problems.append("`question` is required and must be a non-empty string")
    elif text.splitlines() != [text]:
        problems.append("`question` must be a single line; put multi-line background in `context`")

    context = arguments.get("context")
    if context is not None and not isinstance(context, str):
        problems.append("`context` must be a string")

    raw_type = arguments.get("answer_type")
    answer_type: AskedType = "text"
    # With an unknown answer_type, `options` and `default` cannot be judged: say only that.
    type_known = raw_type is None or raw_type in ANSWER_TYPES
    if raw_type is not None:
        if type_known:
            answer_type = cast(AskedType, raw_type)
        else:
            problems.append(
                f'`answer_type` must be "boolean", "select" or "text", got {json.dumps(raw_type)}'
            )

    options = arguments.get("options")
    valid_options: list[str] = []
    if answer_type == "select":
        if not isinstance(options, list) or not options:
            problems.append(
                '`options` is required when answer_type is "select": '
                "give a non-empty list of strings"
            )
        elif not all(isinstance(option, str) for option in options):
            problems.append("`options` must contain only strings")
        elif len(set(options)) != len(options):
            problems.append("`options` must not repeat a choice")
        else:
            valid_options = options
    elif options is not None and type_known:
        problems.append(
            f'`options` is only allowed when answer_type is "select" (answer_type is '
            f'"{answer_type}"); remove `options` or set answer_type to "select"'
        )

    default = arguments.get("default")
    if default is not None and type_known:
        problem = _default_problem(answer_type, default, valid_options)
        if problem is not None:
            problems.append(problem)

    if problems:
        return Failure(
            message=f"{NAME}: invalid arguments: {'; '.join(problems)}. Fix them and call again."
        )
    assert isinstance(text, str)
    kind: BooleanAnswer | SelectAnswer | TextAnswer
    if answer_type == "boolean":
        kind = BooleanAnswer()
    elif answer_type == "select":
        kind = SelectAnswer(options=valid_options)
    else:
        kind = TextAnswer()
    return Question(
        id=QUESTION_ID,
        text=text,
        context=context,
        answer_type=kind,
        default=default,
        exclusive=True,
        persistence="none",
    )


class AskUser:
    """The built-in that lets the model ask the human and carry on with the answer."""

    name = NAME

    def default_config(self) -> ToolConfig:
        """On by default but off by name only (`if_named`, protocol.md 9.1); no permission prompts:
        the question itself is the interaction."""
        return ToolConfig.model_validate(
            {
                "source": "builtin",
                "description": DESCRIPTION,
                "parameters": PARAMETERS,
                "enable": {"state": True, "allow_toggle": "if_named"},
                "run": "unattended",
                "result": "unattended",
                "style": {"hidden": True},
                "questions": {QUESTION_ID: {"prompt_label": PROMPT_LABEL}},
            }
        )

    def inquiry_source(self) -> ev.ToolSource | ev.AssistantSource:
        """The assistant is asking, whatever the config says about labels."""
        return ev.AssistantSource()

    async def run(
        self, arguments: dict[str, Any], answers: dict[str, Any], ctx: BuiltinContext
    ) -> ToolOutcome:
        """First call: the question; second call: the typed answer as JSON."""
        question = build_question(arguments)
        if isinstance(question, Failure):
            return question
        if QUESTION_ID not in answers:
            return NeedsInput(question=question)
        try:
            # Defensive: every routing path validates already, with better wording.
            answer = validate_answer(question, answers[QUESTION_ID])
        except InvalidAnswer as exc:
            return Failure(
                message=f"{NAME}: the accumulated answer does not match the requested answer "
                f"type ({exc})."
            )
        body = {"answer_type": question.answer_type.type, "answer": answer}
        return Success(content=json.dumps(body, ensure_ascii=False))
