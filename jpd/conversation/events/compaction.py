"""Compaction: what the model is sent from now on leaves out part of the log
(protocol.md 12.5)."""

from typing import Literal

from pydantic import BaseModel, ConfigDict

from jpd.conversation.events.base import EventBase

CompactionTrigger = Literal["auto", "manual", "overflow"]
CompactionMethod = Literal["stub", "summary", "trim"]


class LearnedWindow(BaseModel):
    """A model's real context window, as its provider stated it in a refusal."""

    model_config = ConfigDict(extra="ignore", frozen=True, defer_build=True)

    model: str
    """The turn's `<provider>/<model>`."""
    tokens: int


class ContextCompacted(EventBase):
    """What the model is sent from now on leaves out part of the log (protocol.md 12.5).

    The log keeps every event; the model's view is rebuilt from it plus the latest
    compaction of each method (`jpd.llm.history`). Positions count the conversation's
    events as `conversation/get` returns them, from 0.
    """

    type: Literal["context_compacted"] = "context_compacted"
    trigger: CompactionTrigger | str
    method: CompactionMethod | str
    """`stub`: tool outputs before `end_event` are sent as one-line stubs; `summary`:
    the events before `end_event` are sent as `summary`; `trim`: as `summary`, but the
    summary is a fixed note (the model could not write one)."""
    first_event: int
    end_event: int
    """The events covered: positions `first_event` up to, not including, `end_event`."""
    summary: str | None = None
    tokens_before: int
    tokens_after: int
    model: str | None = None
    """The model that wrote the summary."""
    instructions: str | None = None
    """What the user asked the summary to focus on (`conversation/compact`)."""
    window: LearnedWindow | None = None
    """The window a provider stated when it refused a request of this conversation (an
    `overflow` compaction), smaller than the configured one: later turns on that model
    plan against it."""
