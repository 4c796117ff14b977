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

A program that cannot be executed makes the launcher print `EXEC_FAILED` and the
reason on stderr and exit 127 (not found) or 126 (any other reason).
"""

from __future__ import annotations

import errno
import os
import signal
import sys
import threading

EXEC_FAILED = "jpd-launcher: cannot execute:"


def _watch_lifeline(fd: int) -> None:
    while True:
        try:
            data = os.read(fd, 1)
        except InterruptedError:
            continue
        except OSError:
            data = b""
        if not data:
            os.killpg(0, signal.SIGKILL)
            return


def main(argv: list[str]) -> None:
    """Launch `argv[1:]` watched by lifeline fd `argv[0]`; never returns."""
    lifeline = int(argv[0])
    command = argv[1:]
    os.set_inheritable(lifeline, False)
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
    for stop in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(stop, signal.SIG_IGN)
    threading.Thread(target=_watch_lifeline, args=(lifeline,), daemon=True).start()
    while True:
        try:
            _, status = os.waitpid(pid, 0)
            break
        except InterruptedError:
            continue
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
