"""Helpers shared by the benchmarks: results folder, markdown tables, plots, timing."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

RESULTS = Path(__file__).resolve().parent / "results"


def table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A markdown table; floats are printed with up to 4 significant digits."""

    def cell(v: Any) -> str:
        if isinstance(v, float | np.floating):
            if not np.isfinite(v):
                return "-"
            return f"{v:.4g}" if abs(v) < 1e5 else f"{v:.3g}"
        return str(v)

    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def pyplot() -> Any:
    """matplotlib.pyplot on the Agg backend (no display)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save(fig: Any, name: str, out: Path | None = None) -> str:
    """Save a figure as a small PNG in the results folder; returns its file name."""
    folder = out or RESULTS
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    fig.savefig(path, dpi=80)
    pyplot().close(fig)
    return name


def median_time(fn: Callable[[], Any], repeats: int = 5) -> float:
    """Median wall time of ``fn()`` in seconds over ``repeats`` calls (after one warm-up)."""
    fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times))
