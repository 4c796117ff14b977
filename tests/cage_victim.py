"""An unprivileged victim for the cage tests (issue 35): a real user made with
`useradd`, with a home, an ssh key, a runtime dir for jpd's socket and a workspace that
is a git repository with a trusted `.jp/config.toml`. Needs root to make.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

USER = "jpdcage"
SYSTEM_PYTHON = "/usr/bin/python3"
PATH = "/usr/local/bin:/usr/bin:/bin"

NEEDS_VICTIM = [
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux kernel cage"),
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root to make the unprivileged victim"),
    pytest.mark.skipif(not Path(SYSTEM_PYTHON).exists(), reason="no system python3"),
]


@dataclass
class Victim:
    uid: int
    gid: int
    home: Path
    workspace: Path
    runtime: Path

    def env(self) -> dict[str, str]:
        return {
            "HOME": str(self.home),
            "XDG_RUNTIME_DIR": str(self.runtime),
            "JP_SOCKET": str(self.runtime / "jp" / "jpd.sock"),
            "JP_DATA_DIR": str(self.home / ".local" / "share" / "jp"),
            "PATH": PATH,
        }


def _user() -> pwd.struct_passwd:
    try:
        return pwd.getpwnam(USER)
    except KeyError:
        if shutil.which("useradd") is None:
            pytest.skip("useradd is not available to make an unprivileged user")
        subprocess.run(["useradd", "--create-home", USER], check=True)
        return pwd.getpwnam(USER)


@pytest.fixture
def victim(tmp_path: Path) -> Iterator[Victim]:
    """A fresh home for the victim user, removed afterwards."""
    user = _user()
    home = Path(user.pw_dir) / f"t-{tmp_path.name}"
    shutil.rmtree(home, ignore_errors=True)
    runtime = home / ".run"
    data = home / ".local" / "share" / "jp" / "run"  # the record of the test's own launcher
    for folder in (home, home / ".ssh", home / "ws", home / "ws" / ".git" / "hooks", runtime, data):
        folder.mkdir(parents=True, exist_ok=True)
    (home / ".ssh" / "id_ed25519").write_text("PRIVATE KEY\n")
    (home / ".bashrc").write_text("# mine\n")
    (home / "ws" / ".git" / "config").write_text("[core]\n")
    (home / "ws" / ".jp").mkdir()
    (home / "ws" / ".jp" / "config.toml").write_text("# trusted\n")
    (runtime / "jp").mkdir()
    for path in [home, *home.rglob("*")]:
        os.lchown(path, user.pw_uid, user.pw_gid)
    Path(user.pw_dir).chmod(0o755)
    home.chmod(0o700)
    (home / ".ssh").chmod(0o700)
    (home / ".ssh" / "id_ed25519").chmod(0o600)
    runtime.chmod(0o700)
    (runtime / "jp").chmod(0o700)
    yield Victim(user.pw_uid, user.pw_gid, home, home / "ws", runtime)
    shutil.rmtree(home, ignore_errors=True)


def survivors(token: str) -> list[int]:
    """Host pids of live processes whose command line holds `token` (killed, so a failing
    test leaves none running)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if token.encode() in (entry / "cmdline").read_bytes():
                    state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
                    if state not in ("Z", "X"):
                        found.append(int(entry.name))
            except OSError:
                continue
    for pid in found:
        os.kill(pid, 9)
    return found


DAEMONIZE = """import os, sys, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        time.sleep(600)
    os._exit(0)
print("started")
"""
