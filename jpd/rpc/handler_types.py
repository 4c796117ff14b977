"""The shapes of the rpc layer's method handlers (`jpd.rpc.methods`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from jpd.core.daemon import Daemon
from jpd.protocol import method_table as mt
from jpd.protocol.base import WireModel
from jpd.rpc.pygls_private import EncodedResult
from jpd.rpc.session import Session

Handler = Callable[[Daemon, Session, Any], Awaitable[WireModel | EncodedResult | None]]
OnLoop = Callable[[Callable[[], object]], None]
"""Runs an action on the event loop (soon, when called from the reader thread)."""
InstantHandler = Callable[[Daemon, Session, Any, OnLoop], WireModel | EncodedResult | None]
"""A handler that answers without waiting, or returns None when it would have to wait.
It may run in the connection's reader thread (`jpd.rpc.lane`): it reads snapshots of
the daemon's state and changes it only through `OnLoop`."""
Incoming = mt.ClientRequest[Any, Any] | mt.ClientNotification[Any]
