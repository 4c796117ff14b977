"""The `environment` a request carries: this shell's working directory and variables,
or, with `--remote`, only the remote workspace."""

from __future__ import annotations

import contextlib
import os
from typing import Any


def client_environment() -> dict[str, Any]:
    """This process's working directory and environment, sent with each `turn/start`
    and `tool/call` so that the shared daemon runs the turn as this shell would
    (protocol.md 5.5): `JP_CONFIG`, provider keys, the tools' environment."""
    remote = os.environ.get("JP_REMOTE", "").strip()
    if remote:  # this machine's cwd and variables mean nothing there (jpcli.remote)
        from jpcli.remote import parse_remote

        return parse_remote(remote).environment()
    from jpcli.remote import current_umask

    environment: dict[str, Any] = {"env": dict(os.environ), "umask": current_umask()}
    with contextlib.suppress(OSError):  # a deleted working directory
        environment["cwd"] = os.getcwd()
    return environment
