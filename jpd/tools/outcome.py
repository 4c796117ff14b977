"""What a tool reports back: success, failure, or a question (protocol.md section 9.4).

A local tool prints one JSON outcome on stdout; `parse_outcome` turns that output
and the exit status into a `ToolOutcome`. The question of `needs_input` is the one
question model (`jpd.protocol.question`), which also reads the older tool shapes.

Outcome models ignore unknown keys: a tool written against a newer protocol should
still be understood by this build rather than rejected over a field it adds.
"""

import functools
import json
import signal
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from jpd.protocol.question import Question

EXCERPT_LIMIT = 8_000
"""Characters of tool output quoted in a failure message (head and tail kept)."""


class _Wire(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True, defer_build=True)


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


ToolOutcome = Annotated[Success | Failure | NeedsInput, Field(discriminator="type")]


@functools.cache
def _outcome_adapter() -> TypeAdapter[ToolOutcome]:
    # Built when a tool first reports (protocol.md section 4, "Start-up").
    return TypeAdapter(ToolOutcome)


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


def plain_outcome(text: str, exit_code: int, *, name: str | None = None) -> ToolOutcome:
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


def parse_outcome(stdout: str, exit_code: int, *, name: str | None = None) -> ToolOutcome:
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
        return _outcome_adapter().validate_python(data)
    except ValidationError as error:
        return Failure(
            message=f"{subject} printed JSON that is not a valid outcome ({_explain(error)}); "
            'expected {"type": "success" | "error" | "needs_input", ...}. '
            f"Its output:\n{excerpt(stdout.strip())}"
        )
