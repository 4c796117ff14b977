"""Permission modes: a turn setting that any client sends (`turn/start` `mode`).

- `ask` (the default): the tools' `run`/`result` configuration decides, as always.
- `accept-edits`: the workspace tools' file edits run without asking; commands and
  every other tool still ask as configured.
- `auto`: nothing asks (every `ask` is taken as allowed); `run = skip` still skips.
- `read-only`: tools that write files and commands are refused, whatever the config.
"""

from __future__ import annotations

from typing import Literal, get_args

PermissionMode = Literal["ask", "accept-edits", "auto", "read-only"]

PERMISSION_MODES: tuple[PermissionMode, ...] = get_args(PermissionMode)

MODE_DESCRIPTIONS: dict[PermissionMode, str] = {
    "ask": "Ask before running tools as configured",
    "accept-edits": "File edits in the workspace run without asking; commands still ask",
    "auto": "Everything runs without asking",
    "read-only": "Tools that write files and commands are refused",
}
