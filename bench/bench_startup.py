"""Start-up cost: `jp query` with the scripted test provider vs `python -c pass`.

Measured side by side in one run (interleaved), medians over N rounds. Also times
`jp --help` (client import cost alone) and the daemon's import of its server module.
Run: python bench/bench_startup.py [--rounds N]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def wall(cmd: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=10)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        script = home / "script.json"
        script.write_text(json.dumps({"responses": [{"text": "pong"}]}))
        config = home / "config.toml"
        config.write_text(
            f'[assistant.model]\nid = "test/x"\n[providers.test]\nscript = "{script}"\n'
        )
        env = {**os.environ, "JP_CONFIG": str(config), "JP_DATA_DIR": str(home / "data")}
        commands = {
            "python -c pass": [sys.executable, "-c", "pass"],
            "jp --help": [sys.executable, "-m", "clients.jp", "--help"],
            "import jpd.server": [sys.executable, "-c", "import jpd.server"],
            "jp query (test provider)": [sys.executable, "-m", "clients.jp", "query", "--new", "ping"],
        }
        times: dict[str, list[float]] = {name: [] for name in commands}
        for _ in range(args.rounds):
            for name, cmd in commands.items():
                times[name].append(wall(cmd, env))
    base = statistics.median(times["python -c pass"])
    print(f"rounds: {args.rounds} (medians, interleaved)")
    for name, samples in times.items():
        med = statistics.median(samples)
        print(f"{name:28s} {med * 1000:8.1f} ms   ratio to python -c pass: {med / base:6.1f}x")


if __name__ == "__main__":
    main()
