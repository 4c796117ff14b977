"""`jp query` with no message on a terminal composes it in `$EDITOR` (issue 37 item 8),
through the real `jp` (its stdin a pseudo-terminal) and `jpd --listen`."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from tests.e2e.sockets import Daemons
from tests.e2e.test_jp_daily import jp_in
from tests.e2e.test_jp_from_jp import recorded, recording_env

EDITOR = """
import shutil, sys
path = sys.argv[1]
shutil.copy(path, sys.argv[1] + ".seen")
shutil.copy(path, {seen!r})
text = open(path).read()
open(path, "w").write({message!r} + text)
"""


def jp_on_terminal(
    env: Mapping[str, str], cwd: Path, *args: str
) -> subprocess.CompletedProcess[str]:
    """`jp` with a pseudo-terminal as stdin (stdout and stderr piped)."""
    main, side = os.openpty()
    try:
        return subprocess.run(
            [sys.executable, "-m", "jpcli", *args],
            cwd=cwd,
            env=dict(env),
            stdin=side,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    finally:
        os.close(main)
        os.close(side)


def editor(tmp_path: Path, message: str) -> str:
    script = tmp_path / "editor.py"
    script.write_text(EDITOR.format(seen=str(tmp_path / "seen.txt"), message=message))
    return f"{sys.executable} {script}"


async def test_the_message_is_written_in_the_editor(tmp_path: Path, daemons: Daemons) -> None:
    env = recording_env(tmp_path)
    await daemons.start(env)
    assert jp_in(env, tmp_path, "query", "--new", "first question").returncode == 0
    env["VISUAL"] = editor(tmp_path, "the follow-up\nin two lines\n# not sent\n")
    ran = jp_on_terminal(env, tmp_path, "query")
    assert ran.returncode == 0, ran.stderr
    assert recorded(tmp_path)[-1]["messages"][-1]["content"] == "the follow-up\nin two lines"
    seen = (tmp_path / "seen.txt").read_text()
    assert "# you:\n# first question\n#\n# assistant:\n# ok\n" in seen

    env["VISUAL"] = editor(tmp_path, "# only a comment\n")
    empty = jp_on_terminal(env, tmp_path, "query")
    assert empty.returncode == 0 and "empty message; nothing sent" in empty.stderr
    env["VISUAL"] = "false"
    failed = jp_on_terminal(env, tmp_path, "query")
    assert failed.returncode == 1 and "the editor (false) failed" in failed.stderr
    assert len(recorded(tmp_path)) == 2
    # Without a terminal a message is still required.
    assert jp_in(env, tmp_path, "query").returncode == 2
