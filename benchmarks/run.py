"""Run every benchmark and write benchmarks/results/report.md and its PNG plots.

python -m benchmarks.run            # the full run (a few minutes)
python -m benchmarks.run --quick    # small sizes, for the smoke test
"""

from __future__ import annotations

import argparse
import platform
import time
from pathlib import Path
from typing import Any

import numpy as np

from . import peers, race, speed, sugihara
from .common import RESULTS, table
from .report_papers import (
    buss_kim_section,
    deo_walker_section,
    sugihara_section,
    tabaczynski_section,
)

DIFFERENCES = Path(__file__).resolve().parents[1] / "docs" / "benchmark-differences.md"

FULL = {
    "streams": 48,
    "trials": 8,
    "y_streams": 32,
    "y_trials": 4,
    "max_steps": 4000,
    "warmup": 400,
    "measured": 2000,
    "count": 200,
    "race_count": 1000,
    "max_iterations": 10000,
    "sweep": 50,
    "single": 100,
    "chain": 200,
    "tab_iterations": 1000,
    "speed_iterations": 50,
    "repeats": 5,
    "batch": 250,
    "rtb_limits": (100, 1000),
}
QUICK = {
    "streams": 3,
    "trials": 2,
    "y_streams": 2,
    "y_trials": 1,
    "max_steps": 150,
    "warmup": 20,
    "measured": 40,
    "count": 8,
    "race_count": 8,
    "max_iterations": 100,
    "sweep": 5,
    "single": 2,
    "chain": 4,
    "tab_iterations": 60,
    "speed_iterations": 3,
    "repeats": 1,
    "batch": 5,
    "rtb_limits": (30,),
}


def race_section(cfg: dict[str, Any]) -> list[str]:
    lines = ["## 3. Racing the peers", ""]
    t0 = time.perf_counter()
    data = sugihara.random_test(
        0, cfg["race_count"], ["sugihara"], max_iterations=cfg["max_iterations"]
    )
    sr = race.sugihara_race(data, cfg["single"], cfg["rtb_limits"], cfg["max_iterations"])
    sec = time.perf_counter() - t0
    lines += [
        "Peers: roboticstoolbox-python "
        f"({sr['status']['roboticstoolbox']}), pybullet ({sr['status']['pybullet']}).",
        "",
        f"### Sugihara random test, {cfg['race_count']} goals (seed 0; {sec:.0f} s)",
        "",
        "rtb: `ik_LM(Tep, q0=0, method='sugihara', k=1e-3, slimit=1, tol=1e-14, "
        "joint_limits=False)`; it stops only at tol or ilimit (no stagnation rule), so it runs "
        "every unsolvable goal to ilimit; on failure it returns a random q, so its success uses "
        "its own final residual sqrt(2E) (the same angle-axis error as ours, checked equal on "
        "solved goals). pybullet: `calculateInverseKinematics` with position and orientation, "
        "maxNumIterations=100, residualThreshold=1e-12, joints reset to 0 before each call.",
        "",
    ]
    rows = []
    base = None
    for label, row in sr["rows"].items():
        if label.startswith("roboticstoolbox") and base is None:
            base = row["us"]
    for label, row in sr["rows"].items():
        ratio = row["us"] / base if base else float("nan")
        rows.append(
            [
                label,
                f"{row['success']}/{row['count']}",
                row["us"],
                ratio,
                row["iterations"],
                row.get("own_success", ""),
            ]
        )
    lines += [
        table(
            [
                "solver",
                "success (paper's criterion)",
                "us per goal",
                "time / rtb (first ilimit)",
                "mean iterations",
                "rtb's own success flag",
            ],
            rows,
        ),
        "",
    ]
    cr = race.chain_race(cfg["chain"])
    lines += [
        f"### 10-link chain ({cr['count']} reachable and {cr['count']} unreachable targets)",
        "",
        "Revolute joints alternating about local z and x, links 0.1 along z; position goals; "
        "100 iterations for every solver (ours: `Settings(method='lm', max_iterations=100, "
        "tolerance=1e-6)`), every solve from q = 0. Success: within 1e-4 of the target "
        "(reachable) or of the smallest distance any solver reached (unreachable; from the "
        "straight start every method stops at stationary points above |t| - reach).",
        "",
    ]
    for split, rows_ in cr["rows"].items():
        base = rows_.get("ours LM, batched", (0, float("nan")))[1]
        rows = [[k, v[0], v[1], v[1] / base] for k, v in rows_.items()]
        lines += [
            f"**{split}**",
            "",
            table(["solver", "success", "us per solve", "time / ours batched"], rows),
            "",
        ]
    return lines


def speed_section(cfg: dict[str, Any]) -> list[str]:
    rows_d = speed.run(cfg["speed_iterations"], cfg["repeats"], cfg["batch"])
    from jacobian_ik.solvers import METHODS

    rows = []
    for method in METHODS:
        rows.append(
            [
                method,
                rows_d[("double-Y", 1, method)],
                rows_d[("double-Y", cfg["batch"], method)],
                rows_d[("humanoid", 1, method)],
                rows_d[("humanoid", cfg["batch"], method)],
            ]
        )
    return [
        "## 6. Cost of one iteration (us)",
        "",
        f"Median of {cfg['repeats']} runs of {cfg['speed_iterations']} iterations; batched "
        f"figures are per frame of {cfg['batch']}. Paper (double-Y, C++, 2.8 GHz Pentium): "
        "J^T 6.5, DLS 18.5, SDLS 120 us.",
        "",
        table(
            [
                "method",
                "double-Y, 1 frame",
                f"double-Y, per frame of {cfg['batch']}",
                "humanoid, 1 frame",
                f"humanoid, per frame of {cfg['batch']}",
            ],
            rows,
        ),
        "",
    ]


def differences_section() -> list[str]:
    """Every difference from the papers, and the solver problems found (docs/)."""
    return [DIFFERENCES.read_text()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (smoke test)")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--only", default="", help="comma-separated sections to run")
    args = parser.parse_args(argv)
    cfg = QUICK if args.quick else FULL
    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    only = {s for s in args.only.split(",") if s}
    t0 = time.perf_counter()
    lines = [
        "# Jacobian IK: the papers' experiments and the peers",
        "",
        "Generated by `bash scripts/benchmarks.sh` (`python -m benchmarks.run"
        f"{' --quick' if args.quick else ''}`) on {platform.platform()}, "
        f"Python {platform.python_version()}, numpy {np.__version__}. "
        f"roboticstoolbox: {peers.rtb_version()[1]}; pybullet: {peers.pybullet_version()[1]}.",
        "Every difference from the papers is explained in the last section.",
        "",
    ]

    def want(name: str) -> bool:
        return not only or name in only

    if want("buss_kim"):
        lines += buss_kim_section(cfg, out)
    if want("sugihara"):
        lines += sugihara_section(cfg, out)[0]
    if want("race"):
        lines += race_section(cfg)
    if want("tabaczynski"):
        lines += tabaczynski_section(cfg, out)
    if want("deo_walker"):
        lines += deo_walker_section(out)
    if want("speed"):
        lines += speed_section(cfg)
    lines += differences_section()
    lines += [f"Total time: {time.perf_counter() - t0:.0f} s.", ""]
    (out / "report.md").write_text("\n".join(lines))
    print(f"wrote {out / 'report.md'} in {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
