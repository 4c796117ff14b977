"""`jp` spawns a private daemon before parsing its arguments (jpcli/spawn.py): only
when the command surely needs one, and never leaves one behind."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from jpcli import __version__, spawn
from jpcli.__main__ import run


@pytest.mark.parametrize(
    ("argv", "env", "expected"),
    [
        (["--stdio", "query", "hi"], {}, True),
        (["--stdio", "q", "--new", "hi"], {}, True),
        (["--stdio", "chat"], {}, True),
        (["query", "hi"], {"JPD_COMMAND": "jpd"}, True),
        (["query", "hi"], {}, False),  # the shared daemon: nothing to spawn
        (["--stdio", "conversation", "ls"], {}, False),
        (["--stdio", "query", "--help"], {}, False),
        (["--stdio", "query", "-h"], {}, False),
        (["--stdio", "--version"], {}, False),
        (["--stdio"], {}, False),
        ([], {}, False),
    ],
)
def test_spawns_early_only_when_surely_needed(
    argv: list[str], env: dict[str, str], expected: bool
) -> None:
    assert spawn.wants_early_daemon(argv, env) is expected


def test_an_early_daemon_the_command_does_not_use_is_stopped(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A usage error after the spawn (`--detach` needs the shared daemon) ends it."""
    spawned: list[subprocess.Popen[bytes]] = []
    real = spawn.spawn_daemon

    def recording(*args: object, **kwargs: object) -> subprocess.Popen[bytes]:
        process = real(*args, **kwargs)  # type: ignore[arg-type]
        spawned.append(process)
        return process

    monkeypatch.setattr(spawn, "spawn_daemon", recording)
    # A stand-in daemon that lives until its stdin closes.
    monkeypatch.setenv("JPD_COMMAND", f"{sys.executable} -c 'import sys; sys.stdin.read()'")
    monkeypatch.setenv("JP_LOG_DIR", str(tmp_path))
    monkeypatch.setattr(sys, "argv", ["jp", "--stdio", "query", "--detach", "hi"])

    def leave(code: int) -> None:  # `run` ends the process without teardown
        raise SystemExit(code)

    monkeypatch.setattr(os, "_exit", leave)
    with pytest.raises(SystemExit) as exit_:
        run()
    assert exit_.value.code == 2
    (process,) = spawned
    assert process.poll() is not None  # stopped and reaped
    assert f"jp {__version__}" in (tmp_path / "jpd.log").read_text()  # its log header
