"""Wire payloads of the inquiry and permission methods (camelCase on the wire)."""

from datetime import datetime
from typing import Any, Literal

from pydantic import Field, StrictBool

from jpd.protocol.base import WireModel, WireParams
from jpd.protocol.detached import PermissionKind
from jpd.protocol.question import Question


class SourceWire(WireModel):
    type: Literal["tool", "assistant"]
    name: str | None = None


class InquiryPromptParams(WireModel):
    """Server-to-client `inquiry/prompt`: ask a human this question."""

    inquiry_id: str
    conversation_id: str
    turn_id: str
    tool_name: str
    source: SourceWire
    prompt_label: str | None = None
    question: Question
    """Dumped by alias (`answerType`); `exclusive` with the config override applied, no
    `default` for a secret question."""
    previous_error: str | None = None
    """Set when this client's previous answer was invalid; the question stays open."""


class InquiryPromptResult(WireParams):
    """A client's answer to `inquiry/prompt`."""

    answer: Any
    # Strict: `"yes"` or `1` is a wrong-shaped result sent back, not `true` (protocol.md 10.3).
    remember: StrictBool = False


class PermissionParams(WireModel):
    """Server-to-client `tool/permission`."""

    inquiry_id: str
    """The id `inquiry/list`, `inquiry/answer` and `inquiry/resolved` use for this request."""
    conversation_id: str
    turn_id: str
    tool_call_id: str
    tool_name: str
    arguments: dict[str, Any]
    kind: PermissionKind
    content: str | None = None
    """For `deliver`: the result that would go to the model; for a protected path
    (protocol.md 9.8): why it is asked."""
    remember_scope: str = ""
    """What a remembered answer (`remember: true`) covers, named for the user: the tool
    (`deploy`), a command prefix (`run_command: npm test`), one protected path
    (`protected path .git/config`); empty: an answer to it is never remembered, so a
    client must not answer it from an earlier "always" either (protocol.md 10.5)."""


class PermissionResult(WireParams):
    # Strict: only a JSON boolean allows a tool to run (protocol.md 10.3).
    allow: StrictBool
    remember: StrictBool = False
    reason: str | None = None
    """With `allow: false`: why, in the person's words (the model is told)."""


class PendingInfo(WireModel):
    """One question (or permission request) waiting for an answer."""

    inquiry_id: str
    kind: Literal["inquiry", "permission"]
    conversation_id: str
    turn_id: str
    tool_name: str
    deferred: bool
    """True when nobody is being asked and the question waits for a client."""
    asked_at: datetime
    prompt: InquiryPromptParams | None = None
    permission: PermissionParams | None = None


class InquiryResolvedParams(WireModel):
    """Notification `inquiry/resolved`: dismiss this question wherever it is shown."""

    inquiry_id: str
    conversation_id: str
    outcome: Literal["answered", "cancelled", "timed_out"]
    answered_by: str | None = None


class InquiryAnswerParams(WireParams):
    inquiry_id: str
    conversation_id: str | None = None
    """Needed only when the inquiry id is pending in several conversations."""
    turn_id: str | None = None
    answer: Any = None
    """The answer (for a permission request: `true` to allow, `false` to deny)."""
    remember: StrictBool = False


class InquiryAnswerResult(WireModel):
    accepted: bool


class InquiryListResult(WireModel):
    inquiries: list[PendingInfo] = Field(default_factory=list)
