"""What resuming an interrupted turn does, read from its log (protocol.md section 12.4).

A turn that recovery closed as `interrupted` can continue under its id. Its log says
what remains: tool calls whose latest response is the interrupted one run again (with
the answers their questions got), calls with a real result do not; a model output cut
while it streamed is continued by asking the model to go on.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from jpd.conversation import events as ev
from jpd.protocol.modes import PermissionMode

CONTINUE_INSTRUCTION = (
    "[The previous response was cut off because the agent process stopped. Continue it "
    "exactly from where it stopped; do not repeat what was already written.]"
)
"""The user-side message recorded before asking the model to continue a cut output."""


class NotResumable(Exception):
    """The turn exists but is not the conversation's last turn or did not end interrupted."""


class TurnNotFound(Exception):
    """The conversation has no turn with that id."""


@dataclass(frozen=True)
class ResumePlan:
    """What `turn/resume` does for one turn."""

    turn_id: str
    model: str | None
    started_at: datetime
    rerun: tuple[ev.ToolCallRequest, ...] = ()
    """Calls whose latest response is the interrupted one, in request order."""
    answers: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    """Call id -> question id -> the answer it got in this turn (not secret ones)."""
    attempts: dict[tuple[str, str], int] = field(default_factory=dict)
    """(call id, question id) -> attempts to count from: a question pending when the
    daemon stopped is asked again under its inquiry id."""
    continue_output: bool = False
    """The last output is an interrupted `chat_response` and no call is re-run."""
    mode: PermissionMode = "ask"
    """The permission mode the turn started with."""
    cut_in_call: bool = False
    """A model call was under way when the turn was cut (its output kept or not)."""
    cut_output: tuple[tuple[Literal["reasoning", "text"], str], ...] = ()
    """What was kept of that call's output (the interrupted `chat_response`s), in order."""
    takeover: bool = False
    """Another daemon of a fleet ran the turn until it stopped (`turn/resume` by a member
    taking it over): its clients saw that call's deltas, which this resume replaces."""


def plan_resume(events: Sequence[ev.Event], turn_id: str) -> ResumePlan:
    """The plan for resuming `turn_id`, the last turn of `events` (unsanitized)."""
    starts = [i for i, e in enumerate(events) if isinstance(e, ev.TurnStart)]
    found = [i for i in starts if events[i].turn_id == turn_id]  # type: ignore[union-attr]
    if not found:
        raise TurnNotFound(turn_id)
    if found[-1] != starts[-1]:
        raise NotResumable(f"turn {turn_id} is not the last turn of its conversation")
    start = events[found[-1]]
    assert isinstance(start, ev.TurnStart)
    turn = events[found[-1] :]
    last = turn[-1]
    if not isinstance(last, ev.TurnEnd) or last.stop_reason != "interrupted":
        raise NotResumable(f"turn {turn_id} did not end interrupted; only such a turn resumes")

    latest: dict[str, ev.ToolCallResponse] = {}
    requests: dict[str, ev.ToolCallRequest] = {}
    for event in turn:
        if isinstance(event, ev.ToolCallRequest):
            requests.setdefault(event.id, event)
        elif isinstance(event, ev.ToolCallResponse):
            latest[event.id] = event
    rerun = tuple(r for i, r in requests.items() if i in latest and latest[i].interrupted)
    answers, attempts = _inquiries(turn, {r.id for r in rerun})
    outputs = [e for e in turn if isinstance(e, ev.ChatResponse | ev.ToolCallResponse)]
    cut = bool(outputs) and isinstance(outputs[-1], ev.ChatResponse) and outputs[-1].interrupted
    cut_in_call, cut_output = _cut_call(turn)
    return ResumePlan(
        turn_id=turn_id,
        model=start.model,
        started_at=start.timestamp,
        rerun=rerun,
        answers=answers,
        attempts=attempts,
        continue_output=bool(cut) and not rerun,
        mode=start.mode,
        cut_in_call=cut_in_call,
        cut_output=cut_output,
    )


def _cut_call(
    turn: Sequence[ev.Event],
) -> tuple[bool, tuple[tuple[Literal["reasoning", "text"], str], ...]]:
    """Whether a model call was under way when the turn was cut (since its latest
    start or resume, no output yet, or the outputs end with the call's interrupted
    `chat_response`s, or with tool responses all given), and what was kept of it."""
    since = max(i for i, e in enumerate(turn) if isinstance(e, ev.TurnStart | ev.TurnResume))
    outputs = [
        e
        for e in turn[since:]
        if isinstance(e, ev.ChatResponse | ev.ToolCallRequest | ev.ToolCallResponse)
    ]
    kept: list[tuple[Literal["reasoning", "text"], str]] = []
    while outputs:
        last = outputs[-1]
        if not isinstance(last, ev.ChatResponse) or not last.interrupted:
            break
        outputs.pop()
        if last.message:
            kept.insert(0, ("text", last.message))
        if last.reasoning:
            kept.insert(0, ("reasoning", last.reasoning))
    if kept:
        return True, tuple(kept)
    if not outputs:
        return True, ()
    last_output = outputs[-1]
    return isinstance(last_output, ev.ToolCallResponse) and not last_output.interrupted, ()


def _inquiries(
    turn: Sequence[ev.Event], calls: set[str]
) -> tuple[dict[str, dict[str, Any]], dict[tuple[str, str], int]]:
    """Answers of the re-run calls' questions, and the attempt counters to seed."""
    asked: dict[str, tuple[str, str, int]] = {}
    for event in turn:
        if isinstance(event, ev.InquiryRequest):
            call, _, rest = event.id.partition(".")
            question, _, number = rest.rpartition(".")
            if call in calls and question and number.isdigit():
                asked[event.id] = (call, question, int(number))
    answers: dict[str, dict[str, Any]] = {}
    attempts: dict[tuple[str, str], int] = {}
    for event in turn:
        if not isinstance(event, ev.InquiryResponse) or event.id not in asked:
            continue
        call, question, attempt = asked[event.id]
        outcome = event.response
        stopped = isinstance(outcome, ev.Cancelled) and outcome.reason == "daemon_stopped"
        # A question the stop left pending is asked again under the same id.
        seen = attempt - 1 if stopped else attempt
        attempts[(call, question)] = max(attempts.get((call, question), 0), seen)
        if isinstance(outcome, ev.Answered):
            answers.setdefault(call, {})[question] = outcome.answer
    return answers, attempts
