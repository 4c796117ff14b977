"""Which workspace config files the user trusts.

A workspace's `.jp/config.toml` comes with whatever repository was cloned, so it is
ignored until the user trusts it (`jp trust`): it could otherwise start commands as MCP
servers, send requests (and the user's variables) to a server of its choosing, or turn
permission prompts off. Trust is keyed on the workspace's real path (plus
`/.jp/config.toml`, never the target of a link there) and the sha256 of the content,
as direnv's `allow`: a changed file needs trust again, and a link to another project's
trusted file borrows nothing. The bytes whose hash is checked are the bytes parsed
(read once: jpd/config/loader.py), and a `.jp` or `config.toml` that links outside
the workspace is never used (`read_workspace_config`).

The store is the user's, never the workspace's: `trusted.json` in `$JP_STATE_DIR`,
else `<XDG_STATE_HOME or ~/.local/state>/jp/` (where `jp` keeps `current.json`), read
with the environment of the request, as every other path the daemon derives from it.
It maps real paths to hex digests. `jp` writes it (clients/jpcli/trust.py keeps the
same format; tests/unit/test_trust.py checks they agree).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import NamedTuple

log = logging.getLogger(__name__)

TRUST_FILE = "trusted.json"
MAX_CONFIG_BYTES = 1024 * 1024
"""A workspace config larger than this is not read (no config comes near it)."""
AGENT_FILE = "agent-written.json"
"""Beside the store: workspace configs the agent wrote (key: sha256 of what it wrote),
so a trust prompt can say so (clients/jpcli/trust.py `describe`)."""


def trust_store_path(env: Mapping[str, str]) -> Path:
    """`$JP_STATE_DIR/trusted.json`, else `<XDG_STATE_HOME or ~/.local/state>/jp/trusted.json`."""
    explicit = env.get("JP_STATE_DIR", "").strip()
    if explicit:
        return Path(os.path.abspath(os.path.expanduser(explicit))) / TRUST_FILE
    state = env.get("XDG_STATE_HOME", "")
    if not os.path.isabs(state):
        state = os.path.expanduser("~/.local/state")
    return Path(state) / "jp" / TRUST_FILE


def content_digest(raw: bytes) -> str:
    """The hash trust is keyed on."""
    return hashlib.sha256(raw).hexdigest()


def trusted_files(env: Mapping[str, str]) -> dict[str, str]:
    """The store's entries (real path: digest); empty when missing or unreadable, so
    a damaged store trusts nothing."""
    try:
        data = json.loads(trust_store_path(env).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {k: v for k, v in data.items() if isinstance(k, str) and isinstance(v, str)}


def trust_key(path: Path) -> str:
    """The store's key for the workspace config `path` (`<workspace>/.jp/config.toml`):
    the workspace's real path plus `.jp/config.toml`, whatever links lie below it
    (clients/jpcli/trust.py `key` is the same)."""
    path = Path(os.path.abspath(path))
    return os.path.join(os.path.realpath(path.parent.parent), path.parent.name, path.name)


def is_trusted(path: Path, raw: bytes, env: Mapping[str, str]) -> bool:
    """Whether the workspace config `path`, whose bytes are `raw`, is trusted as it is now."""
    return trusted_files(env).get(trust_key(path)) == content_digest(raw)


class Refused(NamedTuple):
    """A workspace config that is never used, and why (one line for the user)."""

    reason: str


def read_workspace_config(path: Path) -> bytes | Refused | None:
    """The bytes of the workspace config `path` (`<workspace>/.jp/config.toml`), read
    once; None when there is none; `Refused` when it is not a regular file, or `.jp`
    or the file links outside the workspace (or was swapped while read). Raises
    OSError when it cannot be read."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    with os.fdopen(fd, "rb") as handle:
        opened = os.fstat(fd)
        if not stat.S_ISREG(opened.st_mode):
            return Refused(f"{path} is not a regular file")
        raw = handle.read(MAX_CONFIG_BYTES + 1)
        if len(raw) > MAX_CONFIG_BYTES:
            return Refused(f"{path} is larger than {MAX_CONFIG_BYTES} bytes")
    problem = _outside(path, opened)
    return raw if problem is None else Refused(f"{path} {problem}")


def _outside(path: Path, opened: os.stat_result) -> str | None:
    """Why the file opened as `path` is not the workspace's own, or None."""
    same = (opened.st_dev, opened.st_ino)
    try:
        linked = path.parent.is_symlink() or path.is_symlink()
        if not linked and (os.lstat(path).st_dev, os.lstat(path).st_ino) == same:
            return None
        real = os.path.realpath(path)
        workspace = os.path.realpath(path.parent.parent)
        if os.path.commonpath([real, workspace]) != workspace:
            return f"links to {real}, outside the workspace: it is never used"
        found = os.stat(real)
    except (OSError, ValueError):
        return "changed while it was read: not used"
    if (found.st_dev, found.st_ino) != same:
        return "changed while it was read: not used"
    return None


def note_agent_written(path: Path, raw: bytes, env: Mapping[str, str]) -> None:
    """Record that a tool of the daemon wrote `raw` to the workspace config `path`: it
    stays untrusted (its hash is not the trusted one), and the clients' trust prompt
    says the agent wrote it. A failure to record is logged, never raised."""
    target = trust_store_path(env).with_name(AGENT_FILE)
    try:
        data = json.loads(target.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        data = {}
    if not isinstance(data, dict):
        data = {}
    data[trust_key(path)] = content_digest(raw)
    try:
        target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        temporary = target.with_name(f".{AGENT_FILE}.{os.getpid()}")
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump(data, out, indent=1, sort_keys=True)
        os.replace(temporary, target)
    except OSError as exc:
        log.warning("cannot record the agent's write of %s: %s", path, exc)


def is_workspace_config(real: Path) -> bool:
    """Whether the real path `real` is a workspace config (`.../.jp/config.toml`)."""
    return real.name == "config.toml" and real.parent.name == ".jp"
