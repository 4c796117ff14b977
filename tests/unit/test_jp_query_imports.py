"""What `jp query` loads for a plain text turn (against the fake daemon, in a fresh
interpreter): not the modules of what the turn did not need, which sit between the
turn's end and `jp`'s (the changed files' diff module, the config warnings')."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FAKE = ROOT / "tests" / "fixtures" / "fake_jpd.py"

RUN_QUERY = r"""
import json, sys
from jpcli.__main__ import main
code = main(["query", "--new", "hello"])
print(json.dumps({"code": code, "modules": sorted(sys.modules)}))
"""


def test_a_text_turn_loads_neither_the_diff_nor_the_warnings_module(tmp_path: Path) -> None:
    env = {
        "PATH": "/usr/bin:/bin",
        "JPD_COMMAND": shlex.join([sys.executable, str(FAKE)]),
        "JP_LOG_DIR": str(tmp_path / "logs"),
        "JP_STATE_DIR": str(tmp_path / "state"),
        "FAKE_JPD_LOG": str(tmp_path / "received.jsonl"),
    }
    proc = subprocess.run(
        [sys.executable, "-c", RUN_QUERY],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["code"] == 0, proc.stderr
    loaded = set(report["modules"])
    assert "jpcli.follow" in loaded  # the turn was followed
    assert not loaded & {"jpcli.turns.changes", "difflib", "jpcli.configs.warnings", "hashlib"}
