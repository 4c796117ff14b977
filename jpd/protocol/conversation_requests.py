"""Params and results of the `conversation/*` methods (protocol.md 5.11-5.13,
5.25-5.28): listing, reading, deleting, compacting, attributes, forks and search
(camelCase on the wire)."""

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import Field

from jpd.protocol.base import WireModel, WireParams
from jpd.protocol.environment import ClientEnvironment
from jpd.protocol.labels import Label, Title
from jpd.protocol.summaries import ConversationSummary

Attachment = Annotated[str, Field(min_length=1, max_length=4096)]
"""An attachment spec (protocol.md 5.5 `attachments`)."""


ConversationSort = Literal["updated", "created", "title", "events"]


class ConversationListParams(WireParams):
    """Which conversations `conversation/list` returns, in what order (protocol.md 5.11)."""

    archived: Literal["exclude", "include", "only"] = "exclude"
    labels: list[Label] = Field(default_factory=list)
    """Only conversations carrying every one of these labels."""
    sort: ConversationSort = "updated"
    descending: bool | None = None
    """Default: newest first for times and counts, A to Z for titles. Pinned first."""
    limit: int | None = Field(default=None, gt=0)


class ConversationUpdateParams(WireParams):
    """`conversation/update` (protocol.md 5.26): each field set changes that attribute."""

    conversation_id: str
    title: Title | None = None
    add_labels: list[Label] = Field(default_factory=list)
    remove_labels: list[Label] = Field(default_factory=list)
    archived: bool | None = None
    pinned: bool | None = None
    expires_in: float | None = Field(default=None, ge=0)
    """Seconds from now after which the daemon deletes the conversation (`--tmp`)."""
    add_attachments: list[Attachment] = Field(default_factory=list)
    """Attachment specs every later turn sends (read afresh each turn)."""
    remove_attachments: list[Attachment] = Field(default_factory=list)
    environment: ClientEnvironment | None = Field(default=None, repr=False)
    """The client's environment: `addAttachments` are read with it once, to check them."""


class ConversationUpdateResult(WireModel):
    conversation: ConversationSummary


class ConversationForkParams(WireParams):
    """`conversation/fork` (protocol.md 5.27): a new conversation with a copy of turns."""

    conversation_id: str
    first: int | None = Field(default=None, ge=0)
    """Keep the first N turns (with `last`: both ends, the middle dropped)."""
    last: int | None = Field(default=None, ge=0)
    """Keep the last N turns."""
    from_time: datetime | None = Field(default=None, alias="from")
    """Keep turns started at or after this moment."""
    until: datetime | None = None
    """Keep turns started before this moment."""
    title: Title | None = None
    labels: list[Label] = Field(default_factory=list)
    """Added to the labels the fork inherits."""


class ConversationForkResult(WireModel):
    conversation_id: str
    turns: int
    """How many turns were copied."""


class ConversationGrepParams(WireParams):
    """`conversation/grep` (protocol.md 5.28): a regular expression over messages."""

    pattern: str = Field(min_length=1, max_length=1000)
    ignore_case: bool = False
    context: int = Field(default=0, ge=0, le=20)
    """Lines before and after each matching line."""
    conversation_id: str | None = None
    """Only this conversation."""
    labels: list[str] = Field(default_factory=list)
    archived: bool = False
    """Search archived conversations too."""
    limit: int = Field(default=500, gt=0, le=10000)


class GrepMatch(WireModel):
    conversation_id: str
    event: int
    """Position of the event in the conversation (as `conversation/get` lists them)."""
    role: Literal["user", "assistant", "tool", "summary"]
    line_number: int
    """1-based line within the message."""
    line: str
    before: list[str] = Field(default_factory=list)
    after: list[str] = Field(default_factory=list)


class ConversationGrepResult(WireModel):
    matches: list[GrepMatch]
    truncated: bool = False
    """More lines matched than `limit`."""


class ConversationIdParams(WireParams):
    conversation_id: str


class ConversationCompactParams(WireParams):
    conversation_id: str
    instructions: str | None = None
    """What the summary should focus on or keep."""


class ConversationCompactResult(WireModel):
    compacted: bool
    """False when there was nothing older than the recent tail to fold."""
    method: str | None = None
    """`summary`, or `trim` when the model wrote no usable summary."""
    tokens_before: int | None = None
    tokens_after: int | None = None
    summary: str | None = None


class ConversationListResult(WireModel):
    conversations: list[ConversationSummary]


class ConversationGetResult(WireModel):
    conversation_id: str
    events: list[dict[str, Any]]
    """Persisted events exactly as on disk (snake_case, `type`-tagged)."""


class ConversationDeleteResult(WireModel):
    deleted: bool
