"""The variables every tool process may see: one allow-list for local tools, the
workspace tools and MCP servers (protocol.md 9.4).

A leaf beside `jpd.settings`: `jpd.mcp` sits below `jpd.tools` and uses it too.
"""

from __future__ import annotations

from collections.abc import Mapping

ALLOWED = frozenset(
    {
        "PATH",
        "HOME",
        "USER",
        "LOGNAME",
        "SHELL",
        "LANG",
        "LANGUAGE",
        "TERM",
        "COLORTERM",
        "NO_COLOR",
        "TMPDIR",
        "TZ",
        "PWD",
    }
)
"""Variables every tool gets (when the turn's environment has them)."""


def is_allowed(name: str) -> bool:
    """Whether the variable `name` reaches a tool without being configured in."""
    return name in ALLOWED or name.startswith("LC_")


def base_environment(base: Mapping[str, str]) -> dict[str, str]:
    """The allowed part of `base`."""
    return {name: value for name, value in base.items() if is_allowed(name)}
