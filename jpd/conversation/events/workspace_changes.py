"""Changes tools made to the workspace's files, and their undoing (protocol.md,
"Workspace tools")."""

from typing import Literal

from pydantic import Field

from jpd.conversation.events.base import EventBase


class FileChanged(EventBase):
    """A tool changed a file of the workspace. What the file held before is kept in the
    conversation's `snapshots/<before>` (content-addressed), so `turn/undo` can put it
    back after a restart."""

    type: Literal["file_changed"] = "file_changed"
    turn_id: str
    tool_call_id: str | None = None
    path: str
    """The file's real, absolute path."""
    before: str | None = None
    """sha256 of the content before (absent: the tool created the file)."""
    after: str
    """sha256 of the content the tool wrote."""
    created_dirs: list[str] | None = None
    """Folders made for a created file (real paths, outermost first): an undo removes
    them again when empty."""


class TurnUndone(EventBase):
    """`turn/undo` put back the files a turn changed."""

    type: Literal["turn_undo"] = "turn_undo"
    turn_id: str
    restored: list[str] = Field(default_factory=list)
    """Files given back their earlier content."""
    removed: list[str] = Field(default_factory=list)
    """Files the turn had created, removed again."""
