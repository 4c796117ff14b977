"""Params and results of the `turn/*` methods (protocol.md 5.5-5.10, 5.21, 5.23,
5.24), camelCase on the wire."""

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from jpd.protocol.base import WireModel, WireParams
from jpd.protocol.conversation_requests import Attachment
from jpd.protocol.detached import DetachedMode
from jpd.protocol.environment import ClientEnvironment
from jpd.protocol.labels import Label, Title
from jpd.protocol.modes import PermissionMode
from jpd.protocol.server_requests import PendingInfo
from jpd.protocol.summaries import TurnInfo


class ToolToggle(BaseModel):
    """One `-t`/`-T`: enable or disable `name`, or every tool when `name` is None."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)
    enable: bool
    name: str | None = None


IMAGE_TYPES = {
    "image/png": "png",
    "image/jpeg": "jpg",
    "image/gif": "gif",
    "image/webp": "webp",
    "application/pdf": "pdf",
}
"""Image (and PDF document) types a user message may carry -> their file extension."""


class ImageInput(WireModel):
    """An image, or a PDF document, sent with a user message (protocol.md 5.5)."""

    mime_type: Literal["image/png", "image/jpeg", "image/gif", "image/webp", "application/pdf"]
    data: str = Field(repr=False)
    """The image or PDF, base64 encoded."""


class TurnStartParams(WireParams):
    message: str = Field(min_length=1)
    conversation_id: str | None = None
    create: bool = False
    """With `conversationId`: start a new conversation with that id (it must not exist)."""
    model: str | None = None
    config: dict[str, Any] | None = None
    """Nested config overrides for this turn, validated like a config file."""
    detached: DetachedMode | None = None
    """The detached policy for this turn's questions and permissions (overrides config)."""
    mode: PermissionMode = "ask"
    """The turn's permission mode (protocol.md 5.5.1), recorded with the turn."""
    images: list[ImageInput] = Field(default=[], repr=False)
    """Images sent with the message, for a model that takes images."""
    tools: list[ToolToggle] = []
    """Per-turn tool toggles, applied left to right (`-t`/`-T` of `jp query`)."""
    environment: ClientEnvironment | None = Field(default=None, repr=False)
    """The client's working directory and environment for this turn only."""
    labels: list[Label] = []
    """Labels added to the conversation (protocol.md 5.26)."""
    title: Title | None = None
    """The conversation's title (a title set so is never replaced by a generated one)."""
    expires_in: float | None = Field(default=None, ge=0)
    """Seconds after which the daemon deletes the conversation (`jp query --tmp`)."""
    persist: bool = True
    """False: a new conversation, deleted as soon as this turn ends (`--no-persist`)."""
    response_schema: dict[str, Any] | None = None
    """A JSON schema the turn's final answer must be valid JSON for (`--schema`)."""
    config_files: list[str] = []
    """Named config files or paths (`--cfg`, personas) laid under `config`, in order."""
    attachments: list[Attachment] = []
    """Files, globs (`!` excludes), `http(s)://`, `cmd://`, `jp://ID`, read before the
    turn starts and sent with the message (protocol.md 5.5)."""


class TurnStartResult(WireModel):
    conversation_id: str
    turn_id: str
    config_warnings: list[str] | None = None
    """What the config files hold that jpd reads otherwise or ignores (JP's keys), one
    `source: key: what` each, as `config/show` `warnings`; absent when nothing."""


class TurnCancelParams(WireParams):
    turn_id: str


class TurnCancelResult(WireModel):
    cancelled: bool


class TurnResumeParams(WireParams):
    conversation_id: str
    turn_id: str
    detached: DetachedMode | None = None
    """The detached policy for the questions asked again (overrides config)."""
    environment: ClientEnvironment | None = Field(default=None, repr=False)


class TurnResumeResult(WireModel):
    conversation_id: str
    turn_id: str


class TurnWaitParams(WireParams):
    turn_id: str


class TurnWaitResult(WireModel):
    turn_id: str
    stop_reason: Literal["end_turn", "max_tokens", "cancelled", "error"]


class TurnAttachParams(WireParams):
    conversation_id: str
    from_seq: int | None = Field(default=None, ge=0)


class TurnAttachResult(WireModel):
    conversation_id: str
    last_seq: int
    oldest_seq: int
    """The oldest seq kept for replay: events before it (and from earlier daemon runs)
    are not replayed; read their persisted form with `conversation/get`."""
    running_turns: list[TurnInfo]


class TurnDetachParams(WireParams):
    conversation_id: str


class TurnDetachResult(WireModel):
    detached: bool


class TurnListResult(WireModel):
    turns: list[TurnInfo]
    inquiries: list[PendingInfo] = []


class TurnUndoParams(WireParams):
    conversation_id: str
    turn_id: str | None = None
    """The turn whose file changes to undo (absent: the conversation's last turn)."""


class TurnUndoResult(WireModel):
    turn_id: str
    restored: list[str]
    """Files given back the content they had before the turn (absolute paths)."""
    removed: list[str]
    """Files the turn created, removed again."""


class TurnChangesParams(WireParams):
    conversation_id: str
    turn_id: str | None = None
    """The turn whose file changes to list (absent: the conversation's last turn)."""


class ChangedFile(WireModel):
    path: str
    """Absolute path."""
    before: str | None = None
    """The file's text before the turn (absent: the turn created it)."""
    created: bool = False


class TurnChangesResult(WireModel):
    turn_id: str
    files: list[ChangedFile]
    undone: bool
    """`turn/undo` has put these files back already."""
