"""A question asked during a turn and its outcome (protocol.md 12.2). The question is
the one question model (`jpd.protocol.question`), stored by field name (snake_case).
Unknown cancellation reasons and outcomes (`UnknownOutcome`) are kept verbatim so newer
logs still load."""

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, model_validator

from jpd.conversation.events.base import EventBase
from jpd.protocol.question import Question


class ToolSource(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True, defer_build=True)
    type: Literal["tool"] = "tool"
    name: str


class AssistantSource(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True, defer_build=True)
    type: Literal["assistant"] = "assistant"


InquirySource = Annotated[ToolSource | AssistantSource, Field(discriminator="type")]


class InquiryRequest(EventBase):
    type: Literal["inquiry_request"] = "inquiry_request"
    id: str
    source: InquirySource
    question: Question


CancellationReason = Literal[
    "user",
    "backend_error",
    "no_prompt_backend",
    "assistant_routing_denied",
    "invalid_static_answer",
    "daemon_stopped",
]
"""The reasons this build writes (protocol.md section 12.2); any string is read back."""


class _InquiryOutcome(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True, defer_build=True)
    id: str


class Answered(_InquiryOutcome):
    outcome: Literal["answered"] = "answered"
    answer: Any


class Cancelled(_InquiryOutcome):
    outcome: Literal["cancelled"] = "cancelled"
    # Any string: reasons this build does not know are preserved verbatim (protocol.md 12.2).
    # A record without a reason predates reasons and was a user cancellation.
    reason: str = "user"


class Redacted(_InquiryOutcome):
    outcome: Literal["redacted"] = "redacted"


class UnknownOutcome(_InquiryOutcome):
    """An outcome this version does not know (a newer daemon wrote it), read as it is:
    all its fields are kept, it is shown as unknown, and it still closes its request, so
    nothing is invented for it (protocol.md 12.2). This version never writes one."""

    model_config = ConfigDict(extra="allow", frozen=True, defer_build=True)
    outcome: str


KNOWN_OUTCOMES = frozenset({"answered", "cancelled", "redacted"})


def _outcome_tag(value: Any) -> str:
    outcome = value.get("outcome") if isinstance(value, dict) else getattr(value, "outcome", None)
    return outcome if outcome in KNOWN_OUTCOMES else "unknown"


InquiryOutcome = Annotated[
    Annotated[Answered, Tag("answered")]
    | Annotated[Cancelled, Tag("cancelled")]
    | Annotated[Redacted, Tag("redacted")]
    | Annotated[UnknownOutcome, Tag("unknown")],
    Discriminator(_outcome_tag),
]


class InquiryResponse(EventBase):
    type: Literal["inquiry_response"] = "inquiry_response"
    response: InquiryOutcome

    @model_validator(mode="before")
    @classmethod
    def _nest(cls, data: Any) -> Any:
        # On disk the outcome is flat: {type, timestamp, id, outcome, answer|reason}.
        # Legacy records `{id, answer}` have no outcome and read as answered.
        if isinstance(data, dict) and "response" not in data:
            data = dict(data)
            if data.get("outcome", "answered") in KNOWN_OUTCOMES:
                keys: Any = ("id", "outcome", "answer", "reason")
            else:  # an unknown outcome keeps every field it came with
                keys = [k for k in data if k not in ("type", "timestamp")]
            flat = {k: data.pop(k) for k in keys if k in data}
            flat.setdefault("outcome", "answered")
            data["response"] = flat
        return data

    @property
    def id(self) -> str:
        return self.response.id

    def to_record(self) -> dict[str, Any]:
        """The flat on-disk shape."""
        out: dict[str, Any] = self.model_dump(mode="json", include={"type", "timestamp"})
        out.update(self.response.model_dump(mode="json"))
        return out
