"""Runs one tool and takes its whole process group down when the daemon dies.

Run as a script, never imported by the daemon: `python -I -S launcher.py FD ARGV...`
(standard library only, so it starts in milliseconds). FD is the read end of the
daemon's lifeline pipe, whose write end only the daemon holds. The launcher is the
leader of the tool's session and process group (the daemon starts it with
`start_new_session`); it forks the tool into that group and then waits for whichever
comes first:

- the tool exits: the launcher exits the same way (same code, or the same signal);
- the lifeline reads end-of-file, which happens however the daemon ended (exit,
  crash, SIGKILL): the launcher kills the whole group, itself included.

The launcher is also a child subreaper: whatever the tool starts and orphans (a
`setsid` child, a double fork) becomes the launcher's child rather than init's, and
the launcher kills it when the tool exits, when the lifeline ends, and (after a
grace) when it is asked to stop (SIGTERM): nothing the tool started outlives the call.

A program that cannot be executed makes the launcher print `EXEC_FAILED` and the
reason on stderr and exit 127 (not found) or 126 (any other reason).
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import signal
import sys
import threading
import time

EXEC_FAILED = "jpd-launcher: cannot execute:"
STOP_GRACE = 1.5
"""Seconds the tool has after SIGTERM before the launcher kills what it started (the
daemon's own SIGKILL of the group comes later)."""

_PR_SET_CHILD_SUBREAPER = 36


def _children() -> list[int]:
    """The launcher's children that are not yet dead (zombies left out)."""
    me = str(os.getpid())
    found = []
    try:
        names = os.listdir("/proc")
    except OSError:  # no /proc (not Linux): only the process group is signalled
        return []
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[1] == me and fields[0] not in ("Z", "X"):
            found.append(int(name))
    return found


def kill_descendants() -> None:
    """SIGKILL every live descendant. A killed process's children are reparented to the
    launcher before it dies, so the loop ends when none is left (or, for a process stuck
    in the kernel, after a few seconds)."""
    deadline = time.monotonic() + 5
    quiet = 0
    while time.monotonic() < deadline:
        victims = _children()
        if not victims:
            # An orphan is reparented here only once its parent has fully exited: look
            # again shortly before trusting an empty scan.
            quiet += 1
            if quiet >= 3:
                return
            time.sleep(0.01)
            continue
        quiet = 0
        for pid in victims:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.005)


def _watch_lifeline(fd: int) -> None:
    while True:
        try:
            data = os.read(fd, 1)
        except InterruptedError:
            continue
        except OSError:
            data = b""
        if not data:
            kill_descendants()
            os.killpg(0, signal.SIGKILL)
            return


def _stop_later(number: int, frame: object) -> None:
    threading.Timer(STOP_GRACE, kill_descendants).start()


def main(argv: list[str]) -> None:
    """Launch `argv[1:]` watched by lifeline fd `argv[0]`; never returns."""
    lifeline = int(argv[0])
    command = argv[1:]
    os.set_inheritable(lifeline, False)
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)  # best effort: Linux 3.4+
    pid = os.fork()
    if pid == 0:
        try:
            os.execvp(command[0], command)
        except OSError as exc:
            sys.stderr.write(f"{EXEC_FAILED} {command[0]}: {exc.strerror}\n")
            sys.stderr.flush()
            os._exit(127 if exc.errno == errno.ENOENT else 126)
    # The daemon stops a tool by signalling the group: the tool decides how to end,
    # and the launcher reports how it did.
    for stop in (signal.SIGINT, signal.SIGHUP):
        signal.signal(stop, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, _stop_later)
    threading.Thread(target=_watch_lifeline, args=(lifeline,), daemon=True).start()
    while True:
        try:
            _, status = os.waitpid(pid, 0)
            break
        except InterruptedError:
            continue
    kill_descendants()
    if os.WIFSIGNALED(status):
        # Die of the same signal, so the daemon reads the tool's own end.
        number = os.WTERMSIG(status)
        if number not in (signal.SIGKILL, signal.SIGSTOP):
            signal.signal(number, signal.SIG_DFL)
        os.kill(os.getpid(), number)
        os._exit(128 + number)
    os._exit(os.waitstatus_to_exitcode(status))


if __name__ == "__main__":
    main(sys.argv[1:])
