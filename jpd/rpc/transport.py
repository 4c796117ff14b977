"""The process hosting connections, as `daemon/status` reports it and `daemon/stop` stops it.

A transport implements `Host`: the socket listener serves many clients and stops the
whole daemon; a single-client transport (stdio) stops by ending its one connection.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Protocol


class Requester(Protocol):
    """The connection that asked the host to stop (a `Session`)."""

    @property
    def link_id(self) -> int:
        """The connection's id."""
        ...

    client_name: str

    def close(self, exit_code: int) -> None:
        """End the connection with this exit code."""
        ...


class Host(Protocol):
    """What the rpc layer may ask of the process serving a connection."""

    @property
    def socket_path(self) -> Path | None:
        """The Unix socket clients connect to; None for stdio."""
        ...

    def uptime(self) -> float:
        """Seconds since the daemon started serving."""
        ...

    def client_count(self) -> int:
        """Connections currently open (the asking one included)."""
        ...

    def request_stop(self, session: Requester) -> None:
        """Begin a clean stop: running turns are cancelled and recorded, then the process
        exits 0. Returns at once; the caller's response is still delivered."""
        ...


class SingleClientHost:
    """The host of a one-connection transport (stdio): stopping ends that connection,
    after which the process cancels and records running turns and exits 0."""

    def __init__(self) -> None:
        self._started = time.monotonic()

    @property
    def socket_path(self) -> Path | None:
        return None

    def uptime(self) -> float:
        return time.monotonic() - self._started

    def client_count(self) -> int:
        return 1

    def request_stop(self, session: Requester) -> None:
        session.close(0)
