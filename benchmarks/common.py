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


def rough(quats: np.ndarray, tolerance_deg: float = 0.1) -> float:
    """Share of (frame, bone) samples of a full bake's rotations (F, B, 4) that turn more than
    ``tolerance_deg`` away from the cubic through the bone's two frames on either side: jitter
    that no smooth curve follows, so a lean bake keys it where a full bake does."""
    return float(np.mean(off_cubic(quats) > tolerance_deg))


def off_cubic(quats: np.ndarray) -> np.ndarray:
    """(F - 4, B) degrees each sample of frames 2 .. F - 3 of rotations (F, B, 4) turns away
    from the cubic through the bone's two frames on either side (``rough``'s samples)."""
    q = _hemisphere(quats)
    mid = (-q[:-4] + 4 * q[1:-3] + 4 * q[3:-1] - q[4:]) / 6.0
    mid /= np.linalg.norm(mid, axis=2, keepdims=True)
    d = np.linalg.norm(mid - q[2:-2], axis=2)
    return np.asarray(np.degrees(4 * np.arcsin(np.minimum(d / 2, 1.0))))


def _hemisphere(quats: np.ndarray) -> np.ndarray:
    """Quaternions (F, B, 4) flipped frame to frame into one hemisphere."""
    q = quats.copy()
    for f in range(1, len(q)):
        q[f] *= np.where(np.sum(q[f] * q[f - 1], axis=1) < 0, -1.0, 1.0)[:, None]
    return q
