"""The sandbox of `run_command`: its options and the command that applies them.

Two cages (`options.cage`):

- `namespaces`: bubblewrap's mount, PID, IPC and network namespaces
  (`namespace_launcher.py`, the file system view of `cage_policy.py`), then Landlock,
  seccomp and rlimits inside (`sandbox_exec.py`);
- `landlock`: where namespaces are unavailable, Landlock (writes, and signals and
  abstract sockets scoped to the call), seccomp (no Unix sockets, no network, no chmod,
  chown, utime or xattr changes) and rlimits; the launcher, a child subreaper, kills what
  the command leaves behind. Landlock refuses reads of the secrets instead of hiding
  them; `.git`/`.jp` stay writable there.

`auto` (the default) takes `namespaces` when bubblewrap can build them and `landlock`
otherwise, and says so in the result. The confinement itself happens in the child (a
script, so the daemon never calls unshare, Landlock or seccomp on itself). When the
kernel cannot provide what the options ask, the script refuses and the command never
runs.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, get_args

SandboxMode = Literal["workspace-write", "read-only", "off"]
CageOption = Literal["auto", "namespaces", "landlock"]
SANDBOX_EXEC = Path(__file__).with_name("sandbox_exec.py")
REFUSED = "jpd-sandbox: cannot sandbox:"
"""Printed on stderr by `sandbox_exec.py` (exit 125) when it cannot confine."""
BWRAP_FAILED = "bwrap:"
"""How bubblewrap's own errors (exit 1) start."""

DEFAULT_MAX_PROCESSES = 1024
DEFAULT_MAX_FILE_SIZE = 8 << 30


class PolicyError(ValueError):
    """The tool's sandbox options are invalid."""


class CageUnavailable(Exception):
    """The cage the options ask for cannot be built here; the message says why and
    which setting loosens it."""


def _positive_int(options: Mapping[str, Any], key: str, default: int) -> int:
    value = options.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise PolicyError(f"options.{key} must be a whole number >= 0, not {value!r}")
    return value


@dataclass(frozen=True)
class SandboxPolicy:
    mode: SandboxMode = "workspace-write"
    network: bool = False
    cage: CageOption = "auto"
    max_processes: int = DEFAULT_MAX_PROCESSES
    """Processes the command may add to the user's (0: no limit)."""
    max_file_size: int = DEFAULT_MAX_FILE_SIZE
    """Bytes of the largest file the command may write (0: no limit)."""

    @classmethod
    def from_options(cls, options: Mapping[str, Any]) -> SandboxPolicy:
        """`conversation.tools.run_command.options.{sandbox,network,cage,...}`."""
        mode = options.get("sandbox", "workspace-write")
        if mode not in get_args(SandboxMode):
            allowed = ", ".join(get_args(SandboxMode))
            raise PolicyError(f"options.sandbox must be one of {allowed}, not {mode!r}")
        network = options.get("network", False)
        if not isinstance(network, bool):
            raise PolicyError(f"options.network must be true or false, not {network!r}")
        cage = options.get("cage", "auto")
        if cage not in get_args(CageOption):
            allowed = ", ".join(get_args(CageOption))
            raise PolicyError(f"options.cage must be one of {allowed}, not {cage!r}")
        return cls(
            mode=mode,
            network=network,
            cage=cage,
            max_processes=_positive_int(options, "max_processes", DEFAULT_MAX_PROCESSES),
            max_file_size=_positive_int(options, "max_file_size", DEFAULT_MAX_FILE_SIZE),
        )

    @property
    def unconfined(self) -> bool:
        return self.mode == "off" and self.network


@dataclass(frozen=True)
class Launch:
    argv: list[str]
    level: str
    """`namespaces`, `landlock` or `none`."""
    note: str = ""
    """Said after the result when the cage is lighter than the full one."""


def prepare(
    policy: SandboxPolicy,
    argv: list[str],
    workspace: Path,
    roots: Sequence[str],
    tmpdir: Path,
    env: Mapping[str, str] | None = None,
) -> Launch:
    """The command running `argv` in the cage of `policy` (blocking: run it in a thread).

    `roots` are the real paths of the writable roots, the workspace first. Raises
    `CageUnavailable` when the cage asked for cannot be built.
    """
    if policy.unconfined:
        return Launch(argv, "none")
    if not os.path.isdir(workspace):
        raise NotADirectoryError(str(workspace))
    # An extra root that is gone (a client's stale additional root) is left out.
    roots = [path for index, path in enumerate(roots) if index == 0 or os.path.isdir(path)]
    from jpd.tools import cage_policy as cp
    from jpd.tools import namespace_launcher as ns

    level: cp.CageLevel = "landlock"
    problem = None if policy.cage == "landlock" else ns.unavailable()
    if policy.cage != "landlock" and problem is None:
        level = "namespaces"
    elif policy.cage == "namespaces":
        raise CageUnavailable(
            f'{problem}. Set conversation.tools.run_command.options.cage = "landlock"'
            " for the Landlock and seccomp cage, or let bubblewrap create user namespaces"
            ' (see the README, "Sandbox")'
        )
    writable = [] if policy.mode == "read-only" else list(roots)
    protected = cp.protected_paths(writable) if policy.mode != "off" else []
    uid = os.getuid()
    nproc = 0
    if policy.max_processes and uid != 0:  # root is not held by RLIMIT_NPROC anyway
        nproc = cp.user_processes(uid) + policy.max_processes
    hidden = cp.secret_paths(
        os.environ if env is None else env,
        os.path.expanduser("~"),
        private_tmp=level == "namespaces",
    )
    cage = cp.CagePolicy(
        mode=policy.mode,
        network=policy.network,
        level=level,
        workdir=str(workspace),
        writable=(*writable, str(tmpdir)),
        roots=tuple(roots),
        hidden=tuple(hidden),
        protected=tuple(protected),
        max_processes=nproc,
        max_file_size=policy.max_file_size,
    )
    inner = ns.exec_command(SANDBOX_EXEC, cage, argv)
    if level == "namespaces":
        return Launch(ns.bwrap_argv(cage, inner), level)
    note = ""
    if policy.cage == "auto":
        note = (
            f"note: ran in the lighter landlock cage ({problem}): .git/.jp stay writable"
            ' there; see the README, "Sandbox"'
        )
    return Launch(inner, level, note)
