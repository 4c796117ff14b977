"""Start-up cost of `jp query` with the scripted test provider, against `python -c pass`.

Measured side by side in one run (interleaved rounds, medians):
- `jp query --stdio`: the client starts a private `jpd` on stdio (client + daemon start-up);
- `jp query` against an already running `jpd --listen` (the usual warm path);
- `jp --help` (client import cost alone) and `import jpd.server` (daemon import cost).
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
    jp = [sys.executable, "-m", "jpcli"]
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        script = home / "script.json"
        # Enough answers for every round of both query variants (the warm daemon keeps
        # its place in the script; each private daemon starts from the top).
        script.write_text(json.dumps({"responses": [{"text": "pong"}] * (2 * args.rounds + 4)}))
        config = home / "config.toml"
        config.write_text(
            f'[assistant.model]\nid = "test/x"\n[providers.test]\nscript = "{script}"\n'
            "[daemon]\nidle_timeout = 0\n"
        )
        env = {
            **os.environ,
            "JP_CONFIG": str(config),
            "JP_DATA_DIR": str(home / "data"),
            "JP_LOG_DIR": str(home / "logs"),
            "JP_STATE_DIR": str(home / "state"),
            "JP_SOCKET": str(home / "jpd.sock"),
        }
        env.pop("JPD_COMMAND", None)
        commands = {
            "python -c pass": [sys.executable, "-c", "pass"],
            "jp --help": [*jp, "--help"],
            "import jpd.server": [sys.executable, "-c", "import jpd.server"],
            "jp query --stdio (cold)": [*jp, "--stdio", "query", "--new", "ping"],
            "jp query (warm daemon)": [*jp, "query", "--new", "ping"],
        }
        wall([*jp, "query", "--new", "warm-up"], env)  # starts the shared daemon
        times: dict[str, list[float]] = {name: [] for name in commands}
        try:
            for _ in range(args.rounds):
                for name, cmd in commands.items():
                    times[name].append(wall(cmd, env))
        finally:
            subprocess.run([*jp, "daemon", "stop"], env=env, check=False, capture_output=True)
    base = statistics.median(times["python -c pass"])
    print(f"rounds: {args.rounds} (medians, interleaved)")
    for name, samples in times.items():
        med = statistics.median(samples)
        print(f"{name:28s} {med * 1000:8.1f} ms   ratio to python -c pass: {med / base:6.1f}x")


if __name__ == "__main__":
    main()
