"""What a caged command may see and change (protocol.md, "run_command", Sandbox).

The cage shows the whole file system read-only, with these exceptions:

- writable: the workspace, the tool's extra roots and its private temp dir;
- read-only again inside them: `.git/` and `.jp/` of each writable root, so a command
  cannot plant a hook, a `core.fsmonitor`, a pager or a config the daemon or the user's
  own `git` would later run;
- hidden (an empty folder or /dev/null in their place): the user's credentials
  (`~/.ssh`, `~/.gnupg`, `~/.aws`, ...), jpd's config, state, data, log and socket
  folders, and `$XDG_RUNTIME_DIR` (agent, bus and jpd sockets).

Only paths that exist are listed: a mount needs its target, and what does not exist
holds no secret.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

import platformdirs

CageLevel = Literal["namespaces", "landlock"]

SECRETS = (
    ".ssh",
    ".gnupg",
    ".aws",
    ".azure",
    ".kube",
    ".docker",
    ".password-store",
    ".config/jp",
    ".config/gh",
    ".config/gcloud",
    ".netrc",
    ".git-credentials",
    ".pypirc",
)
"""Beneath `$HOME`: what holds keys, tokens or jpd's own settings."""

PROTECTED = (".git", ".jp")
"""Beneath each writable root: read-only inside the cage."""

PRIVATE_TMP = "/tmp"
PRIVATE_TMPS = (PRIVATE_TMP, "/var/tmp")
"""Shared, world-writable folders: an empty tmpfs of the cage's own in their place."""


@dataclass(frozen=True)
class CagePolicy:
    """The cage of one call: what it may write, what it may not see, its limits."""

    mode: str
    """`workspace-write`, `read-only` or `off` (SandboxPolicy.mode)."""
    network: bool
    level: CageLevel
    workdir: str
    writable: tuple[str, ...]
    """Real paths: the workspace and extra roots (none in `read-only`), then the temp dir."""
    roots: tuple[str, ...] = ()
    """Real paths of the workspace and extra roots: visible even under the private /tmp."""
    hidden: tuple[str, ...] = ()
    protected: tuple[str, ...] = ()
    max_processes: int = 0
    """RLIMIT_NPROC to set (0: leave it)."""
    max_file_size: int = 0
    """RLIMIT_FSIZE to set (0: leave it)."""

    def exec_options(self) -> list[str]:
        """The `KEY=VALUE` options of `sandbox_exec.py` for this cage."""
        options = [f"mode={self.mode}", f"level={self.level}", f"net={int(self.network)}"]
        writable = list(self.writable)
        if self.level == "namespaces":
            # Private to the cage there. /tmp is private too (its sockets and files are
            # out of sight), but writes stay in $TMPDIR, as in the landlock cage.
            writable.append("/dev/shm")
        options += [f"write={path}" for path in writable]
        if self.level == "landlock" and self.mode != "off":
            # No mounts to hide them: Landlock refuses to read them instead.
            options += [f"hide={path}" for path in self.hidden]
        options += [f"nproc={self.max_processes}", f"fsize={self.max_file_size}"]
        return options


def inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def _existing(paths: Iterable[str]) -> list[str]:
    found: list[str] = []
    for path in paths:
        if not path or not os.path.isabs(path):
            continue
        real = os.path.realpath(path)
        if os.path.lexists(real) and real != "/" and real not in found:
            found.append(real)
    return found


def secret_paths(env: Mapping[str, str], home: str, *, private_tmp: bool = True) -> list[str]:
    """The existing paths a cage hides, for a daemon with environment `env` (without
    those the cage's private /tmp covers already, when it has one)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # platformdirs' XDG_RUNTIME_DIR fallback notice
        runtime = platformdirs.user_runtime_dir("jp")
        defaults = [
            platformdirs.user_config_dir("jp"),
            platformdirs.user_data_dir("jp"),
            platformdirs.user_state_dir("jp"),
            platformdirs.user_log_dir("jp"),
        ]
    candidates = [os.path.join(home, name) for name in SECRETS] + defaults
    candidates += [env.get(name, "") for name in ("JP_DATA_DIR", "JP_STATE_DIR", "JP_LOG_DIR")]
    candidates += [env.get("JP_CONFIG", "")]
    socket = env.get("JP_SOCKET", "").strip()
    candidates += [os.path.dirname(socket) if socket else runtime, env.get("XDG_RUNTIME_DIR", "")]
    # The private /tmp already hides what is below it.
    found = _existing(candidates)
    if not private_tmp:
        return found
    return [path for path in found if not any(inside(path, tmp) for tmp in PRIVATE_TMPS)]


def protected_paths(roots: Iterable[str]) -> list[str]:
    """`.git` and `.jp` of each writable root (what a symlink there points to, when that
    lies in a writable root: the link itself cannot be mounted over)."""
    roots = list(roots)
    found = []
    for root in roots:
        for name in PROTECTED:
            path = os.path.join(root, name)
            if not os.path.lexists(path):
                continue
            real = os.path.realpath(path)
            if any(inside(real, other) for other in roots) and os.path.exists(real):
                found.append(real)
    return list(dict.fromkeys(found))


def user_processes(uid: int) -> int:
    """How many processes `uid` runs now (RLIMIT_NPROC counts them all, not just ours)."""
    count = 0
    try:
        entries = os.scandir("/proc")
    except OSError:
        return 0
    with entries:
        for entry in entries:
            if entry.name.isdigit():
                try:
                    if entry.stat().st_uid == uid:
                        count += 1
                except OSError:
                    continue
    return count
