"""Connect `jp` to the shared `jpd` on its Unix socket, starting one when none answers.

The daemon outlives `jp`: closing the connection leaves its turns running. When no
daemon answers, `jp` starts `jpd --listen` detached (its own session, output to the
daemon log) and waits, within a bound, for the socket to accept. Standard library only.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from jpcli import paths

# Re-exported: callers reach the handshake pieces through the daemon they connect to.
from jpcli.handshake import PROTOCOL_VERSION as PROTOCOL_VERSION
from jpcli.handshake import DaemonError as DaemonError
from jpcli.handshake import NotRunning as NotRunning
from jpcli.handshake import initialize
from jpcli.rpc import Connection, ConnectionClosed, RpcError
from jpcli.spawn import log_path, open_daemon_log

if TYPE_CHECKING:
    import socket  # imported where used: `jp --stdio` spawns its daemon without it

START_TIMEOUT = 20.0  # seconds for a freshly started daemon to accept connections
STOP_TIMEOUT = 30.0  # seconds for a stopping daemon to release its socket
_POLL = 0.02
_MAX_SPAWNS = 3
# Paths the daemon reads from its environment; it runs from `/`, so they must be absolute.
_PATH_VARIABLES = ("JP_CONFIG", "JP_DATA_DIR", "JP_LOG_DIR", "JP_SOCKET")


class SocketDaemon:
    """An initialized connection to the shared daemon on its Unix socket."""

    def __init__(
        self,
        *,
        workspace_root: str | None = None,
        capabilities: Mapping[str, Any] | None = None,
        autostart: bool = True,
        environ: Mapping[str, str] | None = None,
        start_timeout: float = START_TIMEOUT,
        progress: Callable[[bool], None] | None = None,
        on_connect: Callable[[Connection], None] | None = None,
        check_data_dir: bool = True,
    ) -> None:
        self.env = dict(os.environ if environ is None else environ)
        self.path = os.path.abspath(paths.socket_path(self.env))
        self.pid_file = paths.pid_file(self.path)
        self.log_file = log_path(self.env)
        self.workspace_root = workspace_root if workspace_root is not None else os.getcwd()
        self.capabilities = dict(capabilities or {})
        self.autostart = autostart
        self.start_timeout = start_timeout
        self.progress = progress
        """Called with False now and then while a freshly started daemon is awaited, and
        with True once it answers (a spinner)."""
        self.on_connect = on_connect
        """Called with a new connection before `initialize` (to register request
        handlers before the daemon may send requests)."""
        self.check_data_dir = check_data_dir
        """Refuse a daemon serving another data dir (off for `jp daemon ...`, which is
        about the daemon on the socket, whatever its data)."""
        self.server_info: dict[str, Any] = {}
        self._socket: socket.socket | None = None
        self._connection: Connection | None = None

    def launch(self) -> None:
        """Nothing to begin ahead of `start` (that of the private daemon spawns it early):
        connecting to a running daemon is quick."""

    def start(self) -> Connection:
        """Connect (starting the daemon if needed) and run the `initialize` handshake.

        Raises `NotRunning` (no daemon, `autostart` off), `DaemonError`, or `RpcError`.
        """
        for attempt in (1, 2):
            sock = self.open_socket()
            self._socket = sock
            self._connection = Connection(sock.makefile("rb"), sock.makefile("wb"))
            if self.on_connect is not None:
                self.on_connect(self._connection)
            try:
                self.server_info = initialize(
                    self._connection,
                    self.workspace_root,
                    self.capabilities,
                    data_dir=paths.data_dir(self.env) if self.check_data_dir else None,
                )
                return self._connection
            except ConnectionClosed:
                self.close()
                # A daemon that was stopping (idle, or `jp daemon stop`) as we connected:
                # let it finish, then connect again (starting a new one if allowed).
                if attempt == 2 or not self.wait_stopped(5.0):
                    raise self.died() from None
            except RpcError:
                self.close()
                raise
        raise AssertionError("unreachable")

    def open_socket(self) -> socket.socket:
        """A socket connected to the daemon, started first when none answers (`autostart`).

        Raises `NotRunning` (no daemon, `autostart` off) or `DaemonError`.
        """
        sock = self._connect()
        if sock is None:
            if not self.autostart:
                raise NotRunning(f"jpd is not running (no daemon on {self.path})")
            sock = self._spawn_and_connect()
        return sock

    def died(self) -> DaemonError:
        """A one-line error for a connection the daemon dropped."""
        from jpcli.logtail import died_message

        return DaemonError(
            died_message(f"lost the connection to jpd on {self.path}", self.log_file)
        )

    def close(self) -> None:
        """Close the connection; the daemon and its turns keep running."""
        sock, self._socket = self._socket, None
        if sock is None:
            return
        import socket

        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)  # wakes the reader thread with end of stream
        if self._connection is not None:
            self._connection.close()
            self._connection.wait_closed(1.0)
        sock.close()

    kill = close  # a shared daemon is never killed by a client

    def wait_stopped(self, timeout: float = STOP_TIMEOUT) -> bool:
        """After `daemon/stop`: wait until the daemon released its pid file (it is gone)."""
        deadline = time.monotonic() + timeout
        while os.path.exists(self.pid_file):
            if time.monotonic() > deadline:
                return False
            time.sleep(_POLL)
        return True

    # --- internals ---------------------------------------------------------------

    def _connect(self) -> socket.socket | None:
        import socket

        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.connect(self.path)
        except (FileNotFoundError, ConnectionRefusedError):
            sock.close()
            return None
        except OSError as exc:
            sock.close()
            raise DaemonError(
                f"cannot connect to jpd on {self.path}: {exc.strerror or exc}"
            ) from None
        from jpcli import peer

        refused = peer.problem(sock, self.path)
        if refused is not None:
            sock.close()
            raise DaemonError(f"refusing to talk to jpd on {self.path}: {refused}")
        return sock

    def _spawn_and_connect(self) -> socket.socket:
        deadline = time.monotonic() + self.start_timeout
        process = self._spawn()
        spawned = 1
        while True:
            sock = self._connect()
            if sock is not None:
                if self.progress is not None:
                    self.progress(True)
                return sock
            code = process.poll()
            if code is not None:
                # It gave up: usually a daemon that is stopping still holds the socket's
                # lock for a moment. Try again, a few times.
                if spawned >= _MAX_SPAWNS or time.monotonic() > deadline:
                    raise DaemonError(
                        f"jpd exited with code {code} before listening on {self.path}; "
                        f"see {self.log_file}"
                    )
                time.sleep(0.2)
                process = self._spawn()
                spawned += 1
            elif time.monotonic() > deadline:
                raise DaemonError(
                    f"jpd did not listen on {self.path} within {self.start_timeout:g}s; "
                    f"see {self.log_file}"
                )
            if self.progress is not None:
                self.progress(False)
            time.sleep(_POLL)

    def _spawn(self) -> subprocess.Popen[bytes]:
        command = [sys.executable, "-m", "jpd", "--listen", self.path]
        env = dict(self.env)
        for name in _PATH_VARIABLES:
            if env.get(name):
                env[name] = os.path.abspath(env[name])
        output = self._open_log(command)
        try:
            # Detached: its own session (no terminal signals), no stdin, cwd `/` (it
            # must not pin the directory `jp` ran in), output to the daemon log.
            return subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=output,
                cwd="/",
                env=env,
                start_new_session=True,
            )
        except OSError as exc:
            raise DaemonError(f"cannot start {shlex.join(command)}: {exc}") from None
        finally:
            if output is not subprocess.DEVNULL:
                with contextlib.suppress(OSError):
                    os.close(output)

    def _open_log(self, command: list[str]) -> int:
        return open_daemon_log(self.log_file, command)
