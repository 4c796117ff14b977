"""Soak: daemon RSS and open files at 0, 1,000 and 10,000 turns across 1,000
conversations (round-robin, nobody following a conversation between its turns).

Both should be flat between 1,000 and 10,000 turns: the daemon keeps nothing per turn,
and an idle conversation holds no file and almost no memory.

Run from the repository root (Linux; several minutes on 2 cores):

    python -m bench.bench_soak [--turns 10000] [--conversations 1000]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.longrun import Soak, scripted_env  # noqa: E402


async def measure(turns: int, conversations: int) -> list[tuple[int, int, int]]:
    with tempfile.TemporaryDirectory(prefix="jpd-bench-soak-") as tmp:
        soak = await Soak.start(scripted_env(Path(tmp), turns), conversations)
        figures = [(0, *(await soak.measure()))]
        for mark in (conversations, turns):
            await soak.run(mark - soak.turns)
            figures.append((mark, *(await soak.measure())))
        await soak.stop()
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=10_000)
    parser.add_argument("--conversations", type=int, default=1_000)
    args = parser.parse_args()
    figures = asyncio.run(measure(args.turns, args.conversations))
    print(f"{'turns':>8} {'RSS KiB':>10} {'open fds':>9}")
    for turns, rss, fds in figures:
        print(f"{turns:>8} {rss:>10} {fds:>9}")
    (first, rss_first, fds_first), (last, rss_last, fds_last) = figures[1], figures[2]
    print(f"RSS ratio {last}/{first} turns: {rss_last / rss_first:.3f}")
    print(f"open fds {first} -> {last} turns: {fds_first} -> {fds_last}")


if __name__ == "__main__":
    main()
