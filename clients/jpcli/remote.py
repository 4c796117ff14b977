"""`jp --remote [user@]HOST[:/path]` (or `$JP_REMOTE`): the daemon of another machine, over ssh.

`jp` runs `ssh HOST jp proxy` and speaks the daemon protocol on its stdio; `jp proxy`
(`jpcli.proxy`) bridges it to the daemon's socket there, starting that daemon when none
answers. ssh authenticates and encrypts; no port is opened anywhere.

What runs there is that machine's: its config, provider keys, data and workspace. So
this client sends neither its working directory nor its environment variables (they
describe this machine): a request's `environment` is only `{cwd: PATH}` when the remote
names a workspace (`HOST:/src/app`), else nothing, and the remote daemon uses its own
environment. Standard library only.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import subprocess
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from jpcli.handshake import DaemonError, initialize
from jpcli.rpc import Connection, ConnectionClosed, RpcError

ENV_REMOTE = "JP_REMOTE"
"""`[user@]HOST[:/path]`: every `jp` command uses that machine's daemon."""
ENV_REMOTE_JP = "JP_REMOTE_JP"
"""The `jp` command on the remote machine (default `jp`), for one not on its PATH."""
ENV_SSH = "JP_SSH"
"""The ssh program (default `ssh`)."""


@dataclass(frozen=True, slots=True)
class Remote:
    """Where the daemon runs: an ssh destination and, optionally, a workspace there."""

    host: str
    path: str | None = None

    def __str__(self) -> str:
        return f"{self.host}:{self.path}" if self.path else self.host

    def environment(self) -> dict[str, Any]:
        """A request's `environment`: the remote workspace only, never this machine's
        working directory or variables."""
        return {"cwd": self.path} if self.path else {}

    def state_key(self) -> tuple[str, str]:
        """(data dir, workspace) under which `jp` remembers the current conversation:
        the remote's, distinct from every local one."""
        return f"ssh://{self.host}", self.path or "~"


def parse_remote(spec: str) -> Remote:
    """Parse `[user@]HOST[:/path]`; raises ValueError with a message for the user.

    A destination that ssh would read as an option (`-oProxyCommand=...`) or that holds
    whitespace or control characters is refused: it comes from a flag or the environment
    and ends up on ssh's command line.
    """
    spec = spec.strip()
    host, sep, path = spec.partition(":")
    if not host:
        raise ValueError(f"expected [user@]HOST[:/path], got {spec!r}")
    if host.startswith("-"):
        raise ValueError(f"refusing remote host {host!r}: it would be read as an ssh option")
    if any(c.isspace() or ord(c) < 32 or c in "'\"`$;|&<>\\" for c in host):
        raise ValueError(f"refusing remote host {host!r}: unexpected characters")
    if sep and not path:
        raise ValueError(f"expected an absolute path after {host}:, got nothing")
    if path and not path.startswith("/"):
        raise ValueError(f"the remote workspace must be an absolute path, got {path!r}")
    if any(ord(c) < 32 for c in path):
        raise ValueError("the remote workspace path holds control characters")
    return Remote(host, os.path.normpath(path) if path else None)


def remote_from_env(environ: Mapping[str, str] | None = None) -> Remote | None:
    """The remote named by `$JP_REMOTE` (None when unset or empty)."""
    spec = (os.environ if environ is None else environ).get(ENV_REMOTE, "").strip()
    return parse_remote(spec) if spec else None


def ssh_command(
    remote: Remote, environ: Mapping[str, str] | None = None, args: Sequence[str] = ("proxy",)
) -> list[str]:
    """`ssh -T -- HOST 'jp proxy'` (or `jp ARGS`, run in the remote workspace when one is
    named): `--` ends ssh's options before the destination; the remote command is one
    shell-quoted string (ssh hands it to the remote shell)."""
    env = os.environ if environ is None else environ
    ssh = shlex.split(env.get(ENV_SSH, "").strip() or "ssh")
    remote_jp = env.get(ENV_REMOTE_JP, "").strip() or "jp"
    command = f"{remote_jp} {shlex.join(args)}"
    if tuple(args) != ("proxy",) and remote.path:
        command = f"cd {shlex.quote(remote.path)} && {command}"
    return [*ssh, "-T", "--", remote.host, command]


class RemoteDaemon:
    """An initialized connection to the daemon of another machine through `ssh ... jp proxy`.

    Closing the connection leaves the remote daemon and its turns running, as with the
    local socket; `kill` ends only the ssh process.
    """

    def __init__(
        self,
        remote: Remote,
        *,
        capabilities: Mapping[str, Any] | None = None,
        on_connect: Callable[[Connection], None] | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self.remote = remote
        self.capabilities = dict(capabilities or {})
        self.on_connect = on_connect
        self.command = ssh_command(remote, environ)
        self.server_info: dict[str, Any] = {}
        self._process: subprocess.Popen[bytes] | None = None
        self._connection: Connection | None = None

    def launch(self) -> None:
        """Start ssh now: the connection and the remote start-up overlap `jp`'s own."""
        if self._process is not None:
            return
        # Ctrl-C on the terminal reaches the whole foreground group: ssh must survive it,
        # so that `jp` can still cancel or detach the turn over the connection. An
        # ignored SIGINT is inherited through exec, and ssh keeps it ignored; ssh still
        # shares the terminal (stderr, /dev/tty) to ask for a password or a host key.
        main = threading.current_thread() is threading.main_thread()
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN) if main else None
        try:
            self._process = subprocess.Popen(
                self.command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0
            )
        except OSError as exc:
            raise DaemonError(f"cannot run {shlex.join(self.command)}: {exc}") from None
        finally:
            if main:
                signal.signal(signal.SIGINT, previous or signal.default_int_handler)

    def start(self) -> Connection:
        """Connect and run `initialize` with the remote workspace (if any) as its root.

        Raises `DaemonError` (ssh or the proxy failed) or `RpcError` (refused, e.g. the
        two machines run different versions of jp).
        """
        self.launch()
        process = self._process
        assert process is not None and process.stdin is not None and process.stdout is not None
        self._connection = Connection(process.stdout, process.stdin)
        if self.on_connect is not None:
            self.on_connect(self._connection)
        try:
            self.server_info = initialize(
                self._connection, self.remote.path or "", self.capabilities
            )
        except ConnectionClosed:
            error = self.died()
            self.kill()
            raise error from None
        except RpcError:
            self.close()
            raise
        return self._connection

    def died(self) -> DaemonError:
        """A one-line error for a connection that ended (ssh's exit code when known)."""
        code: int | None = None
        if self._process is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                code = self._process.wait(timeout=5)
        how = f"ssh exited with code {code}" if code is not None else "connection lost"
        return DaemonError(
            f"lost the connection to jpd on {self.remote.host} ({how}); "
            f"try: {shlex.join(self.command)}"
        )

    def close(self, timeout: float = 5.0) -> None:
        """Hang up: the proxy sees the end of its input and ends this one connection."""
        self._end(timeout)

    def kill(self) -> None:
        """Hang up at once (Ctrl-C): the remote turns keep running."""
        self._end(0.5)

    def wait_stopped(self) -> bool:
        """After `daemon/stop`: the remote daemon hung up on the proxy (it is stopping)."""
        return True

    def _end(self, timeout: float) -> None:
        process, self._process = self._process, None
        if process is None:
            return
        if self._connection is not None:
            self._connection.close()
        with contextlib.suppress(OSError):
            if process.stdin is not None:
                process.stdin.close()
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.terminate()
            try:
                process.wait(timeout=2)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def current_umask() -> int:
    """This process's umask (the tools create files as this shell would)."""
    mask = os.umask(0o022)  # reading it means setting it: put it straight back
    os.umask(mask)
    return mask


def request_environment(cwd: str, environ: Mapping[str, str]) -> dict[str, Any]:
    """The `environment` of a request the ACP bridge sends for a session in `cwd`: that
    workspace and the bridge's variables locally; over `$JP_REMOTE`, the remote workspace
    (`HOST:/path`, else `cwd` taken as a path there) and none of this machine's variables."""
    remote = remote_from_env(environ)
    if remote is None:
        return {"cwd": cwd, "env": dict(environ), "umask": current_umask()}
    return {"cwd": remote.path or cwd}
