"""Where the daemon's socket and log live, computed as `jpd` computes them.

`jpd` uses `platformdirs`; importing it costs `jp` tens of milliseconds on every run,
so on Linux this module applies the same rules with the standard library
(`tests/unit/test_jp_paths.py` compares every path it computes with platformdirs and
with the daemon, under each XDG setup). Other platforms import `platformdirs` lazily.
"""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import Mapping

APP = "jp"
SOCKET_NAME = "jpd.sock"
LOG_NAME = "jpd.log"
_PRIVATE = 0o700


def socket_path(env: Mapping[str, str]) -> str:
    """`$JP_SOCKET`, else `<user runtime dir>/jp/jpd.sock` (as `jpd --listen` uses); a
    `$JP_DATA_DIR` other than the default has a daemon of its own: `jpd-<hash>.sock`."""
    override = env.get("JP_SOCKET", "").strip()
    if override:
        return override
    name = SOCKET_NAME
    explicit = env.get("JP_DATA_DIR", "").strip()
    if explicit:
        path = os.path.abspath(os.path.expanduser(explicit))
        if path != os.path.abspath(default_data_dir(env)):
            import hashlib

            name = f"jpd-{hashlib.sha256(path.encode()).hexdigest()[:12]}.sock"
    return os.path.join(runtime_dir(env), name)


def data_dir(env: Mapping[str, str]) -> str:
    """`$JP_DATA_DIR` (absolute), else the user data dir (as `jpd` uses)."""
    explicit = env.get("JP_DATA_DIR", "").strip()
    if explicit:
        return os.path.abspath(os.path.expanduser(explicit))
    return default_data_dir(env)


def default_data_dir(env: Mapping[str, str]) -> str:
    """`platformdirs.user_data_dir("jp")`: `<XDG_DATA_HOME or ~/.local/share>/jp`."""
    if not sys.platform.startswith("linux"):
        return _platformdirs("user_data_dir")
    data = env.get("XDG_DATA_HOME", "")
    if not os.path.isabs(data):
        data = os.path.expanduser("~/.local/share")
    return os.path.join(data, APP)


def log_file(env: Mapping[str, str]) -> str:
    """`$JP_LOG_DIR/jpd.log`, else `jpd.log` in the user log dir (as `jpd --listen` uses)."""
    directory = env.get("JP_LOG_DIR") or log_dir(env)
    return os.path.join(directory, LOG_NAME)


def runtime_dir(env: Mapping[str, str]) -> str:
    """`platformdirs.user_runtime_dir("jp")`."""
    if not sys.platform.startswith("linux"):
        return _platformdirs("user_runtime_dir")
    xdg = env.get("XDG_RUNTIME_DIR", "")
    # An XDG_RUNTIME_DIR that another user could control is ignored, as platformdirs does.
    if os.path.isabs(xdg) and not (_dir_problem(xdg, missing_ok=True) or _parent_problem(xdg)):
        return os.path.join(xdg, APP)
    default = f"/run/user/{os.geteuid()}"
    if not _dir_problem(default, missing_ok=False):
        return os.path.join(default, APP)
    import tempfile  # rarely needed: not worth its import on every run

    return os.path.join(tempfile.gettempdir(), f"runtime-{os.geteuid()}", APP)


def log_dir(env: Mapping[str, str]) -> str:
    """`platformdirs.user_log_dir("jp")`: `<XDG_STATE_HOME or ~/.local/state>/jp/log`."""
    if not sys.platform.startswith("linux"):
        return _platformdirs("user_log_dir")
    state = env.get("XDG_STATE_HOME", "")
    if not os.path.isabs(state):
        state = os.path.expanduser("~/.local/state")
    return os.path.join(state, APP, "log")


def _dir_problem(path: str, *, missing_ok: bool) -> bool:
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return not missing_ok
    except OSError:
        return True
    return (
        stat.S_ISLNK(info.st_mode)
        or not stat.S_ISDIR(info.st_mode)
        or info.st_uid != os.geteuid()
        or info.st_mode & 0o777 != _PRIVATE
    )


def _parent_problem(path: str) -> bool:
    """A parent writable by every user (without the sticky bit), or owned by another
    user below a shared directory, could be replaced."""
    parents: list[str] = []
    current = os.path.dirname(os.path.normpath(path))
    while True:
        parents.append(current)
        parent = os.path.dirname(current)
        if parent == current:
            break
        current = parent
    in_shared = False
    for parent in reversed(parents):
        try:
            if in_shared and os.lstat(parent).st_uid not in (0, os.geteuid()):
                return True
            mode = os.stat(parent).st_mode
        except OSError:
            return False
        in_shared = bool(mode & stat.S_IWOTH)
        if in_shared and not mode & stat.S_ISVTX:
            return True
    return False


def _platformdirs(name: str) -> str:
    import warnings

    import platformdirs

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return str(getattr(platformdirs, name)(APP))


def pid_file(socket: str) -> str:
    """The daemon's pid file beside its socket (`jpd.sock` -> `jpd.pid`), as `jpd` names it."""
    root, ext = os.path.splitext(socket)
    if len(ext) > 1 and ext != ".pid" and os.path.basename(root):
        return root + ".pid"
    return socket + ".pid"
