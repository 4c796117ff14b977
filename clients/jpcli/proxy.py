"""`jp proxy`: a byte bridge between this process's stdio and the daemon's socket here.

`jp --remote HOST` runs `ssh HOST jp proxy` (`jpcli.remote`); so can any tool that
speaks the daemon protocol on a pipe. The proxy starts the daemon of this machine when
none answers (its config, data dir and socket are those of this machine's environment),
reads the first message to check that the client runs the same version of jp (a clear
JSON-RPC error otherwise, before anything reaches the daemon), then copies bytes both
ways until either side hangs up: the framing is the daemon's own. Standard library only.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from typing import IO, Any

from jpcli import __version__
from jpcli.daemon import DaemonError, SocketDaemon
from jpcli.rpc import INVALID_PARAMS, ConnectionClosed, encode_message, read_message

CHUNK = 1 << 16
SAME_PACKAGE = frozenset({"jp", "jp-acp"})
"""Clients shipped with this `jp`: they must run its very version."""


def version_problem(message: dict[str, Any]) -> str | None:
    """Why the client that sent this first message must not go on (None: it may)."""
    if message.get("method") != "initialize":
        return None  # the daemon answers anything else before `initialize` (-32002)
    params = message.get("params")
    client = params.get("clientInfo") if isinstance(params, dict) else None
    if not isinstance(client, dict) or client.get("name") not in SAME_PACKAGE:
        return None  # another client's compatibility is `protocolVersion`'s business
    version = client.get("version")
    if not isinstance(version, str) or version == __version__:
        return None
    host = os.uname().nodename
    return (
        f"version mismatch: the client runs jp {version}, {host} runs jp {__version__}; "
        "install the same version on both machines"
    )


def main(stdin: IO[bytes] | None = None, stdout_fd: int = 1) -> int:
    """Serve one client on stdio until either side hangs up; returns the exit code."""
    reader: Any = stdin if stdin is not None else sys.stdin.buffer
    env = dict(os.environ)
    env.pop("JP_REMOTE", None)  # the proxy is the remote end: never a client of another
    try:
        first = read_message(reader)
    except ConnectionClosed as exc:
        sys.stderr.write(f"jp proxy: {exc}\n")
        return 1
    if first is None:
        return 0
    problem = version_problem(first)
    if problem is not None:
        error = {"code": INVALID_PARAMS, "message": problem}
        _write_all(
            stdout_fd, encode_message({"jsonrpc": "2.0", "id": first.get("id"), "error": error})
        )
        sys.stderr.write(f"jp proxy: {problem}\n")
        return 1
    try:
        sock = SocketDaemon(environ=env).open_socket()
    except DaemonError as exc:
        sys.stderr.write(f"jp proxy: error: {exc}\n")
        return 1
    with sock:
        sock.sendall(encode_message(first))
        threading.Thread(target=_pump_in, args=(reader, sock), daemon=True).start()
        while True:
            try:
                data = sock.recv(CHUNK)
            except OSError:
                break
            if not data:
                break
            try:
                _write_all(stdout_fd, data)
            except OSError:
                break  # the client is gone: closing the socket ends its connection
    return 0


def _pump_in(reader: Any, sock: Any) -> None:
    """Client -> daemon; at the end of the client's input, half-close the socket so the
    daemon ends the connection (and the proxy) once it has answered."""
    import socket

    try:
        while True:
            # read1: what the buffer holds (the first frame may have read ahead), else one read.
            data = reader.read1(CHUNK)
            if not data:
                break
            sock.sendall(data)
    except OSError:
        pass
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_WR)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]
