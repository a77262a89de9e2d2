"""Speed of one live update: the 20-bone humanoid follows targets moving along smooth paths.

Builds the demo character (``scripts/demo.py``: 20 bones) with goals on the hands (position and
orientation) and the feet (position), chains of 3 bones, turns live solving on and moves the
four Empties along smooth paths, one ``view_layer.update()`` per step (as a drag does). The
paths are the tails of a reference pose whose arm and leg angles vary sinusoidally, so every
target is reachable. Reports the median and 95th percentile of

- ``update``: one live update as the issue defines it, read the targets and the current pose,
  solve to tolerance from the current pose, write the pose (``LiveResult.total_time``),
- ``solve``: the solver alone,
- ``handler``: the whole depsgraph handler (cache checks and panel feedback included), and
  ``handler_cpu`` the CPU time of this thread in it (what is left when other processes take
  turns on the cores),
- ``depsgraph``: the whole ``view_layer.update()`` (Blender's evaluation included),

with the iterations and the largest error. Runs headless with the venv's bpy::

    .venv/bin/python benchmarks/live.py [--steps 600] [--repeats 3] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

import bpy  # noqa: E402
import demo  # noqa: E402  (the rig builder and add-on loader of the demo)
from mathutils import Euler, Matrix  # noqa: E402

GOALS = {"hand.L": 1.0, "hand.R": 1.0, "foot.L": 0.0, "foot.R": 0.0}  # rotation weights
PERIOD = 120  # steps per cycle of the paths (2 s of dragging at 60 updates per second)


def reference_pose(ob: Any, t: float) -> None:
    """Set a bent pose that varies smoothly with t (radians) on the arm and leg chains."""
    for side, s in (("L", 1.0), ("R", -1.0)):
        p = t if side == "L" else t + math.pi
        angles = {
            f"upper_arm.{side}": (
                0.3 * math.sin(p),
                0.2 * math.cos(p),
                s * (0.5 + 0.2 * math.sin(p)),
            ),
            f"forearm.{side}": (0.9 + 0.3 * math.sin(p + 1.0), 0.0, 0.1 * math.cos(p)),
            f"hand.{side}": (0.3 * math.sin(2 * p), 0.2 * math.cos(p), 0.2 * math.sin(p)),
            f"thigh.{side}": (0.3 + 0.25 * math.sin(p), 0.0, 0.05 * math.cos(p)),
            f"shin.{side}": (-0.6 - 0.25 * math.sin(p + 0.5), 0.0, 0.0),
            f"foot.{side}": (0.2 * math.sin(p), 0.0, 0.0),
        }
        for name, e in angles.items():
            pb = ob.pose.bones[name]
            pb.rotation_mode = "QUATERNION"
            pb.rotation_quaternion = Euler(e).to_quaternion()


def target_paths(ob: Any, steps: int) -> list[list[Matrix]]:
    """Per step, the world matrix of each goal's target: the reference pose's tail frames."""
    out = []
    for i in range(steps):
        reference_pose(ob, 2 * math.pi * i / PERIOD)
        bpy.context.view_layer.update()
        frames = []
        for name in GOALS:
            pb = ob.pose.bones[name]
            frames.append(ob.matrix_world @ pb.matrix @ Matrix.Translation((0, pb.length, 0)))
        out.append(frames)
    return out


def build() -> tuple[Any, list[Any], Any]:
    from checkout import load_checkout

    addon = load_checkout()
    bpy.ops.wm.read_factory_settings(use_empty=True)
    ob = demo.build_rig()
    targets = []
    with bpy.context.temp_override(object=ob, active_object=ob):
        for name, weight in GOALS.items():
            bpy.ops.jacobian_ik.add_goal(bone=name, chain_length=3)
            goal = ob.jacobian_ik.goals[-1]
            goal.rotation_weight = weight
            targets.append(goal.target)
    return ob, targets, addon


def run(steps: int) -> dict[str, Any]:
    ob, targets, addon = build()
    live = sys.modules[addon.__name__ + ".live"]
    paths = target_paths(ob, steps + 1)
    reference_pose(ob, 0.0)
    for empty, m in zip(targets, paths[0], strict=True):
        empty.matrix_world = m
    ob.jacobian_ik.use_live = True
    bpy.context.view_layer.update()

    results: list[Any] = []
    handler_times: list[float] = []
    cpu_times: list[float] = []
    original = live.update_armature

    def timed(*args: Any, **kw: Any) -> Any:
        c0, t0 = time.thread_time(), time.perf_counter()
        res = original(*args, **kw)
        handler_times.append(time.perf_counter() - t0)
        cpu_times.append(time.thread_time() - c0)
        results.append(res)
        return res

    live.update_armature = timed
    depsgraph_times = []
    try:
        for frames in paths[1:]:
            for empty, m in zip(targets, frames, strict=True):
                empty.matrix_world = m
            t0 = time.perf_counter()
            bpy.context.view_layer.update()
            depsgraph_times.append(time.perf_counter() - t0)
    finally:
        live.update_armature = original
    solved = [r for r in results if r is not None]
    if len(solved) != steps:
        raise RuntimeError(f"{len(solved)} live solves for {steps} target moves")
    errors = np.array([r.result.position_error[0] for r in solved])
    rot_errors = np.array([r.result.rotation_error[0] for r in solved])
    return {
        "update": np.array([r.total_time for r in solved]),
        "read": np.array([r.read_time for r in solved]),
        "solve": np.array([r.solve_time for r in solved]),
        "write": np.array([r.write_time for r in solved]),
        "handler": np.array(handler_times),
        "handler_cpu": np.array(cpu_times),
        "depsgraph": np.array(depsgraph_times),
        "iterations": np.array([int(r.result.iterations[0]) for r in solved]),
        "converged": float(np.mean([bool(r.result.success[0]) for r in solved])),
        "max_error": float(errors.max()),
        "max_rotation_error": float(rot_errors[:, :2].max()),
        "fast_path": not live._models[ob.name].like_run,  # read and written in place
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=600)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", type=Path, help="also write the numbers here")
    args = parser.parse_args()
    load = os.getloadavg()[0]
    rows = []
    for r in range(args.repeats):
        res = run(args.steps)
        rows.append(res)
        print(
            f"repeat {r + 1}: update median {1e3 * np.median(res['update']):.3f} ms, "
            f"p95 {1e3 * np.percentile(res['update'], 95):.3f} ms",
            file=sys.stderr,
        )
    keys = ["update", "read", "solve", "write", "handler", "handler_cpu", "depsgraph"]
    print("20-bone humanoid, 4 goals (hands position+orientation, feet position), chains of 3,")
    print(f"{args.steps} target moves x {args.repeats} repeats, fast path: {rows[0]['fast_path']}")
    print(
        f"load average at start {load:.2f}, at end {os.getloadavg()[0]:.2f} "
        f"({os.cpu_count()} cores)"
    )
    print(f"{'ms':<12}{'median':>9}{'p95':>9}{'max':>9}   per-repeat medians")
    summary: dict[str, Any] = {}
    for key in keys:
        allv = np.concatenate([row[key] for row in rows]) * 1e3
        medians = [float(np.median(row[key]) * 1e3) for row in rows]
        summary[key] = {
            "median": float(np.median(allv)),
            "p95": float(np.percentile(allv, 95)),
            "max": float(allv.max()),
            "repeat_medians": medians,
        }
        print(
            f"{key:<12}{np.median(allv):9.3f}{np.percentile(allv, 95):9.3f}{allv.max():9.3f}   "
            + " ".join(f"{m:.3f}" for m in medians)
        )
    its = np.concatenate([row["iterations"] for row in rows])
    print(
        f"iterations mean {its.mean():.2f}, max {its.max()}; converged "
        f"{100 * np.mean([row['converged'] for row in rows]):.1f} %; largest error "
        f"{max(row['max_error'] for row in rows):.2e}, rotation "
        f"{max(row['max_rotation_error'] for row in rows):.2e} rad"
    )
    ok = summary["update"]["median"] < 2.0 and summary["update"]["p95"] < 5.0
    print(f"target (median < 2 ms, p95 < 5 ms): {'met' if ok else 'NOT met'}")
    if args.json:
        summary["iterations_mean"] = float(its.mean())
        args.json.write_text(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
