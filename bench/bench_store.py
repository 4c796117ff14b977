"""Benchmark the conversation store: append cost vs log length, and load time.

Run from the repository root: `PYTHONPATH=. python bench/bench_store.py [--rounds N]`
(`--appends N` sets the appends per size per round).

Appends must cost the same whether a conversation holds 100 or 10,000 events (the
ratio should stay near 1.0); both sizes are measured side by side, in interleaved
chunks whose order alternates, so machine noise hits both alike.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from jpd.conversation.events import (
    ChatRequest,
    ChatResponse,
    Event,
    ToolCallRequest,
    ToolCallResponse,
)
from jpd.conversation.jsonl.store import ConversationStore
from jpd.protocol.usage import TokenUsage

SMALL, LARGE = 100, 10_000
CHUNK = 20


def make_event(i: int) -> Event:
    """Event `i` of a repeating, realistic cycle of shapes (tool calls stay paired)."""
    shapes: list[Callable[[], Event]] = [
        lambda: ChatRequest(content=f"Please look at file_{i}.py and fix the failing test."),
        lambda: ChatResponse(reasoning="The test fails because the parser skips blank lines. " * 3),
        lambda: ToolCallRequest(
            id=f"call_{i}", name="fs_read_file", arguments={"path": f"src/file_{i}.py"}
        ),
        lambda: ToolCallResponse(id=f"call_{i - 1}", content="def parse(line):\n    ...\n" * 20),
        lambda: ChatResponse(
            message="Fixed: blank lines are now kept.",
            usage=TokenUsage(input_tokens=1200, output_tokens=80),
        ),
    ]
    return shapes[i % len(shapes)]()


def build_template(root: Path, cid: str, count: int) -> None:
    with ConversationStore(root) as store:
        store.create(cid)
        for i in range(count):
            store.append(cid, make_event(i))


def time_appends(store: ConversationStore, cid: str, start: int, count: int) -> float:
    """Seconds spent appending `count` events (event objects built beforehand)."""
    events = [make_event(start + i) for i in range(count)]
    began = time.perf_counter()
    for event in events:
        store.append(cid, event)
    return time.perf_counter() - began


def bench_appends(base: Path, templates: Path, rounds: int, appends: int) -> None:
    small_means: list[float] = []
    large_means: list[float] = []
    for r in range(rounds):
        root = base / f"round{r}"
        shutil.copytree(templates, root)
        store = ConversationStore(root)
        # One warm-up append each opens the handle and reads metadata (a one-off cost).
        store.append("small", make_event(SMALL))
        store.append("large", make_event(LARGE))
        spent = {"small": 0.0, "large": 0.0}
        nexts = {"small": SMALL + 1, "large": LARGE + 1}
        for chunk in range(appends // CHUNK):
            order = ("small", "large") if chunk % 2 == 0 else ("large", "small")
            for cid in order:
                spent[cid] += time_appends(store, cid, nexts[cid], CHUNK)
                nexts[cid] += CHUNK
        store.close()
        done = (appends // CHUNK) * CHUNK
        small_means.append(spent["small"] / done)
        large_means.append(spent["large"] / done)
        print(
            f"round {r + 1}: append@{SMALL} {small_means[-1] * 1e6:7.2f} us  "
            f"append@{LARGE} {large_means[-1] * 1e6:7.2f} us  "
            f"ratio {large_means[-1] / small_means[-1]:.2f}"
        )
        shutil.rmtree(root)
    small, large = statistics.median(small_means), statistics.median(large_means)
    print(f"append@{SMALL} mean per event (median of rounds): {small * 1e6:.2f} us")
    print(f"append@{LARGE} mean per event (median of rounds): {large * 1e6:.2f} us")
    print(f"append@{LARGE}/append@{SMALL} ratio: {large / small:.2f}")


def bench_load(templates: Path, rounds: int) -> None:
    store = ConversationStore(templates)
    times = []
    for _ in range(rounds):
        began = time.perf_counter()
        events = store.load("large")
        times.append(time.perf_counter() - began)
    assert len(events) == LARGE, len(events)
    best, mean = min(times), statistics.mean(times)
    print(
        f"load@{LARGE}: best {best * 1e3:.1f} ms, mean {mean * 1e3:.1f} ms "
        f"({best / LARGE * 1e6:.2f} us/event best, {mean / LARGE * 1e6:.2f} us/event mean)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=5, help="rounds per measurement")
    parser.add_argument("--appends", type=int, default=400, help="appends per size per round")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="jpd-bench-store-") as tmp:
        base = Path(tmp)
        templates = base / "templates"
        build_template(templates, "small", SMALL)
        build_template(templates, "large", LARGE)
        bench_appends(base, templates, args.rounds, args.appends)
        bench_load(templates, args.rounds)


if __name__ == "__main__":
    main()
