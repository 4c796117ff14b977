"""The environment a local tool runs with: secrets stay out unless configured in.

A tool gets the environment of the turn (the daemon's, or the one its client sent)
minus the provider API key variables and every variable whose name contains `KEY`,
`SECRET`, `TOKEN` or `PASSWORD` (in any case). `conversation.tools.<name>.env` puts
variables back: `NAME = true` passes `NAME` through from the turn's environment,
`NAME = "value"` sets it, `NAME = false` removes it (protocol.md section 9.4).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping

SECRET_NAME = re.compile(r"KEY|SECRET|TOKEN|PASSWORD", re.IGNORECASE)


def is_secret_name(name: str) -> bool:
    """Whether a variable named `name` is withheld from tools by default."""
    return SECRET_NAME.search(name) is not None


def tool_environment(
    base: Mapping[str, str],
    configured: Mapping[str, str | bool],
    provider_keys: Collection[str] = (),
) -> dict[str, str]:
    """`base` without secrets, then `configured` applied (see the module docstring)."""
    env = {
        name: value
        for name, value in base.items()
        if name not in provider_keys and not is_secret_name(name)
    }
    for name, setting in configured.items():
        if setting is True:
            if name in base:
                env[name] = base[name]
        elif setting is False:
            env.pop(name, None)
        else:
            env[name] = setting
    return env
