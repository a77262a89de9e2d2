"""Bakes with OpenBLAS held at one thread (``solvers/blas.py``) against numpy's default, in one run.

Zoo rigs of a seed (tests/rigs/zoo_rigs.py; ``--limits`` first gives every shin, forearm and
lower bone a wide IK limit on X that never binds: up to 3c4d2dc that sent every frame through
the numpy loop, since 443bd0d the compiled loops solve them and hand back only the frames that
end outside their limits) are baked by the operator's path (``bridge.run``) with the helper on
and off in turn, ``--repeats`` times each, on fresh scenes; the medians of each and their ratio
are printed, with the machine's load average (the threads cost most where the cores are busy)::

    .venv/bin/python -m benchmarks.blas_threads --seed 2121 --only 0,5,10 [--limits] [--frames 250]
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
from typing import Any

from tests.rigs.scenes import build_zoo as build
from tests.rigs.scenes import zoo_spec as spec_of
from tests.rigs.zoo_rigs import KINDS, zoo

from . import blender


def limit(ob: Any) -> None:
    """A wide IK limit on X (never reached) on every shin, forearm and lower bone."""
    for pb in ob.pose.bones:
        if any(k in pb.name for k in ("shin", "forearm", "lower")):
            pb.use_ik_limit_x = True
            pb.ik_min_x, pb.ik_max_x = -math.radians(170), math.radians(170)


def run(seed: int, only: list[int], frames: int, repeats: int, limits: bool) -> list[str]:
    blender.load_addon()
    blender.warm_kernel()
    blas = sys.modules["jacobian_ik.solvers.blas"]
    found = blas.api()
    lines = [f"OpenBLAS found: {found is not None}; load average {os.getloadavg()[0]:.2f}"]
    count = max(only) + 1
    for index, rig in enumerate(zoo(seed, count, KINDS)):
        if index not in only:
            continue
        spec, _ = spec_of(rig, frames)
        times: dict[bool, list[float]] = {True: [], False: []}
        for _ in range(repeats):
            for one in (True, False):
                blas._api[:] = [found if one else None]
                ob, _empties = build(rig, spec, frames)
                if limits:
                    limit(ob)
                bake = blender.bake_ours(ob, frames, ob.jacobian_ik.method, ob.jacobian_ik.mode)
                times[one].append(bake.split.get("solve", bake.time))
        blas._api[:] = [found]
        on, off = statistics.median(times[True]), statistics.median(times[False])
        lines.append(
            f"{rig.name}: solve {on:.3f} s with one thread, {off:.3f} s without "
            f"({off / on:.2f}x), medians of {repeats}"
        )
    lines.append(f"load average at the end {os.getloadavg()[0]:.2f}")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=2121)
    parser.add_argument("--only", default="0,5,10", help="rig indices of the seed's zoo")
    parser.add_argument("--frames", type=int, default=250)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--limits", action="store_true", help="IK limits on shins and forearms")
    args = parser.parse_args(argv)
    only = [int(x) for x in args.only.split(",")]
    for line in run(args.seed, only, args.frames, args.repeats, args.limits):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
