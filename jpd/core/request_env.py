"""The environment one request runs with: the client's when it sent one, else the daemon's.

protocol.md 5.5 "Client environment": a client sends its working directory and
environment variables with `turn/start`, `tool/call` and `tool/list`. They are used
for that request only (config file, provider keys, tool subprocesses) and never kept.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from jpd.protocol.client_requests import ClientEnvironment


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


def request_env(
    environment: ClientEnvironment | None,
    workspace_root: Path | None,
    daemon_env: Mapping[str, str],
) -> RequestEnv:
    """Combine a request's `environment` with the connection's workspace and the daemon's env.

    A sent `env` replaces the daemon's entirely (a variable the client unset stays unset,
    as tmux's `update-environment` does); a sent `cwd` replaces the connection's workspace.
    """
    if environment is None:
        return RequestEnv(workspace_root, daemon_env)
    workspace = Path(environment.cwd) if environment.cwd else workspace_root
    env = environment.env if environment.env is not None else daemon_env
    roots = tuple(Path(os.path.normpath(root)) for root in environment.additional_roots)
    return RequestEnv(workspace, env, roots, environment.umask)
