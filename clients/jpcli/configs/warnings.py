"""JP config warnings as `jp query` shows them (`turn/start` `configWarnings`): once
per file and set of keys, in one short line per file, not on every turn. What was
shown is remembered in the client's state folder (`config-warnings.json`); `jp config
show` always lists them in full."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from typing import TextIO

MAX_KEYS = 4
"""Keys named in the line; the rest are counted."""


def _grouped(warnings: Sequence[str]) -> dict[str, list[str]]:
    """`source: key: what` warnings -> keys by source, in order."""
    groups: dict[str, list[str]] = {}
    for warning in warnings:
        source, _, rest = warning.partition(": ")
        key = rest.partition(": ")[0] or rest
        groups.setdefault(source, []).append(key)
    return groups


def line(source: str, keys: Sequence[str]) -> str:
    """The one line for the JP keys of one file."""
    named = ", ".join(keys[:MAX_KEYS])
    more = f" and {len(keys) - MAX_KEYS} more" if len(keys) > MAX_KEYS else ""
    what = "setting" if len(keys) == 1 else "settings"
    return (
        f"jp: warning: {source}: {len(keys)} JP {what} read differently or ignored "
        f"({named}{more}); `jp config show` says how\n"
    )


def show_once(warnings: object, env: Mapping[str, str], err: TextIO) -> None:
    """Write the lines for `warnings` not shown before, and remember them."""
    if not isinstance(warnings, list) or not warnings:
        return
    from jpcli.current import state_dir

    path = os.path.join(state_dir(env), "config-warnings.json")
    try:
        with open(path, encoding="utf-8") as handle:
            seen = json.load(handle)
    except (OSError, ValueError):
        seen = {}
    if not isinstance(seen, dict):
        seen = {}
    changed = False
    for source, keys in _grouped([w for w in warnings if isinstance(w, str)]).items():
        digest = hashlib.sha256("\n".join(keys).encode()).hexdigest()[:16]
        if seen.get(source) == digest:
            continue
        err.write(line(source, keys))
        seen[source], changed = digest, True
    if not changed:
        return
    try:  # a read-only state folder: shown again next time, no harm
        os.makedirs(os.path.dirname(path), exist_ok=True)
        partial = f"{path}.{os.getpid()}.partial"
        with open(partial, "w", encoding="utf-8") as handle:
            json.dump(seen, handle, indent=1, sort_keys=True)
        os.replace(partial, path)
    except OSError:
        pass
