"""The peer rule: who may talk to the daemon over its Unix socket (protocol.md 2.1).

A pathname Unix socket is reachable from anything that can open the path, and neither
a network namespace nor Landlock covers it: a tool process (or something it started)
that finds the socket could otherwise send `tool/call run_command` and run outside its
cage. So each connection's peer (SO_PEERCRED: the process that called `connect`) is
refused when

- it runs as another uid than the daemon;
- it is in another network or PID namespace than the daemon (a cage: bubblewrap,
  a container) — namespaces are inherited and cannot be left, so this holds for
  every descendant of a sandboxed tool, reparented or not;
- it descends from the daemon (a tool, an MCP server, a process one of them started),
  walking the parent chain up to pid 1;
- it or one of its ancestors is in the process group or session of a tool the daemon
  started (`ToolProcesses` records them), even after the tool's launcher is gone: a
  pid stays reserved while a process uses it as its group or session id, so a group
  or session id naming a launcher that has exited belongs to that tool's leftovers.

Pure logic over a `ProcReader`, so tests can describe any process tree; `LinuxProc`
reads `/proc`. Where `/proc` cannot tell (not Linux), the peer is served but not
`verified`: its environment may not select config or state paths (jpd/core/request_env.py).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

NAMESPACES = ("net", "pid")
"""The namespaces a peer must share with the daemon."""

_MAX_DEPTH = 4096  # a parent chain longer than this is a loop (pid reuse while walking)


@dataclass(frozen=True)
class ProcStat:
    """What the rule reads of one process (stat(5))."""

    pid: int
    ppid: int
    pgid: int
    sid: int
    start: int
    """Start time in clock ticks since boot: tells a process from a later one reusing its pid."""


class ProcReader(Protocol):
    """Where the rule reads processes from (`/proc`, or a test's table)."""

    def stat(self, pid: int) -> ProcStat | None:
        """The process `pid`, None when it is gone or cannot be read."""
        ...

    def namespace(self, pid: int, name: str) -> int | None:
        """The inode of the process's namespace `name`, None when it cannot be read."""
        ...


@dataclass(frozen=True)
class Peer:
    """A connected peer as SO_PEERCRED reports it."""

    pid: int
    uid: int


@dataclass(frozen=True)
class Verdict:
    """The rule's answer: `refusal` (a sentence for the user), or served and whether
    the peer was `verified` (an unsandboxed process of the user)."""

    refusal: str | None
    verified: bool


class LinuxProc:
    """`ProcReader` over `/proc`."""

    def __init__(self, root: str = "/proc") -> None:
        self._root = root
        self._own: dict[str, int | None] = {}
        """This process's namespaces, read once (it never changes them)."""

    def stat(self, pid: int) -> ProcStat | None:
        # One open, one read, one close: each call that lets go of the GIL may wait a
        # switch interval for it while the event loop is busy (a new client waits).
        try:
            fd = os.open(f"{self._root}/{pid}/stat", os.O_RDONLY | os.O_CLOEXEC)
            try:
                text = os.read(fd, 4096).decode("ascii", "replace")
            finally:
                os.close(fd)
        except OSError:
            return None
        # The command name (field 2) may hold anything, ")" included: split at the last.
        fields = text.rsplit(")", 1)[-1].split()
        try:
            ppid, pgid, sid, start = int(fields[1]), int(fields[2]), int(fields[3]), int(fields[19])
        except (IndexError, ValueError):
            return None
        return ProcStat(pid=pid, ppid=ppid, pgid=pgid, sid=sid, start=start)

    def namespace(self, pid: int, name: str) -> int | None:
        own = pid == os.getpid()
        if own and name in self._own:
            return self._own[name]
        try:
            found: int | None = os.stat(f"{self._root}/{pid}/ns/{name}").st_ino
        except OSError:
            found = None
        if own:
            self._own[name] = found
        return found

    def available(self) -> bool:
        """Whether this system's processes can be read here at all."""
        return all(self.namespace(os.getpid(), name) is not None for name in NAMESPACES)


def judge(
    peer: Peer,
    *,
    daemon_pid: int,
    daemon_uid: int,
    tools: Mapping[int, int],
    proc: ProcReader,
) -> Verdict:
    """Apply the rule. `tools` maps the pid of each tool launcher the daemon started
    (its process group and session id) to its start time."""
    if peer.uid != daemon_uid:
        return _refused(f"it runs as uid {peer.uid}, not as the daemon's user ({daemon_uid})")
    if peer.pid <= 0:
        return _refused("its process is in a PID namespace the daemon cannot see")
    if peer.pid == daemon_pid:
        return Verdict(None, verified=True)  # the daemon itself (tests serve in-process)
    for name in NAMESPACES:
        ours, theirs = proc.namespace(daemon_pid, name), proc.namespace(peer.pid, name)
        if ours is None:
            return Verdict(None, verified=False)  # nothing to compare with: not Linux
        if theirs is None:
            return _refused(f"its {name} namespace cannot be read (pid {peer.pid})")
        if theirs != ours:
            return _refused(f"it runs in another {name} namespace (a sandbox or container)")
    pid, seen = peer.pid, 0
    while pid > 1 and seen < _MAX_DEPTH:
        seen += 1
        if pid == daemon_pid:
            return _refused("it was started by the daemon (a tool or something a tool started)")
        info = proc.stat(pid)
        if info is None:
            if pid == peer.pid:
                return _refused(f"its process (pid {pid}) cannot be read")
            break  # an ancestor ended while walking: its children went to a reaper
        tool = _tool_of(info, tools, proc)
        if tool is not None:
            return _refused(f"it belongs to a tool process the daemon started (group {tool})")
        pid = info.ppid
    return Verdict(None, verified=True)


def _tool_of(info: ProcStat, tools: Mapping[int, int], proc: ProcReader) -> int | None:
    """The tool launcher whose group or session `info` is in, if any."""
    for leader in {info.pid, info.pgid, info.sid}:
        start = tools.get(leader)
        if start is None:
            continue
        if leader == info.pid:
            if info.start == start:
                return leader
            continue
        current = proc.stat(leader)
        # Gone: the id is still in use as this group or session, so by the launcher's
        # leftovers. Alive with another start time: a new process reused the number
        # after the tool's last process ended, and made its own group or session.
        if current is None or current.start == start:
            return leader
    return None


def _refused(reason: str) -> Verdict:
    return Verdict(f"jpd refuses this connection: {reason}", verified=False)
