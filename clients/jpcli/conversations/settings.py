"""What a conversation keeps for its turns (RFD 054 in JP): the model and the config of
its latest `turn_start`, and the project instruction files that turn read; shown at the
top of `jp conversation show`."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any


def kept_settings(events: Sequence[dict[str, Any]]) -> list[str]:
    """`key: value` lines of the model, config and instruction files of the latest
    `turn_start` in `events` (none: no lines)."""
    starts = [e for e in events if e.get("type") == "turn_start"]
    if not starts:
        return []
    last = starts[-1]
    lines = [f"model: {last.get('model') or '(default)'}"]
    config = last.get("config")
    if config:
        lines.append("config: " + json.dumps(config, ensure_ascii=False, sort_keys=True))
    files = last.get("instructions")
    if files:
        lines.append("instructions: " + ", ".join(str(f) for f in files))
    return lines
