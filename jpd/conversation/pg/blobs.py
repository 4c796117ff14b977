"""A conversation's blobs (file snapshots for `turn/undo`, prompt images) shared across
a fleet: files under the conversation's local directory, copied into `jpd_blobs` when
written (`share`) and back into another member's directory before it reads them
(`fetch`). They are content-addressed or written once, so a name never changes
meaning; a stored path that could leave the directory is never written."""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

import anyio.to_thread

if TYPE_CHECKING:
    from jpd.conversation.pg.connections import PgConnections

log = logging.getLogger(__name__)
EVENTS_AND_CACHES = {"events.jsonl", "metadata.json", "turn.lock"}


def _local(directory: Path) -> dict[str, Path]:
    found: dict[str, Path] = {}
    if not directory.is_dir():
        return found
    for path in directory.rglob("*"):
        relative = path.relative_to(directory)
        if (
            path.is_file()
            and not any(part.startswith(".") for part in relative.parts)  # temporary files
            and str(relative) not in EVENTS_AND_CACHES
        ):
            found[relative.as_posix()] = path
    return found


def safe(name: str) -> bool:
    """Whether a stored path stays inside the conversation's directory."""
    path = PurePosixPath(name)
    return bool(name) and not path.is_absolute() and ".." not in path.parts and "\\" not in name


async def share(db: PgConnections, conversation_id: str, directory: Path) -> int:
    """Store the local blobs the store lacks; returns how many were stored."""
    local = await anyio.to_thread.run_sync(_local, directory)
    if not local:
        return 0
    rows = await db.all("SELECT path FROM jpd_blobs WHERE conversation_id = %s", (conversation_id,))
    stored = {str(row[0]) for row in rows}
    missing = [(name, path) for name, path in local.items() if name not in stored]
    for name, path in missing:
        data = await anyio.to_thread.run_sync(path.read_bytes)
        await db.execute(
            "INSERT INTO jpd_blobs (conversation_id, path, data) VALUES (%s, %s, %s) "
            "ON CONFLICT DO NOTHING",
            (conversation_id, name, data),
        )
    return len(missing)


async def fetch(db: PgConnections, conversation_id: str, directory: Path) -> int:
    """Write the stored blobs missing here; returns how many were written."""
    rows = await db.all("SELECT path FROM jpd_blobs WHERE conversation_id = %s", (conversation_id,))
    written = 0
    for name in (str(row[0]) for row in rows):
        if not safe(name):
            log.warning("conversation %s: ignoring the stored blob %r", conversation_id, name)
            continue
        target = directory / name
        if await anyio.to_thread.run_sync(target.exists):
            continue
        row = await db.one(
            "SELECT data FROM jpd_blobs WHERE conversation_id = %s AND path = %s",
            (conversation_id, name),
        )
        if row is None:
            continue
        await anyio.to_thread.run_sync(_write, target, bytes(row[0]))
        written += 1
    return written


def _write(target: Path, data: bytes) -> None:
    """Write a blob file whole (a temporary file renamed), private to the user."""
    target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    temp = target.with_name(f".{target.name}.{secrets.token_hex(4)}")
    try:
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.replace(temp, target)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp)
