"""The long hostile-frame run: the generators of `tests/unit/test_fuzz_frames.py` with
many more cases, against the in-process daemon. Prints the cases run and their outcomes.

    python -m bench.bench_fuzz [--structured 20000] [--bytes 10000]
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from hypothesis import HealthCheck, Phase, given, settings  # noqa: E402

from tests.fuzzframes import LEAK, Harness, byte_frames, messages, running_harness  # noqa: E402


def run(harness: Harness, structured: int, raw: int) -> list[str]:
    leaks: list[str] = []
    common = {
        "deadline": None,
        "database": None,
        "phases": [Phase.generate],
        "suppress_health_check": list(HealthCheck),
    }

    @settings(max_examples=structured, **common)  # type: ignore[arg-type]
    @given(case=messages())
    def structured_cases(case: tuple[bytes, object]) -> None:
        leaks.extend(r.decode(errors="replace") for r in harness.structured(case) if LEAK.search(r))

    @settings(max_examples=raw, **common)  # type: ignore[arg-type]
    @given(data=byte_frames())
    def byte_cases(data: bytes) -> None:
        leaks.extend(r.decode(errors="replace") for r in harness.raw_bytes(data) if LEAK.search(r))

    structured_cases()
    byte_cases()
    return leaks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--structured", type=int, default=20000)
    parser.add_argument("--bytes", type=int, default=10000)
    args = parser.parse_args()
    logging.disable(logging.CRITICAL)
    start = time.perf_counter()
    with (
        tempfile.TemporaryDirectory(prefix="jpd-fuzz-") as tmp,
        running_harness(Path(tmp)) as harness,
    ):
        leaks = run(harness, args.structured, args.bytes)
        serves = harness.still_serves()
        outcomes = dict(sorted(harness.outcomes.items()))
    total = sum(outcomes.values())
    print(f"{total} fuzz cases in {time.perf_counter() - start:.0f} s")
    for outcome, count in outcomes.items():
        print(f"  {outcome}: {count}")
    print(f"replies leaking a traceback or path: {len(leaks)}")
    print(f"still answers a normal request afterwards: {serves}")
    if leaks or not serves:
        sys.exit(1)


if __name__ == "__main__":
    main()
