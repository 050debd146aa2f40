"""Helpers shared by the benchmarks: timing, tables, clusters. Not part of the package."""

from __future__ import annotations

import statistics
import time

import numpy as np


def median_seconds(fn, repeats=3):
    """Median wall time of ``fn()`` over ``repeats`` runs (fresh memory is noisy here)."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def print_table(title, columns, rows):
    """A plain text table: columns is a list of names, rows a list of lists."""
    cells = [[str(c) for c in columns]] + [[_fmt(v) for v in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(columns))]
    print(f"\n{title}")
    for i, row in enumerate(cells):
        print("  ".join(c.rjust(w) if j else c.ljust(w) for j, (c, w) in enumerate(zip(row, widths))))
        if i == 0:
            print("  ".join("-" * w for w in widths))


def _fmt(value):
    if isinstance(value, float):
        if np.isnan(value):
            return "-"
        return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.3g}"
    return str(value)
