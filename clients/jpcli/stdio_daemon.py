"""A private `jpd` child speaking JSON-RPC on its stdio (`jp --stdio`, or `$JPD_COMMAND`).

The daemon lives as long as this `jp` command: closing it cancels its running turns.
Its stderr goes to a log file, so its logs never mix with `jp`'s answer. Standard
library only.
"""

from __future__ import annotations

import contextlib
import os
import select
import shlex
import subprocess
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from jpcli.handshake import DaemonError, initialize
from jpcli.rpc import Connection, ConnectionClosed, RpcError
from jpcli.spawn import daemon_command, log_path, spawn_daemon


class StdioDaemon:
    """A `jpd` child process and the initialized connection to it.

    Use as a context manager: entering starts and initializes the daemon, leaving
    sends `shutdown` + `exit` and waits for it (killing it if it lingers).
    """

    def __init__(
        self,
        command: Sequence[str] | None = None,
        *,
        workspace_root: str | None = None,
        log_file: Path | None = None,
        capabilities: Mapping[str, Any] | None = None,
        on_connect: Callable[[Connection], None] | None = None,
        process: subprocess.Popen[bytes] | None = None,
    ) -> None:
        self.command = list(command) if command is not None else daemon_command()
        self.workspace_root = workspace_root if workspace_root is not None else os.getcwd()
        self.log_file = log_file if log_file is not None else Path(log_path())
        self.capabilities = dict(capabilities or {})
        self.on_connect = on_connect
        """Called with the connection before `initialize` (to register request handlers)."""
        self.server_info: dict[str, Any] = {}
        self._process = process
        """Running already when `jp` spawned it early (`jpcli.spawn.launch_early`)."""
        self._connection: Connection | None = None

    @property
    def connection(self) -> Connection:
        """The initialized connection (after `start`)."""
        if self._connection is None:
            raise RuntimeError("daemon not started")
        return self._connection

    def __enter__(self) -> Connection:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def launch(self) -> None:
        """Spawn the daemon without waiting for it: it boots while `jp` loads the rest of
        the command (its imports take most of its start-up). `start` does it if needed.

        Raises `DaemonError` if it cannot be spawned.
        """
        if self._process is not None:
            return
        try:
            self._process = spawn_daemon(self.command, self.workspace_root, self.log_file)
        except OSError as exc:
            raise DaemonError(f"cannot start daemon {shlex.join(self.command)}: {exc}") from None

    def start(self) -> Connection:
        """Spawn the daemon (unless `launch` did) and run the `initialize` handshake.

        Raises `DaemonError` if it cannot be spawned or dies during the handshake,
        `RpcError` if it refuses to initialize.
        """
        self.launch()
        assert self._process is not None
        assert self._process.stdin is not None and self._process.stdout is not None
        self._connection = Connection(self._process.stdout, self._process.stdin)
        if self.on_connect is not None:
            self.on_connect(self._connection)
        try:
            self.server_info = initialize(self._connection, self.workspace_root, self.capabilities)
        except ConnectionClosed:
            error = self.died()
            self.close()
            raise error from None
        except RpcError:
            self.close()
            raise
        return self._connection

    def died(self) -> DaemonError:
        """A one-line error describing an unexpected end of the daemon (with its exit code)."""
        code: int | None = None
        if self._process is not None:
            try:
                code = self._process.wait(timeout=2)
            except subprocess.TimeoutExpired:
                code = None
        how = f"exit code {code}" if code is not None else "connection lost"
        from jpcli.logtail import died_message

        return DaemonError(died_message(f"daemon exited unexpectedly ({how})", self.log_file))

    def close(self, timeout: float = 5.0) -> None:
        """Shut the daemon down politely (`shutdown`, `exit`), then wait; kill it if needed."""
        process = self._process
        if process is None:
            return
        connection = self._connection
        if connection is not None and not connection.closed and process.poll() is None:
            # `exit` right behind `shutdown`, without waiting for its `null`: the daemon
            # reads them in order and exits with 0 (protocol.md section 4), one round
            # trip sooner. One already gone is handled by the kill below.
            with contextlib.suppress(ConnectionClosed):
                connection.post("shutdown")
                connection.notify("exit")
        if connection is not None:
            connection.close()
        self._reap(process, timeout)
        self._process = None

    def kill(self) -> None:
        """Stop the daemon at once (second Ctrl-C): close its stdin, then terminate."""
        process = self._process
        if process is None:
            return
        if self._connection is not None:
            self._connection.close()
        self._reap(process, 0.5)
        self._process = None

    @staticmethod
    def _reap(process: subprocess.Popen[bytes], timeout: float) -> None:
        if wait_exit(process, timeout):
            return
        process.terminate()
        try:
            process.wait(timeout=2)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def wait_exit(process: subprocess.Popen[bytes], timeout: float) -> bool:
    """Wait up to `timeout` seconds for `process` to end (and reap it); whether it did.

    Wakes when the process ends (a pidfd, on Linux) rather than at `Popen.wait`'s next
    poll, which sleeps up to 50 ms between checks: every `jp --stdio` command ends by
    waiting for its daemon.
    """
    pidfd_open = getattr(os, "pidfd_open", None)
    if pidfd_open is not None and process.poll() is None:
        try:
            fd = pidfd_open(process.pid)
        except OSError:  # a kernel without pidfds: poll below
            pass
        else:
            try:
                poller = select.poll()  # any fd number, unlike select.select
                poller.register(fd, select.POLLIN)
                ready = poller.poll(timeout * 1000)
            finally:
                os.close(fd)
            if not ready:
                return False
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        return False
    return True
