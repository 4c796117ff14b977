"""`jp turn undo` against the shared daemon: a `jp query` turn edits a file of the
workspace, `jp` prints the diff, `jp turn undo` puts the file back, a second undo is
refused."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.e2e.sockets import Daemons, add_config, socket_env
from tests.e2e.tools import tool_call


def jp(env: dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`jp` run in the workspace `cwd` (its working directory is the turn's workspace)."""
    return subprocess.run(
        [sys.executable, "-m", "jpcli", *args],
        cwd=cwd,
        env=env,
        input="",
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


async def test_query_edits_then_turn_undo_restores(tmp_path: Path, daemons: Daemons) -> None:
    env = socket_env(
        tmp_path,
        [
            tool_call("fs_modify_file", path="calc.py", old_text="a - b", new_text="a + b"),
            {"text": "Fixed."},
        ],
    )
    # No terminal to ask on: let the edit run unattended for this test.
    add_config(env, '[conversation.tools.fs_modify_file]\nrun = "unattended"\n')
    daemons.watch(env)
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "calc.py").write_text("def add(a, b):\n    return a - b\n")

    done = jp(env, ws, "query", "fix the bug")
    assert done.returncode == 0, done.stderr
    assert "Fixed." in done.stdout
    assert "  -    return a - b" in done.stderr and "  +    return a + b" in done.stderr
    assert (ws / "calc.py").read_text() == "def add(a, b):\n    return a + b\n"

    undone = jp(env, ws, "turn", "undo")
    assert undone.returncode == 0, undone.stderr
    assert undone.stdout.startswith("undid turn t-")
    assert f"restored {(ws / 'calc.py').resolve()}" in undone.stdout
    assert (ws / "calc.py").read_text() == "def add(a, b):\n    return a - b\n"

    again = jp(env, ws, "turn", "undo")
    assert again.returncode == 1 and "undone already" in again.stderr
