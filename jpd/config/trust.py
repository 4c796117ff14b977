"""Which workspace config files the user trusts.

A workspace's `.jp/config.toml` comes with whatever repository was cloned, so it is
ignored until the user trusts it (`jp trust`): it could otherwise start commands as MCP
servers, send requests (and the user's variables) to a server of its choosing, or turn
permission prompts off. Trust is keyed on the file's real path and the sha256 of its
content, as direnv's `allow`: a changed file needs trust again.

The store is the user's, never the workspace's: `trusted.json` in `$JP_STATE_DIR`,
else `<XDG_STATE_HOME or ~/.local/state>/jp/` (where `jp` keeps `current.json`), read
with the environment of the request, as every other path the daemon derives from it.
It maps real paths to hex digests. `jp` writes it (clients/jpcli/trust.py keeps the
same format; tests/unit/test_trust.py checks they agree).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from pathlib import Path

TRUST_FILE = "trusted.json"


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


def is_trusted(path: Path, raw: bytes, env: Mapping[str, str]) -> bool:
    """Whether the file `path`, whose bytes are `raw`, is trusted as it is now."""
    return trusted_files(env).get(os.path.realpath(path)) == content_digest(raw)
