"""Events that open, continue and close a turn (protocol.md 12.1, 12.4)."""

from typing import Any, Literal

from jpd.conversation.events.base import EventBase
from jpd.protocol.modes import PermissionMode


class TurnStart(EventBase):
    type: Literal["turn_start"] = "turn_start"
    turn_id: str
    model: str | None = None
    workspace: str | None = None
    """The client's workspace root the turn ran in (absolute), when it had one."""
    mode: PermissionMode = "ask"
    """The turn's permission mode (`turn/start` `mode`); a resumed turn keeps it."""
    reasoning_effort: str | None = None
    """The turn's `assistant.reasoning.effort` (absent in older logs): a client that
    resumes the conversation picks it again."""
    config: dict[str, Any] | None = None
    """The config the conversation keeps (RFD 054): the `assistant` part of every
    `turn/start` `config` given so far, later over earlier (protocol.md 5.5)."""
    attachments: list[str] | None = None
    """The attachments the turn sent (the conversation's, then the message's)."""
    instructions: list[str] | None = None
    """The project instruction files (`AGENTS.md`) in the system prompt, relative to
    the workspace root (protocol.md 5.5, "The system prompt")."""


class TurnResume(EventBase):
    """An interrupted turn continues under the same id (`turn/resume`, protocol.md 12.4)."""

    type: Literal["turn_resume"] = "turn_resume"
    turn_id: str


TurnStopReason = Literal["end_turn", "max_tokens", "cancelled", "error", "interrupted"]


class TurnEnd(EventBase):
    """How a turn ended; written last in every turn (protocol.md 12.1)."""

    type: Literal["turn_end"] = "turn_end"
    turn_id: str
    stop_reason: TurnStopReason | str
    """One of `TurnStopReason` (`interrupted`: the daemon stopped during the turn, written
    by recovery); another value (a newer daemon's) is read, never written."""
    error: str | None = None
