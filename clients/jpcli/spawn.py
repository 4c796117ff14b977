"""Spawning a private `jpd` on stdio, as early as `jp` can (standard library only).

A private daemon's start-up (its imports) is most of a `jp --stdio query`. `jp` spawns
it before parsing its arguments or loading the rest of itself, so the daemon boots on
one core while `jp` gets ready on the other; the command adopts the running process
(`jpcli.stdio_daemon.StdioDaemon`). Only modules `jp` needs anyway are imported here.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence

from jpcli import __version__, paths

EARLY_COMMANDS = frozenset({"query", "q", "chat"})
"""Commands whose private daemon is spawned before the arguments are parsed."""


def daemon_command(environ: Mapping[str, str] | None = None) -> list[str]:
    """The command of a private stdio daemon: `$JPD_COMMAND` (shell-split) or `python -m jpd`."""
    env = os.environ if environ is None else environ
    override = env.get("JPD_COMMAND", "").strip()
    if override:
        import shlex

        return shlex.split(override)
    return [sys.executable, "-m", "jpd"]


def log_path(environ: Mapping[str, str] | None = None) -> str:
    """The daemon log: `$JP_LOG_DIR/jpd.log`, else `jpd.log` in the user log dir."""
    return paths.log_file(os.environ if environ is None else environ)


def open_daemon_log(log_file: str | os.PathLike[str], command: Sequence[str]) -> int:
    """Open the daemon's log for appending (a header line names the command), as an fd
    for a child's stdout/stderr; `subprocess.DEVNULL` when it cannot be opened."""
    try:
        os.makedirs(os.path.dirname(log_file) or ".", mode=0o700, exist_ok=True)
        fd = os.open(log_file, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    except OSError:
        return subprocess.DEVNULL  # logging is best effort; never fail a query over it
    import shlex

    stamp = time.strftime("%Y-%m-%dT%H:%M:%S")
    with contextlib.suppress(OSError):
        os.write(fd, f"--- {stamp} jp {__version__}: {shlex.join(command)}\n".encode())
    return fd


def spawn_daemon(
    command: Sequence[str], cwd: str, log_file: str | os.PathLike[str]
) -> subprocess.Popen[bytes]:
    """Start the daemon with pipes on its stdin/stdout and its stderr in `log_file`.

    Raises `OSError` if it cannot be spawned.
    """
    stderr = open_daemon_log(log_file, command)
    try:
        # A new session keeps the terminal's Ctrl-C away from the daemon: `jp` turns
        # Ctrl-C into `turn/cancel` and then shuts the daemon down itself.
        return subprocess.Popen(
            list(command),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            cwd=cwd,
            start_new_session=True,
        )
    finally:
        if stderr is not subprocess.DEVNULL:
            with contextlib.suppress(OSError):
                os.close(stderr)


def wants_early_daemon(argv: Sequence[str], environ: Mapping[str, str]) -> bool:
    """Whether `argv` surely runs one of `EARLY_COMMANDS` on a private daemon.

    Conservative: any option before the command other than `--stdio`, or a help or
    version flag anywhere, leaves the spawn to the command (after parsing).
    """
    private = bool(environ.get("JPD_COMMAND", "").strip())
    for index, arg in enumerate(argv):
        if arg == "--stdio":
            private = True
            continue
        if arg.startswith("-"):
            return False
        rest = argv[index + 1 :]
        helped = any(a in ("-h", "--help", "--version") for a in rest)
        return private and arg in EARLY_COMMANDS and not helped
    return False


def launch_early(argv: Sequence[str]) -> subprocess.Popen[bytes] | None:
    """Spawn the private daemon now if `argv` will surely need it (see above); `None`
    otherwise or when it cannot be spawned (the command then reports why)."""
    if not wants_early_daemon(argv, os.environ):
        return None
    try:
        return spawn_daemon(daemon_command(), os.getcwd(), log_path())
    except OSError:
        return None  # the command spawns it again and reports the error


def discard(process: subprocess.Popen[bytes]) -> None:
    """Stop an early daemon the command did not use (e.g. a usage error): closing its
    stdin ends it; kill it if it lingers."""
    for stream in (process.stdin, process.stdout):
        if stream is not None:
            with contextlib.suppress(OSError):
                stream.close()
    try:
        process.wait(timeout=2)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
