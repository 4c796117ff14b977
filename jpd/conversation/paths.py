"""Where conversations live and what they may be called."""

from __future__ import annotations

import re
import secrets
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path

import platformdirs

EVENTS_FILE = "events.jsonl"
METADATA_FILE = "metadata.json"
SNAPSHOTS_DIR = "snapshots"
"""Files as they were before a tool changed them (`file_changed` events), by sha256."""
_ID_RE = re.compile(r"[A-Za-z0-9._-]{1,128}")


class InvalidConversationId(ValueError):
    """A conversation id that is not a safe directory name."""


def default_data_dir(env: Mapping[str, str]) -> Path:
    """The data dir: `$JP_DATA_DIR` if set and non-empty, else the platform user data dir."""
    configured = env.get("JP_DATA_DIR")
    if configured:
        return Path(configured).expanduser()
    return Path(platformdirs.user_data_dir("jp"))


def new_conversation_id() -> str:
    """A fresh id, sortable by creation time: `c-<utc yyyymmddThhmmss>-<8 hex>`."""
    return f"c-{_utc_stamp(int(time.time()))}-{secrets.token_hex(4)}"


_STAMP: list[tuple[int, str]] = [(-1, "")]


def _utc_stamp(second: int) -> str:
    """`yyyymmddThhmmss` of `second` (UTC), formatted once per second: a thousand
    conversations created at once share it."""
    at, stamp = _STAMP[0]
    if at != second:
        stamp = datetime.fromtimestamp(second, UTC).strftime("%Y%m%dT%H%M%S")
        _STAMP[0] = (second, stamp)
    return stamp


def is_valid_id(conversation_id: object) -> bool:
    """Whether `conversation_id` is acceptable to `validate_id`."""
    return (
        isinstance(conversation_id, str)
        and conversation_id not in (".", "..")
        and _ID_RE.fullmatch(conversation_id) is not None
    )


def validate_id(conversation_id: str) -> str:
    """Return `conversation_id` if it is a safe directory name, else raise.

    Allowed: 1 to 128 characters from `[A-Za-z0-9._-]`, and not `.` or `..`, so an id
    can never name a path outside the conversations directory.
    """
    if is_valid_id(conversation_id):
        return conversation_id
    if not isinstance(conversation_id, str) or not conversation_id:
        raise InvalidConversationId("invalid conversation id: must be a non-empty string")
    shown = conversation_id if len(conversation_id) <= 40 else conversation_id[:40] + "..."
    if conversation_id in (".", ".."):
        raise InvalidConversationId(f"invalid conversation id {shown!r}: reserved path name")
    raise InvalidConversationId(
        f"invalid conversation id {shown!r} ({len(conversation_id)} characters): "
        "use 1-128 characters from letters, digits, '.', '_' and '-'"
    )
