"""Process-level settings of a daemon, resolved once from the environment."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import platformdirs


@dataclass(frozen=True)
class Settings:
    """Where the daemon keeps data and which environment its config reads."""

    data_dir: Path
    env: Mapping[str, str] = field(default_factory=dict, repr=False)
    log_file: Path | None = None
    """Where a listening daemon logs (shown by `daemon/status`); None: stderr only."""

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        """`$JP_DATA_DIR` or the platform user data dir."""
        env = dict(os.environ if env is None else env)
        data = env.get("JP_DATA_DIR") or platformdirs.user_data_dir("jp")
        return cls(data_dir=Path(data), env=env)
