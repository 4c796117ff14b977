"""A real Postgres 15 for tests: initdb and pg_ctl in a temporary directory.

The server refuses to run as root, so when the tests run as root (CI) it runs as the
`postgres` user (`runuser`), in a directory that user owns. It listens on a free
loopback port and on a Unix socket directory, and is stopped by `stop`.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

BIN_DIRS = [Path("/usr/lib/postgresql/15/bin"), Path("/usr/lib/postgresql/16/bin")]
RUN_AS = "postgres"


def find_bin() -> Path | None:
    """The directory with `initdb` and `pg_ctl`, or None."""
    for directory in BIN_DIRS:
        if (directory / "initdb").is_file() and (directory / "pg_ctl").is_file():
            return directory
    found = shutil.which("pg_ctl")
    return Path(found).parent if found and shutil.which("initdb") else None


def free_port() -> int:
    with contextlib.closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class PgServer:
    """One throwaway cluster; `url` (TCP) and `socket_url` (Unix socket) reach it."""

    def __init__(self, bindir: Path) -> None:
        self.bindir = bindir
        self.base = Path(tempfile.mkdtemp(prefix="jpd-pg-"))
        self.data = self.base / "data"
        self.sockets = self.base / "sock"
        self.sockets.mkdir()
        self.port = free_port()
        self._user: str | None = None
        if os.geteuid() == 0:
            try:
                entry = pwd.getpwnam(RUN_AS)
            except KeyError:
                raise RuntimeError(f"running as root and there is no {RUN_AS!r} user") from None
            self._user = RUN_AS
            for path in (self.base, self.sockets):
                os.chown(path, entry.pw_uid, entry.pw_gid)
            os.chmod(self.base, 0o755)

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    @property
    def socket_url(self) -> str:
        return f"postgresql://postgres@/postgres?host={self.sockets}&port={self.port}"

    def _cmd(self, *args: str) -> list[str]:
        return ["runuser", "-u", self._user, "--", *args] if self._user else list(args)

    def _run(self, *args: str) -> None:
        subprocess.run(
            self._cmd(*args),
            check=True,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=120,
        )

    def init(self) -> None:
        self._run(
            str(self.bindir / "initdb"),
            "-D", str(self.data),
            "-U", "postgres",
            "--auth=trust",
            "--no-sync",
            "-E", "UTF8",
        )  # fmt: skip

    def start(self) -> None:
        options = (
            f"-p {self.port} -k {self.sockets} -c listen_addresses=127.0.0.1 "
            "-c fsync=off -c full_page_writes=off -c max_connections=100"
        )
        self._run(
            str(self.bindir / "pg_ctl"),
            "-D", str(self.data),
            "-o", options,
            "-l", str(self.base / "server.log"),
            "-w", "-t", "60",
            "start",
        )  # fmt: skip

    def stop(self, mode: str = "fast") -> None:
        with contextlib.suppress(subprocess.SubprocessError):
            self._run(str(self.bindir / "pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "stop")

    def restart(self, mode: str = "fast") -> None:
        self.stop(mode)
        self.start()

    def create_database(self, name: str) -> str:
        """A fresh database; returns its URL (TCP)."""
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"'.encode())
        return f"postgresql://postgres@127.0.0.1:{self.port}/{name}"

    def remove(self) -> None:
        self.stop("immediate")
        shutil.rmtree(self.base, ignore_errors=True)


@contextlib.contextmanager
def running_server() -> Iterator[PgServer | str]:
    """A started server, or the reason there is none (the binaries are absent)."""
    bindir = find_bin()
    if bindir is None:
        yield "Postgres server binaries (initdb, pg_ctl) are not installed"
        return
    server = PgServer(bindir)
    try:
        server.init()
        server.start()
        yield server
    finally:
        server.remove()
