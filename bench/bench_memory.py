"""Daemon memory over 1,000 turns: RSS at 0, 100 and 1,000 turns of the scripted model,
each turn in a new conversation that nobody follows afterwards (like `jp query`).

Memory a daemon keeps per conversation shows as growth between 100 and 1,000 turns:
the ratio RSS(1000)/RSS(100) should stay near 1.

Run from the repository root (Linux; about a minute):

    python -m bench.bench_memory [--turns 1000]
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


async def measure(turns: int) -> list[tuple[int, int]]:
    with tempfile.TemporaryDirectory(prefix="jpd-bench-memory-") as tmp:
        soak = await Soak.start(scripted_env(Path(tmp), turns), conversations=None)
        figures = [(0, (await soak.measure())[0])]
        for mark in (turns // 10, turns):
            await soak.run(mark - soak.turns)
            figures.append((mark, (await soak.measure())[0]))
        await soak.stop()
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=1000)
    args = parser.parse_args()
    figures = asyncio.run(measure(args.turns))
    print(f"{'turns':>8} {'RSS KiB':>10}")
    for turns, rss in figures:
        print(f"{turns:>8} {rss:>10}")
    (tenth, rss_tenth), (last, rss_last) = figures[1], figures[2]
    print(f"RSS ratio {last}/{tenth} turns: {rss_last / rss_tenth:.3f}")
    print(f"growth per turn after {tenth}: {(rss_last - rss_tenth) / (last - tenth):.2f} KiB")


if __name__ == "__main__":
    main()
