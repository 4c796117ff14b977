"""`python -m bench --quick` runs to the end and prints every figure of the README's
performance table. Nothing is timed here (the figures are the bench's business, as
ratios it prints); this only keeps a change of the daemon from breaking the bench
unseen, as a store change once broke its history part."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

FIGURES = [
    "jpd spawn to initialize answered",
    "jp --stdio query (scripted)",
    "daemon CPU per turn/list",
    "daemon CPU per daemon/status",
    "2,000 streamed tokens, total",
    "2,000 streamed tokens, first text",
    "daemon CPU, 20 clients following one turn",
    "one conversation, turns 990-1000",
    "first conversation/get of 100,000 events",
    "another client's turn/list p99 while turns run",
    "a later turn on that 100,000-event conversation",
    "tokens sent in 200 turns (6,000-char tool outputs, 32,000 window)",
    "embedded model through jpd, first token",
    "embedded model through jpd, tokens/s",
]


def test_the_quick_bench_prints_every_figure(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JP_", "JPD_"))}
    env["TMPDIR"] = str(tmp_path)
    done = subprocess.run(
        [sys.executable, "-m", "bench", "--quick"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    rows = {
        cells[1].strip(): cells[2:]
        for line in done.stdout.splitlines()
        if line.startswith("| ") and len(cells := line.split("|")) >= 6
    }
    assert [figure for figure in FIGURES if figure not in rows] == []
    # Named by their turn counts (fewer with --quick).
    assert any(figure.startswith("daemon CPU per token, ") for figure in rows)
    assert any(figure.startswith("turn/list p99 while ") for figure in rows)
    probes = ("turn/list (another socket", "initialize (a new socket")
    probes += ("inquiry/answer of a pending question", "inquiry/answer of an unknown")
    for probe in (*probes, "turn/cancel of a running turn (another socket"):
        assert any(figure.startswith(probe) for figure in rows), probe
    for figure in FIGURES:
        measured = rows[figure][0]
        assert re.search(r"\d", measured), f"{figure}: no measurement in {measured!r}"
