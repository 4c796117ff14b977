"""A conversation's blobs (file snapshots for `turn/undo`, prompt images) shared across
a fleet: files under the conversation's local directory, copied into `jpd_blobs` when
written (`share`) and back into another member's directory before it reads them
(`fetch`). They are content-addressed or written once, so a name never changes
meaning; a stored path that could leave the directory is never written."""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import secrets
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import Any, TypeVar

import psycopg

log = logging.getLogger(__name__)

T = TypeVar("T")
Run = Callable[[Callable[[psycopg.Connection[Any]], T]], T]
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


def share(run: Run[Any], conversation_id: str, directory: Path) -> int:
    """Store the local blobs the store lacks; returns how many were stored."""
    local = _local(directory)
    if not local:
        return 0
    stored = {
        str(row[0])
        for row in run(
            lambda conn: conn.execute(
                "SELECT path FROM jpd_blobs WHERE conversation_id = %s", (conversation_id,)
            ).fetchall()
        )
    }
    missing = [(name, path) for name, path in local.items() if name not in stored]
    for name, path in missing:
        row = (conversation_id, name, path.read_bytes())
        run(functools.partial(_insert, row))
    return len(missing)


def _insert(row: tuple[str, str, bytes], conn: psycopg.Connection[Any]) -> None:
    conn.execute(
        "INSERT INTO jpd_blobs (conversation_id, path, data) VALUES (%s, %s, %s) "
        "ON CONFLICT DO NOTHING",
        row,
    )


def _select(key: tuple[str, str], conn: psycopg.Connection[Any]) -> tuple[Any, ...] | None:
    return conn.execute(
        "SELECT data FROM jpd_blobs WHERE conversation_id = %s AND path = %s", key
    ).fetchone()


def fetch(run: Run[Any], conversation_id: str, directory: Path) -> int:
    """Write the stored blobs missing here; returns how many were written."""
    names = [
        str(row[0])
        for row in run(
            lambda conn: conn.execute(
                "SELECT path FROM jpd_blobs WHERE conversation_id = %s", (conversation_id,)
            ).fetchall()
        )
    ]
    written = 0
    for name in names:
        if not safe(name):
            log.warning("conversation %s: ignoring the stored blob %r", conversation_id, name)
            continue
        target = directory / name
        if target.exists():
            continue
        row = run(functools.partial(_select, (conversation_id, name)))
        if row is None:
            continue
        target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        temp = target.with_name(f".{target.name}.{secrets.token_hex(4)}")
        try:
            fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as out:
                out.write(bytes(row[0]))
            os.replace(temp, target)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temp)
        written += 1
    return written
