"""One row of the bench table and its printing."""

from __future__ import annotations

import statistics
from dataclasses import dataclass


@dataclass
class Row:
    """A figure measured beside its reference in the same run."""

    figure: str
    measured: str
    reference: str
    ratio: float | None
    goal: str

    def line(self) -> str:
        ratio = f"{self.ratio:.2f}x" if self.ratio is not None else "-"
        return f"| {self.figure} | {self.measured} | {self.reference} | {ratio} | {self.goal} |"


def med(samples: list[float]) -> float:
    return statistics.median(samples)


def pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f} ms"


def us(seconds: float) -> str:
    return f"{seconds * 1e6:.1f} µs"


def print_table(rows: list[Row]) -> None:
    print("| figure | measured | reference (same run) | ratio | goal |")
    print("|---|---|---|---|---|")
    for row in rows:
        print(row.line())
