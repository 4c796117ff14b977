"""Tool processes never outlive the daemon (protocol.md section 9.4, "Tool processes").

Standard library only and outside `jpd.tools`: the daemon reaps at start-up.

Every local tool runs under `launcher.py` as the leader of a process group of its own.
Two mechanisms make sure no group survives the daemon that started it:

1. The lifeline: one pipe per daemon process. The daemon keeps the write end (never
   inherited by children) and gives the read end to every launcher. When the daemon
   ends, however it ends, the pipe reads end-of-file and each launcher kills its group.
2. The record: each running group is listed, with its start time, in
   `<data dir>/run/tools-<daemon pid>.json`. A daemon starting later kills the groups
   of any record whose daemon is gone, after checking each group leader's start time
   (so a pid the system has since reused is never signalled), then deletes the record.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import sys
from collections import OrderedDict
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

LAUNCHER = Path(__file__).with_name("tools") / "launcher.py"
RECORD_DIR = "run"
_MAX_LAUNCHED = 65536  # groups remembered for the peer rule: a long-lived daemon's bound


def start_time(pid: int) -> int | None:
    """The start time of process `pid` (clock ticks since boot), None if it is gone.

    Linux only (`/proc`); elsewhere None, so nothing is ever killed by record there.
    """
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    # Field 22 of stat(5); the split starts at field 3 (state).
    return int(fields[19]) if len(fields) > 19 and fields[0] != "Z" else None


class ToolProcesses:
    """The lifeline and the record of one daemon process's running tool groups."""

    def __init__(self, data_dir: Path) -> None:
        self._lifeline: tuple[int, int] | None = None  # made when the first tool runs
        self._record = data_dir / RECORD_DIR / f"tools-{os.getpid()}.json"
        self._groups: dict[int, int] = {}
        self._launched: OrderedDict[int, int] = OrderedDict()
        """Every group started (pgid: leader's start time), running or not, for the
        daemon's peer rule (jpd/tools/peer_rule.py): a tool's leftovers keep its ids."""

    def command(self, argv: list[str]) -> tuple[list[str], tuple[int, ...]]:
        """The command that runs `argv` under the launcher, and the fds to pass it."""
        if self._lifeline is None:
            self._lifeline = os.pipe()
        read_fd = self._lifeline[0]
        launcher = [sys.executable, "-I", "-S", str(LAUNCHER), str(read_fd)]
        return [*launcher, *argv], (read_fd,)

    def started(self, pgid: int) -> None:
        """Record a running group (its leader is the launcher, `pgid`)."""
        started = start_time(pgid)
        if started is None:
            return
        self._groups[pgid] = started
        self._launched[pgid] = started
        self._launched.move_to_end(pgid)
        while len(self._launched) > _MAX_LAUNCHED:
            self._launched.popitem(last=False)
        self._write()

    def launched(self) -> dict[int, int]:
        """The groups this daemon started, running or ended (pgid: start time)."""
        return dict(self._launched)

    def ended(self, pgid: int) -> None:
        """Forget a group that is gone."""
        if self._groups.pop(pgid, None) is not None:
            self._write()

    def _write(self) -> None:
        data = {
            "daemon": {"pid": os.getpid(), "start": start_time(os.getpid())},
            "groups": {str(pgid): start for pgid, start in self._groups.items()},
        }
        try:
            self._record.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            if not self._groups:
                self._record.unlink(missing_ok=True)
                return
            temporary = self._record.with_suffix(".tmp")
            fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as out:
                out.write(json.dumps(data))
            temporary.replace(self._record)
        except OSError as exc:  # the lifeline still protects; the record is a backstop
            log.warning("cannot record running tools in %s: %s", self._record, exc)

    def close(self) -> None:
        """Close the lifeline (launchers of groups still running kill them)."""
        if self._lifeline is None:
            return
        for fd in reversed(self._lifeline):
            with contextlib.suppress(OSError):
                os.close(fd)
        self._lifeline = None


def _alive(entry: dict[str, Any]) -> bool:
    try:
        pid, start = int(entry["pid"]), entry.get("start")
    except (KeyError, TypeError, ValueError):
        return False
    return start is not None and start_time(pid) == start


def reap_orphans(data_dir: Path) -> int:
    """Kill the tool groups recorded by daemons that are gone; returns how many."""
    killed = 0
    directory = data_dir / RECORD_DIR
    try:
        records = list(directory.glob("tools-*.json"))
    except OSError:
        return 0
    for record in records:
        try:
            data = json.loads(record.read_text())
            daemon, groups = data["daemon"], data["groups"]
        except (OSError, ValueError, KeyError, TypeError):
            with contextlib.suppress(OSError):
                record.unlink()
            continue
        if _alive(daemon) and int(daemon["pid"]) != os.getpid():
            continue  # another daemon, still running, owns these
        for pgid_text, start in groups.items():
            pgid = int(pgid_text)
            if start_time(pgid) != start:
                continue  # gone, or the pid now belongs to another process
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, signal.SIGKILL)
                killed += 1
                log.warning("killed tool process group %d left by a stopped daemon", pgid)
        with contextlib.suppress(OSError):
            record.unlink()
    return killed
