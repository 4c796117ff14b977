"""Run one local tool: a command that reads a JSON context and prints a JSON outcome.

The tool runs in the workspace root, in a session (and process group) of its own, so
that on timeout, on cancellation and when it exits, nothing it started outlives the
call: the whole group is sent SIGTERM, then SIGKILL after a short grace. Output is
bounded: stdout to `max_output` bytes, its first and last halves with the middle counted
(`jpd.tools.output_cap`; the rest is read and dropped, so the tool never blocks on a full
pipe), stderr to `STDERR_LIMIT` bytes, logged at DEBUG only because
it may contain secrets.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shlex
import signal
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from subprocess import PIPE
from typing import Any

import anyio
import anyio.abc
import anyio.to_thread

from jpd.config.tools import CommandConfig
from jpd.process_groups import ToolProcesses
from jpd.tools.launcher import EXEC_FAILED
from jpd.tools.outcome import Failure, ToolOutcome, parse_outcome, plain_outcome
from jpd.tools.output_cap import HeadTail

logger = logging.getLogger(__name__)

STDERR_LIMIT = 64 * 1024
"""Bytes of a tool's stderr kept for the debug log."""

KILL_GRACE = 2.0
"""Seconds a process group has to exit after SIGTERM before it gets SIGKILL."""

_POLL = 0.02
"""Seconds between checks whether a signalled process group is gone."""

_SHELL = "/bin/sh"


@dataclass
class _Capture:
    """The first `limit` bytes of a stream, and a count of the bytes dropped after them."""

    limit: int
    data: bytearray = field(default_factory=bytearray)
    omitted: int = 0
    done: anyio.Event = field(default_factory=anyio.Event)

    def add(self, chunk: bytes) -> None:
        room = max(self.limit - len(self.data), 0)
        self.data += chunk[:room]
        self.omitted += max(len(chunk) - room, 0)

    def text(self) -> str:
        return self.data.decode("utf-8", errors="replace")


@dataclass
class _HeadTailCapture:
    """A tool's stdout: its first and last `limit / 2` bytes, the middle counted."""

    limit: int
    out: HeadTail = field(init=False)
    done: anyio.Event = field(default_factory=anyio.Event)

    def __post_init__(self) -> None:
        self.out = HeadTail(max(self.limit // 2, 1))

    def add(self, chunk: bytes) -> None:
        self.out.add(chunk)

    @property
    def data(self) -> bytes:
        return bytes(self.out.head + self.out.tail)

    @property
    def omitted(self) -> int:
        return self.out.left_out

    def text(self) -> str:
        return self.out.text()


def _argv(command: str | CommandConfig) -> tuple[list[str], str]:
    """The argv to execute and the program name for messages (raises `ValueError`)."""
    if isinstance(command, str):
        argv = shlex.split(command)
        if not argv:
            raise ValueError("the command is empty")
        return argv, argv[0]
    if not command.program.strip():
        raise ValueError("the command's program is empty")
    if command.shell:
        script = " ".join([command.program, *command.args])
        return [_SHELL, "-c", script], command.program.split()[0]
    return [command.program, *command.args], command.program


def _context(
    name: str,
    arguments: Mapping[str, Any],
    answers: Mapping[str, Any],
    options: Mapping[str, Any],
    root: Path,
    conversation_id: str | None,
) -> bytes:
    payload = {
        "tool": {
            "name": name,
            "arguments": dict(arguments),
            "answers": dict(answers),
            "options": dict(options),
        },
        "context": {"action": "run", "root": str(root), "conversation_id": conversation_id},
    }
    # `default=str`: options come from TOML, which has dates and times JSON lacks.
    return (json.dumps(payload, default=str) + "\n").encode()


# --- process group -----------------------------------------------------------------


def _signal_group(pgid: int, sig: int) -> bool:
    """Send `sig` to the group; False when the group no longer exists."""
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        return False
    except PermissionError:
        # macOS reports a group of zombies this way: nothing left to signal.
        return False
    return True


def _live_members(pgid: int) -> bool:
    """Whether a process of group `pgid` is still running (zombies do not count).

    Zombies stay in the group until someone reaps them, and under an init that does
    not reap orphans that is never; so on Linux /proc is asked for running members.
    """
    proc = Path("/proc")
    if not sys.platform.startswith("linux") or not proc.is_dir():
        return True
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # Fields after the command name, which is parenthesized and may contain anything.
        fields = stat[stat.rfind(")") + 2 :].split()
        if len(fields) > 2 and fields[2] == str(pgid) and fields[0] not in ("Z", "X"):
            return True
    return False


async def _group_alive(pgid: int) -> bool:
    if not _signal_group(pgid, 0):
        return False
    return await anyio.to_thread.run_sync(_live_members, pgid)


async def _wait_group_gone(pgid: int, seconds: float) -> bool:
    with anyio.move_on_after(seconds):
        # Polling: the kernel offers no event for "a process group is empty".
        while await _group_alive(pgid):  # noqa: ASYNC110
            await anyio.sleep(_POLL)
        return True
    return False


async def _terminate_group(pgid: int) -> None:
    """SIGTERM the group, SIGKILL what is left after `KILL_GRACE`. Call shielded."""
    if not await _group_alive(pgid):
        return
    _signal_group(pgid, signal.SIGTERM)
    if await _wait_group_gone(pgid, KILL_GRACE):
        return
    _signal_group(pgid, signal.SIGKILL)
    # SIGKILL cannot be ignored; this only waits for the kernel to finish the job.
    await _wait_group_gone(pgid, KILL_GRACE)


# --- I/O ---------------------------------------------------------------------------


async def _feed(stream: anyio.abc.ByteSendStream, payload: bytes) -> None:
    try:
        await stream.send(payload)
    except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
        pass  # The tool exited or closed stdin without reading it all: its choice.
    finally:
        with anyio.CancelScope(shield=True):
            with contextlib.suppress(anyio.BrokenResourceError, OSError):
                await stream.aclose()


async def _drain(stream: anyio.abc.ByteReceiveStream, capture: _Capture | _HeadTailCapture) -> None:
    try:
        async for chunk in stream:
            capture.add(chunk)
    except (anyio.BrokenResourceError, anyio.ClosedResourceError):
        pass
    finally:
        capture.done.set()


async def _communicate(
    process: anyio.abc.Process,
    payload: bytes,
    stdout: _Capture | _HeadTailCapture,
    stderr: _Capture,
    seconds: float | None,
) -> int | None:
    """Feed stdin, drain stdout and stderr; the exit status, or None after `seconds`."""
    assert process.stdin and process.stdout and process.stderr
    status: int | None = None
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(_feed, process.stdin, payload)
        tasks.start_soon(_drain, process.stdout, stdout)
        tasks.start_soon(_drain, process.stderr, stderr)
        with anyio.move_on_after(seconds):
            status = await process.wait()
        # On timeout the tool goes; after an exit, whatever it left running in its
        # group goes too. That also closes the pipes those processes held, ending the
        # reads below.
        await _terminate_group(process.pid)
        # A process that left the group (setsid) may still hold a pipe open: stop
        # waiting for it after the grace and keep what was read.
        with anyio.move_on_after(KILL_GRACE):
            await stdout.done.wait()
            await stderr.done.wait()
        tasks.cancel_scope.cancel()
    return status


def _log_stderr(name: str, stderr: _Capture) -> None:
    if not stderr.data:
        return
    dropped = f" ({stderr.omitted} more bytes dropped)" if stderr.omitted else ""
    # DEBUG only: a tool's stderr may contain secrets.
    logger.debug("tool %r stderr%s:\n%s", name, dropped, stderr.text())


async def run_local_tool(
    *,
    name: str,
    command: str | CommandConfig,
    arguments: Mapping[str, Any],
    answers: Mapping[str, Any],
    options: Mapping[str, Any],
    root: Path,
    conversation_id: str | None,
    timeout: float | None,  # noqa: ASYNC109 (the callers' per-tool setting, not a deadline)
    max_output: int = 1_000_000,
    env: Mapping[str, str] | None = None,
    processes: ToolProcesses | None = None,
    umask: int | None = None,
) -> ToolOutcome:
    """Run the local tool `name` once and return its outcome.

    `command` is a command line (split like a shell would, not run by one) or a
    `CommandConfig` (with `shell = true`, program and args are joined and run by
    `/bin/sh -c`). The JSON context goes to stdin; the process runs in `root` with
    `env` as its whole environment (None: the daemon's). Every failure to run the
    tool (missing program, timeout after `timeout` seconds, crash, malformed output)
    comes back as a `Failure` the model can read. Cancelling the calling task kills
    the tool's process group before the cancellation propagates. With `processes`,
    the tool runs under the launcher, so its group also dies with the daemon.
    """
    try:
        argv, program = _argv(command)
    except ValueError as error:
        return Failure(message=f"tool {name!r}: invalid command: {error}")
    workdir = await anyio.Path(root).absolute()
    root = Path(workdir)
    if not await workdir.is_dir():
        return Failure(message=f"tool {name!r}: working directory does not exist: {root}")
    payload = _context(name, arguments, answers, options, root, conversation_id)
    if umask is not None:
        # The client's umask, set by a shell that then becomes the tool.
        argv = ["/bin/sh", "-c", f'umask {umask:04o} && exec "$@"', "sh", *argv]
    launch, pass_fds = processes.command(argv) if processes is not None else (argv, ())

    try:
        process = await anyio.open_process(
            launch,
            stdin=PIPE,
            stdout=PIPE,
            stderr=PIPE,
            cwd=root,
            env=dict(env) if env is not None else None,
            start_new_session=True,
            pass_fds=pass_fds,
        )
    except FileNotFoundError:
        return Failure(message=f"tool {name!r}: command not found: {program}")
    except PermissionError:
        return Failure(message=f"tool {name!r}: permission denied: {program}")
    except OSError as error:
        return Failure(message=f"tool {name!r}: cannot run {program}: {error.strerror or error}")

    stdout = _HeadTailCapture(limit=max_output)
    stderr = _Capture(limit=STDERR_LIMIT)
    if processes is not None:
        processes.started(process.pid)
    try:
        status = await _communicate(process, payload, stdout, stderr, timeout)
    finally:
        # A no-op after `_communicate` finished; on error and on cancellation, this
        # is the cleanup, shielded so a cancelled caller still waits until no process
        # of the tool is left.
        with anyio.CancelScope(shield=True):
            await _terminate_group(process.pid)
            await process.aclose()
            if processes is not None:
                processes.ended(process.pid)
            _log_stderr(name, stderr)

    if status is None:
        return Failure(message=f"tool {name!r} timed out after {timeout or 0:g}s")
    if status in (126, 127) and stderr.text().startswith(EXEC_FAILED):
        problem = "command not found" if status == 127 else "permission denied"
        return Failure(message=f"tool {name!r}: {problem}: {program}")
    # Through a shell (its own, or the umask wrapper), exec failures are 126/127 too.
    shell = command_is_shell(command) or umask is not None
    if shell and status in (126, 127) and not stdout.data:
        problem = "command not found" if status == 127 else "permission denied"
        return Failure(message=f"tool {name!r}: {problem}: {program}")
    if stdout.omitted:
        # Cut output is no longer one JSON object; judge it by the exit status alone.
        return plain_outcome(stdout.text(), status, name=name)
    return parse_outcome(stdout.text(), status, name=name)


def command_is_shell(command: str | CommandConfig) -> bool:
    """Whether `command` runs through `/bin/sh -c`."""
    return isinstance(command, CommandConfig) and command.shell
