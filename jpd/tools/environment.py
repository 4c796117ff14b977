"""The environment a local tool runs with: an allow-list, not a denylist.

A tool gets only the variables a program needs to run at all, taken from the
environment of the turn (the daemon's, or the one its client sent): `ALLOWED` and the
locale's `LC_*`. Nothing else passes by default, whatever its name: a denylist of
names with KEY/SECRET/TOKEN would let `DATABASE_URL`, `SSH_AUTH_SOCK` or
`AWS_PROFILE` through. `conversation.tools.<name>.env` adds to it: `NAME = true`
passes `NAME` through from the turn's environment, `NAME = "value"` sets it,
`NAME = false` removes it (protocol.md section 9.4). The provider API key variables
never pass through by `true` (a tool has no business with them), though a value may
be set. Local tools, the workspace tools and MCP servers all start from
`jpd.allowed_env.base_environment` (one allow-list; an MCP server adds its config's
`env`).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from jpd.allowed_env import base_environment


def tool_environment(
    base: Mapping[str, str],
    configured: Mapping[str, str | bool],
    provider_keys: Collection[str] = (),
) -> dict[str, str]:
    """`base_environment(base)`, then `configured` applied (see the module docstring)."""
    env = base_environment(base)
    for name, setting in configured.items():
        if setting is True:
            if name in base and name not in provider_keys:
                env[name] = base[name]
        elif setting is False:
            env.pop(name, None)
        else:
            env[name] = setting
    return env
