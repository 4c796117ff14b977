"""Applying the peer rule (jpd/tools/peer_rule.py) to a Unix socket connection.

A refused peer gets one answer, to its first request (normally `initialize`): a
JSON-RPC error -32007 saying why; then the connection closes. The reason is logged.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import struct
from collections.abc import Awaitable, Callable, Mapping

import anyio

from jpd.protocol.errors import PeerRefused
from jpd.rpc.errors import error_body
from jpd.rpc.framing import Malformed, Receive, encode_frame, read_frames
from jpd.tools.peer_rule import LinuxProc, Peer, Verdict, judge

log = logging.getLogger(__name__)

_ANSWER_TIMEOUT = 5.0  # seconds a refused peer gets to send its first request
_MAX_FRAME = 1 << 20

_PROC = LinuxProc()
_SO_PEERPIDFD = getattr(socket, "SO_PEERPIDFD", 77)  # Linux's value; older Pythons lack it


def peer_credentials(sock: socket.socket) -> Peer | None:
    """SO_PEERCRED of a connected Unix socket; None where the system has none."""
    option = getattr(socket, "SO_PEERCRED", None)
    if option is None:
        return None
    try:
        raw = sock.getsockopt(socket.SOL_SOCKET, option, struct.calcsize("3i"))
    except OSError:
        return None
    pid, uid, _gid = struct.unpack("3i", raw)
    return Peer(pid=pid, uid=uid)


def _peer_pidfd(sock: socket.socket) -> int | None:
    """A pidfd of the peer process as it connected (SO_PEERPIDFD, Linux 6.5), or None."""
    try:
        raw = sock.getsockopt(socket.SOL_SOCKET, _SO_PEERPIDFD, 4)
    except OSError:
        return None
    fd: int = struct.unpack("i", raw)[0]
    return fd if fd >= 0 else None


def check_peer(sock: socket.socket, tools: Mapping[int, int]) -> Verdict:
    """The rule's verdict on the peer of `sock` (served unverified where the system
    cannot tell who it is)."""
    peer = peer_credentials(sock)
    if peer is None:
        return Verdict(None, verified=False)
    pidfd = _peer_pidfd(sock)
    try:
        verdict = judge(
            peer, daemon_pid=os.getpid(), daemon_uid=os.getuid(), tools=tools, proc=_PROC
        )
        if verdict.refusal is None and pidfd is not None:
            # `/proc/<pid>` was read by number: if the peer has ended (and the number
            # could now be another process's), what was read may not be the peer.
            try:
                signal.pidfd_send_signal(pidfd, 0)
            except ProcessLookupError:
                return Verdict(
                    "jpd refuses this connection: its process ended while it was checked",
                    verified=False,
                )
        return verdict
    finally:
        if pidfd is not None:
            os.close(pidfd)


async def refuse(receive: Receive, send: Callable[[bytes], Awaitable[None]], reason: str) -> None:
    """Answer the peer's first request with -32007 and `reason`, then return (the
    caller closes the connection)."""
    with anyio.move_on_after(_ANSWER_TIMEOUT):
        async for body in read_frames(receive, _MAX_FRAME):
            if isinstance(body, Malformed):
                return
            try:
                message = json.loads(body)
            except ValueError:
                return
            if isinstance(message, dict) and "id" in message and "method" in message:
                await send(encode_frame(error_body(message["id"], PeerRefused(reason))))
                return
