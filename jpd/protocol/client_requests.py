"""Params and results of every JSON-RPC method (camelCase on the wire).

Params reject unknown fields; results are dumped with `to_wire()`.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from jpd.protocol.base import WireModel, WireParams
from jpd.protocol.conversation_requests import Attachment
from jpd.protocol.conversation_requests import (
    ConversationForkParams as ConversationForkParams,
)
from jpd.protocol.conversation_requests import (
    ConversationForkResult as ConversationForkResult,
)
from jpd.protocol.conversation_requests import (
    ConversationGrepParams as ConversationGrepParams,
)
from jpd.protocol.conversation_requests import (
    ConversationGrepResult as ConversationGrepResult,
)
from jpd.protocol.conversation_requests import (
    ConversationListParams as ConversationListParams,
)
from jpd.protocol.conversation_requests import (
    ConversationUpdateParams as ConversationUpdateParams,
)
from jpd.protocol.conversation_requests import (
    ConversationUpdateResult as ConversationUpdateResult,
)
from jpd.protocol.conversation_requests import GrepMatch as GrepMatch
from jpd.protocol.detached import DetachedMode
from jpd.protocol.environment import ClientEnvironment as ClientEnvironment
from jpd.protocol.labels import Label, Title
from jpd.protocol.modes import PermissionMode
from jpd.protocol.question import AnswerTypeName
from jpd.protocol.server_requests import PendingInfo
from jpd.protocol.summaries import ConversationSummary, TurnInfo

PROTOCOL_VERSION = 1


# --- lifecycle -----------------------------------------------------------------------


class ToolToggle(BaseModel):
    """One `-t`/`-T`: enable or disable `name`, or every tool when `name` is None."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)
    enable: bool
    name: str | None = None


class ClientInfo(WireParams):
    name: str
    version: str | None = None


class PromptCapability(WireParams):
    answer_types: list[AnswerTypeName] = Field(default_factory=list)


class ClientCapabilitiesParams(WireParams):
    prompt: PromptCapability | None = None
    permission: bool = False


class InitializeParams(WireParams):
    protocol_version: Literal[1]
    client_info: ClientInfo
    capabilities: ClientCapabilitiesParams = Field(default_factory=ClientCapabilitiesParams)
    workspace_root: str | None = None
    """Absolute path of the client's workspace (for `.jp/config.toml`); optional."""
    data_dir: str | None = None
    """The data dir the client expects (absolute); refused when it is not the daemon's."""


class ServerInfo(WireModel):
    name: str = "jpd"
    version: str


class ServerCapabilities(WireModel):
    methods: list[str]
    providers: list[str]


class InitializeResult(WireModel):
    protocol_version: int = PROTOCOL_VERSION
    server_info: ServerInfo
    capabilities: ServerCapabilities


class NoParams(WireParams):
    """Methods without params accept `null`, absent, or `{}`."""


# --- turns ---------------------------------------------------------------------------


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
    images: list[ImageInput] = Field(default_factory=list, repr=False)
    """Images sent with the message, for a model that takes images."""
    tools: list[ToolToggle] = Field(default_factory=list)
    """Per-turn tool toggles, applied left to right (`-t`/`-T` of `jp query`)."""
    environment: ClientEnvironment | None = Field(default=None, repr=False)
    """The client's working directory and environment for this turn only."""
    labels: list[Label] = Field(default_factory=list)
    """Labels added to the conversation (protocol.md 5.26)."""
    title: Title | None = None
    """The conversation's title (a title set so is never replaced by a generated one)."""
    expires_in: float | None = Field(default=None, ge=0)
    """Seconds after which the daemon deletes the conversation (`jp query --tmp`)."""
    persist: bool = True
    """False: a new conversation, deleted as soon as this turn ends (`--no-persist`)."""
    response_schema: dict[str, Any] | None = None
    """A JSON schema the turn's final answer must be valid JSON for (`--schema`)."""
    config_files: list[str] = Field(default_factory=list)
    """Named config files or paths (`--cfg`, personas) laid under `config`, in order."""
    attachments: list[Attachment] = Field(default_factory=list)
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
    inquiries: list[PendingInfo] = Field(default_factory=list)


# --- turn/undo (protocol.md, "Workspace tools") ----------------------------------------


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


# --- tools ---------------------------------------------------------------------------


class ToolListParams(WireParams):
    conversation_id: str | None = None
    environment: ClientEnvironment | None = Field(default=None, repr=False)


class ToolInfo(WireModel):
    name: str
    source: Literal["builtin", "local", "mcp"]
    server: str | None = None
    """For an MCP tool: the server (`mcp.servers.<server>`) it belongs to."""
    mcp_tool: str | None = None
    """For an MCP tool: its name on the server (differs from `name` when renamed)."""
    enabled: bool
    run: Literal["ask", "unattended", "skip"]
    result: Literal["unattended", "ask", "skip"]
    summary: str | None = None
    parameters: dict[str, Any]
    hidden: bool = False
    """`style.hidden`: clients need not show this tool's calls."""


class ToolListResult(WireModel):
    tools: list[ToolInfo]


class ToolCallParams(WireParams):
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    conversation_id: str | None = None
    detached: DetachedMode | None = None
    environment: ClientEnvironment | None = Field(default=None, repr=False)
    """The client's working directory and environment for this call only."""


class ToolCallResult(WireModel):
    content: str
    is_error: bool


# --- models --------------------------------------------------------------------------


class ModelListParams(WireParams):
    environment: ClientEnvironment | None = Field(default=None, repr=False)
    """The client's environment: its config file and keys decide what is listed."""


class ProviderStatus(WireModel):
    name: str
    available: bool
    key_variable: str | None = None
    """The environment variable its API key is read from (hosted providers)."""
    problem: str | None = None
    """Why it cannot be used now (absent when `available`)."""
    models: list[str] | None = None
    """The models its server has, for a provider that lists them (Ollama's `/api/tags`)."""


class ModelListResult(WireModel):
    default_model: str
    """`assistant.model.id`: what a turn uses without `model`."""
    aliases: dict[str, str]
    """`[aliases]`: names accepted as `turn/start` `model`."""
    providers: list[ProviderStatus]


class ConfigShowParams(WireParams):
    environment: ClientEnvironment | None = Field(default=None, repr=False)
    """The client's environment: its `JP_CONFIG` and working directory pick the files."""
    config: dict[str, Any] | None = None
    """Overrides laid over the files, as `turn/start` `config` (shown with origin `-c`)."""
    config_files: list[str] = Field(default_factory=list)
    """Named config files laid under `config`, as `turn/start` `configFiles`."""


class ConfigEntry(WireModel):
    key: str
    """Dotted key of one leaf (segments with dots or other characters quoted)."""
    value: Any = None
    """Its effective value (JSON); `"<redacted>"` when `redacted`."""
    origin: str
    """`default`, the user or workspace config file's path, or `-c`."""
    redacted: bool = False
    """The value may be a credential and is never sent."""


class ConfigShowResult(WireModel):
    entries: list[ConfigEntry]
    warnings: list[str] = Field(default_factory=list)
    """`source: key: what happened` for each key of JP's config jpd read its own way
    or ignored (protocol.md 13, "JP's config files")."""


# --- conversations -------------------------------------------------------------------


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


# --- daemon --------------------------------------------------------------------------


class DaemonStatusResult(WireModel):
    pid: int
    version: str
    uptime: float
    """Seconds since the daemon started serving."""
    socket_path: str | None = None
    """The Unix socket the daemon listens on; absent on stdio."""
    clients: int
    """Open connections, the asking one included."""
    running_turns: list[TurnInfo]
    data_dir: str
    """Where conversations are stored."""
    config_path: str
    """The user config file the daemon reads when a request sends no environment."""
    log_file: str | None = None
    """The daemon's log file; absent when it logs to stderr only (stdio)."""


class DaemonStopResult(WireModel):
    stopping: bool = True
    cancelled_turns: list[TurnInfo]
    """The turns that were running; each is cancelled and records its end."""
