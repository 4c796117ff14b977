"""The sandbox of `run_command`: its policy and the command that applies it.

The confinement itself happens in the child, in `sandbox_exec.py` (a script, so the
daemon never calls unshare or Landlock on itself): a new network namespace for "no
network" (UDP and Unix sockets included, which Landlock's TCP rules miss) and Landlock
filesystem rules for writes. When the kernel cannot provide what the policy asks, the
script refuses and the command never runs.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, get_args

SandboxMode = Literal["workspace-write", "read-only", "off"]
SANDBOX_EXEC = Path(__file__).with_name("sandbox_exec.py")
REFUSED = "jpd-sandbox: cannot sandbox:"
"""Printed on stderr by `sandbox_exec.py` (exit 125) when it cannot confine."""


class PolicyError(ValueError):
    """The tool's sandbox options are invalid."""


@dataclass(frozen=True)
class SandboxPolicy:
    mode: SandboxMode = "workspace-write"
    network: bool = False

    @classmethod
    def from_options(cls, options: Mapping[str, Any]) -> SandboxPolicy:
        """`conversation.tools.run_command.options.{sandbox,network}`."""
        mode = options.get("sandbox", "workspace-write")
        if mode not in get_args(SandboxMode):
            allowed = ", ".join(get_args(SandboxMode))
            raise PolicyError(f"options.sandbox must be one of {allowed}, not {mode!r}")
        network = options.get("network", False)
        if not isinstance(network, bool):
            raise PolicyError(f"options.network must be true or false, not {network!r}")
        return cls(mode=mode, network=network)

    @property
    def unconfined(self) -> bool:
        return self.mode == "off" and self.network

    def wrap(self, argv: list[str], workspace: Path, tmpdir: Path) -> list[str]:
        """`argv` run under this policy."""
        if self.unconfined:
            return argv
        network = "1" if self.network else "0"
        confine = [sys.executable, "-I", "-S", str(SANDBOX_EXEC), self.mode, network]
        return [*confine, str(workspace), str(tmpdir), *argv]
