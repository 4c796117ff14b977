"""Results the daemon core returns; they double as wire payloads (camelCase)."""

from datetime import datetime

from jpd.protocol.base import WireModel


class TurnInfo(WireModel):
    """A running turn, or (`resumable`) an interrupted one `turn/resume` can continue."""

    turn_id: str
    conversation_id: str
    model: str
    started_at: datetime
    resumable: bool | None = None
    """True for an interrupted turn that can be resumed (protocol.md 5.10); absent for a
    running turn."""


class ConversationSummary(WireModel):
    """One conversation in `conversation/list`."""

    conversation_id: str
    title: str
    created_at: datetime
    updated_at: datetime
    event_count: int
    workspace: str | None = None
    """The workspace root of its latest turn that had one (absolute)."""
    labels: list[str] = []
    archived: bool = False
    """Archived conversations are listed only when asked (protocol.md 5.26)."""
    pinned: bool = False
    """Pinned conversations are listed first."""
    attachments: list[str] = []
    """Attachments every turn of the conversation sends (`conversation/update`)."""
    expires_at: datetime | None = None
    """A temporary conversation (`--tmp`) is deleted after this moment."""
