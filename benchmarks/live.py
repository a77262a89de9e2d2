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

``--playback FRAMES`` measures playback instead (issue 15): the goals' Empties are keyed on
every frame along such paths (on Rigify's human meta-rig: hands, feet and head, chains of 3,
position goals, the chain bones wiggled by smooth sine angles), and per repeat the frames are
stepped with ``scene.frame_set`` three ways in one run: with Live on (the frame-change handler
solves each frame), with Blender's IK constraints on the same chains (Standard solver, its
defaults) and with neither; wall and CPU time per frame (median, 95th percentile) and the
largest tip-to-target distance of each::

    .venv/bin/python benchmarks/live.py --playback 100 --repeats 3 [--rigs humanoid,metarig]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT / "benchmarks"))  # live_rigs, live_playback (also under -m)

import bpy  # noqa: E402
from live_rigs import build, reference_pose, target_paths  # noqa: E402


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
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=600)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", type=Path, help="also write the numbers here")
    parser.add_argument(
        "--playback",
        type=int,
        default=0,
        metavar="FRAMES",
        help="instead: per-frame cost of live solving during playback of FRAMES frames beside "
        "Blender's IK constraints (humanoid and Rigify's meta-rig)",
    )
    parser.add_argument("--rigs", default="humanoid,metarig", help="rigs of --playback")
    args = parser.parse_args()
    load = os.getloadavg()[0]
    if args.playback:
        from live_playback import playback, print_playback

        results = []
        for rig in args.rigs.split(","):
            res = playback(rig, args.playback, args.repeats)
            print_playback(res)
            results.append(res)
        print(f"load average at start {load:.2f}, at end {os.getloadavg()[0]:.2f}")
        if args.json:
            args.json.write_text(json.dumps(results, indent=1))
        return 0
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
    print(f"{args.steps} target moves x {args.repeats} repeats")
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
