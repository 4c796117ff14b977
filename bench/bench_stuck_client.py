"""Daemon memory with a client that never reads (protocol.md section 7.3).

Two fresh `jpd --listen` daemons run the same long turn (20 MB of streamed text in
20,000 events), followed by one client that reads everything; in the second, another
client attached to the same conversation never reads its socket. Prints the daemon's
RSS after each turn side by side, and their ratio (goal: about 1x, bounded by
`daemon.send_queue_bytes`, not by the size of the turn).

    python -m bench.bench_stuck_client [--mb 20]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.fig_stream import _listen  # noqa: E402
from bench.rpcclient import Client  # noqa: E402


def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as status:
        line = next(line for line in status if line.startswith("VmRSS:"))
    return int(line.split()[1]) / 1024


def environment(home: Path, megabytes: int) -> dict[str, str]:
    script = home / "script.json"
    long = {"text": "x" * (megabytes * 1_000_000), "chunk": 1000}
    script.write_text(json.dumps({"responses": [{"text": "ok"}, long]}))
    config = home / "config.toml"
    config.write_text(
        f'[assistant.model]\nid = "test/x"\n[providers.test]\nscript = "{script}"\n'
        "[daemon]\nidle_timeout = 0\nreplay_buffer = 100\n"
    )
    base = {k: v for k, v in os.environ.items() if not k.startswith(("JP_", "JPD_"))}
    return {
        **base,
        "JP_CONFIG": str(config),
        "JP_DATA_DIR": str(home / "data"),
        "JP_LOG_DIR": str(home / "logs"),
    }


async def run(home: Path, megabytes: int, stuck: bool) -> tuple[float, float, float]:
    """(RSS before the long turn, RSS after it, seconds it took), in MiB."""
    env = environment(home, megabytes)
    path = home / "jpd.sock"
    process = await _listen(env, path)
    try:
        follower = await Client.connect(path)
        await follower.initialize("follower")
        cid, _ = await follower.turn("hi")
        if stuck:
            never_reads = await Client.connect(path)
            await never_reads.initialize("stuck")
            await never_reads.request("turn/attach", {"conversationId": cid})
        before = rss_mib(process.pid)
        start = time.perf_counter()
        await follower.turn("long", cid)
        elapsed = time.perf_counter() - start
        await asyncio.sleep(0.5)
        return before, rss_mib(process.pid), elapsed
    finally:
        process.terminate()
        process.wait()


def stuck_of(name: str) -> bool:
    return name == "never reads"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=20, help="megabytes of text streamed")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="jpd-stuck-") as tmp:
        results = {}
        for name, stuck in (("alone", False), ("never reads", True)):
            home = Path(tmp) / name.replace(" ", "-")
            home.mkdir()
            results[name] = asyncio.run(run(home, args.mb, stuck))
    print(f"| {args.mb} MB turn, daemon RSS | before | after | turn time |")
    print("|---|---|---|---|")
    for name, (before, after, elapsed) in results.items():
        label = "one follower" if not stuck_of(name) else "one follower + a client that never reads"
        print(f"| {label} | {before:.1f} MiB | {after:.1f} MiB | "
              f"{elapsed:.2f} s |")  # fmt: skip
    ratio = results["never reads"][1] / results["alone"][1]
    growth = results["never reads"][1] - results["never reads"][0]
    print(f"RSS with a client that never reads / without: {ratio:.2f}x "
          f"(+{growth:.1f} MiB during the turn; send queue bound 8 MiB x 4 hard cap)")  # fmt: skip


if __name__ == "__main__":
    main()
