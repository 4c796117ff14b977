"""The environment one request runs with: the client's when it sent one, else the daemon's.

protocol.md 5.5 "Client environment": a client sends its working directory and
environment variables with `turn/start`, `tool/call` and `tool/list`. They are used
for that request only (config file, provider keys, tool subprocesses) and never kept.

The variables that choose the config and the state the daemon trusts (`PATH_SELECTORS`:
the user config file, the trust store) are taken from the client only when its peer
was verified as an unsandboxed process of the user (protocol.md 2.1, the peer rule);
any other client's values of them are replaced by the daemon's, so it cannot select a
config with the sandbox or the permission prompts off.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from jpd.protocol.environment import ClientEnvironment


@dataclass(frozen=True)
class RequestEnv:
    """Workspace and environment variables of one request."""

    workspace: Path | None
    env: Mapping[str, str] = field(repr=False)
    """Read for `JP_CONFIG`, provider API keys and as the tools' whole environment."""
    extra_roots: tuple[Path, ...] = ()
    """`environment.additionalRoots`: more directories the workspace tools may use."""
    umask: int | None = None
    """`environment.umask`: the client's, for what the tools create."""

    @property
    def root(self) -> Path:
        """Where tools run: the workspace, else the daemon's working directory."""
        return self.workspace or Path.cwd()


PATH_SELECTORS = (
    "JP_CONFIG",
    "JP_STATE_DIR",
    "JP_DATA_DIR",
    "XDG_CONFIG_HOME",
    "XDG_STATE_HOME",
    "XDG_DATA_HOME",
)
"""Variables that select which config, trust store or data the daemon uses."""


def request_env(
    environment: ClientEnvironment | None,
    workspace_root: Path | None,
    daemon_env: Mapping[str, str],
    *,
    peer_verified: bool = True,
) -> RequestEnv:
    """Combine a request's `environment` with the connection's workspace and the daemon's env.

    A sent `env` replaces the daemon's entirely (a variable the client unset stays unset,
    as tmux's `update-environment` does); a sent `cwd` replaces the connection's workspace.
    From a peer not `peer_verified`, `PATH_SELECTORS` keep the daemon's values.
    """
    if environment is None:
        return RequestEnv(workspace_root, daemon_env)
    workspace = Path(environment.cwd) if environment.cwd else workspace_root
    env = environment.env if environment.env is not None else daemon_env
    if not peer_verified and env is not daemon_env:
        env = _daemon_selectors(env, daemon_env)
    roots = tuple(Path(os.path.normpath(root)) for root in environment.additional_roots)
    return RequestEnv(workspace, env, roots, environment.umask)


def _daemon_selectors(env: Mapping[str, str], daemon_env: Mapping[str, str]) -> dict[str, str]:
    """`env` with each of `PATH_SELECTORS` as the daemon has it (or unset)."""
    kept = {k: v for k, v in env.items() if k not in PATH_SELECTORS}
    kept.update({k: daemon_env[k] for k in PATH_SELECTORS if k in daemon_env})
    return kept
