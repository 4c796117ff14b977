"""`attributes.json`: what a user (or the title model) says about a conversation, as
opposed to what its log says: a title, labels, archived, pinned, an expiry
(protocol.md 5.26). Unlike `metadata.json` it is not derived from the log and cannot be
rebuilt, so it is written atomically and fsynced."""

import contextlib
import logging
import os
import tempfile
import threading
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from jpd.protocol.labels import Label

log = logging.getLogger(__name__)

ATTRIBUTES_FILE = "attributes.json"


class Attributes(BaseModel):
    """A conversation's attributes; every field is optional in the file."""

    model_config = ConfigDict(extra="ignore", frozen=True, defer_build=True)

    title: str | None = None
    title_source: Literal["user", "model"] | None = None
    """Who set `title`: a model's title never replaces a user's."""
    labels: list[Label] = []
    archived_at: datetime | None = None
    pinned_at: datetime | None = None
    attachments: list[str] = []
    """Attachment specs every turn sends, read afresh each time (`jp attachment add`)."""
    expires_at: datetime | None = None
    """`jp query --tmp`: the daemon deletes the conversation after this moment."""


_lock = threading.Lock()  # read-modify-write of any attributes.json in this process


def read_attributes(directory: Path) -> Attributes:
    """The attributes in `directory` (none: the defaults; unreadable: the defaults and a
    warning, so a damaged file never hides the conversation)."""
    try:
        raw = (directory / ATTRIBUTES_FILE).read_bytes()
    except FileNotFoundError:
        return Attributes()
    except OSError as exc:
        log.warning("cannot read %s: %s", directory / ATTRIBUTES_FILE, exc)
        return Attributes()
    try:
        return Attributes.model_validate_json(raw)
    except ValidationError:
        log.warning("ignoring the damaged %s", directory / ATTRIBUTES_FILE)
        return Attributes()


def write_attributes(directory: Path, attributes: Attributes) -> None:
    """Atomically replace the attributes in `directory` (fsynced: they exist nowhere else)."""
    payload = attributes.model_dump_json(exclude_defaults=True, indent=2).encode()
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{ATTRIBUTES_FILE}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(payload)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, directory / ATTRIBUTES_FILE)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def update_attributes(directory: Path, change: Callable[[Attributes], Attributes]) -> Attributes:
    """Apply `change` to the attributes in `directory` and write the result."""
    with _lock:
        updated = change(read_attributes(directory))
        write_attributes(directory, updated)
        return updated
