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
    }


# -- playback: live solving on frame changes beside Blender's IK constraints -------------------

# Rigify's human meta-rig: hands, feet and head, chains of 3, position goals
METARIG_GOALS = {"hand.L": 0.0, "hand.R": 0.0, "foot.L": 0.0, "foot.R": 0.0, "spine.006": 0.0}


def wiggle_pose(ob: Any, bones: list[str], t: float) -> None:
    """A pose of ``bones`` varying smoothly with ``t`` (radians): each bone's own phase."""
    for k, name in enumerate(bones):
        pb = ob.pose.bones[name]
        pb.rotation_mode = "QUATERNION"
        p = t + 0.7 * k
        e = (0.25 + 0.2 * math.sin(p), 0.15 * math.cos(p), 0.2 * math.sin(p + 1.0))
        pb.rotation_quaternion = Euler(e).to_quaternion()


def chain_of(ob: Any, bone: str, length: int) -> list[str]:
    out, pb = [], ob.pose.bones[bone]
    while pb is not None and len(out) < length:
        out.append(pb.name)
        pb = pb.parent
    return out


def animate_targets(
    ob: Any, goals: dict[str, float], targets: list[Any], pose: Any, frames: int
) -> None:
    """Key each target on every frame at its goal bone's tail frame in ``pose(t)``; then put
    the chain bones back at their rest pose (the same start for both solvers)."""
    chains = sorted({b for g in goals for b in chain_of(ob, g, 3)})
    for f in range(1, frames + 1):
        pose(2 * math.pi * (f - 1) / PERIOD)
        bpy.context.view_layer.update()
        for name, empty in zip(goals, targets, strict=True):
            pb = ob.pose.bones[name]
            empty.matrix_world = ob.matrix_world @ pb.matrix @ Matrix.Translation((0, pb.length, 0))
            empty.keyframe_insert("location", frame=f)
            empty.keyframe_insert("rotation_euler", frame=f)
    for name in chains:
        ob.pose.bones[name].rotation_quaternion = (1.0, 0.0, 0.0, 0.0)


def build_playback(rig: str, frames: int) -> tuple[Any, dict[str, float], list[Any], Any]:
    """The rig with goals (chains of 3) towards Empties animated over ``frames`` frames."""
    from checkout import load_checkout

    addon = load_checkout()
    bpy.ops.wm.read_factory_settings(use_empty=True)
    if rig == "humanoid":
        ob, goals = demo.build_rig(), GOALS
    else:
        import addon_utils

        addon_utils.enable("rigify")
        bpy.ops.object.armature_human_metarig_add()
        ob, goals = bpy.context.object, METARIG_GOALS
    targets = []
    with bpy.context.temp_override(object=ob, active_object=ob):
        for name, weight in goals.items():
            bpy.ops.jacobian_ik.add_goal(bone=name, chain_length=3)
            goal = ob.jacobian_ik.goals[-1]
            goal.rotation_weight = weight
            targets.append(goal.target)
    if rig == "humanoid":
        animate_targets(ob, goals, targets, lambda t: reference_pose(ob, t), frames)
    else:
        bones = sorted({b for g in goals for b in chain_of(ob, g, 3)})
        animate_targets(ob, goals, targets, lambda t: wiggle_pose(ob, bones, t), frames)
    return ob, goals, targets, addon


def tip_errors(ob: Any, goals: dict[str, float], targets: list[Any]) -> float:
    """The largest distance from a goal bone's tail to its target (world units)."""
    worst = 0.0
    for name, empty in zip(goals, targets, strict=True):
        tail = ob.matrix_world @ ob.pose.bones[name].tail
        worst = max(worst, (tail - empty.matrix_world.translation).length)
    return worst


def play(scene: Any, frames: int, probe: Any) -> tuple[list[float], list[float], list[float]]:
    """Jump to frame 1, then step forward through the frames as playback does: the wall and
    CPU (this thread's) time of each ``frame_set`` (Blender's evaluation and every frame
    handler) and ``probe()`` after it."""
    scene.frame_set(1)
    times, cpu, errors = [], [], []
    for f in range(2, frames + 1):
        c0, t0 = time.thread_time(), time.perf_counter()
        scene.frame_set(f)
        times.append(time.perf_counter() - t0)
        cpu.append(time.thread_time() - c0)
        errors.append(probe())
    return times, cpu, errors


def playback(rig: str, frames: int, repeats: int) -> dict[str, Any]:
    """Per frame of playback: live solving, Blender's IK constraints on the same chains, and
    neither (Blender's evaluation alone), in one run, the three interleaved per repeat."""
    ob, goals, targets, addon = build_playback(rig, frames)
    live = sys.modules[addon.__name__ + ".live"]
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, frames
    chains = sorted({b for g in goals for b in chain_of(ob, g, 3)})
    rest = {n: tuple(ob.pose.bones[n].rotation_quaternion) for n in chains}
    solves: list[Any] = []
    original = live.update_armature

    def recorded(*args: Any, **kw: Any) -> Any:
        res = original(*args, **kw)
        if res is not None:
            solves.append(res)
        return res

    out: dict[str, list[float]] = {
        k: [] for k in ("ours", "blender", "none", "ours_cpu", "blender_cpu", "none_cpu")
    }
    errs: dict[str, list[float]] = {k: [] for k in ("ours", "blender")}
    solve_times: list[float] = []
    its: list[int] = []
    for _ in range(repeats):
        for name, q in rest.items():
            ob.pose.bones[name].rotation_quaternion = q
        # ours: live on, no constraints
        ob.jacobian_ik.use_live = True
        live.update_armature = recorded
        solves.clear()
        try:
            t, c, e = play(scene, frames, lambda: tip_errors(ob, goals, targets))
        finally:
            live.update_armature = original
        ob.jacobian_ik.use_live = False
        if len(solves) != frames:  # frame 1 and every step
            raise RuntimeError(f"{len(solves)} live solves for {frames} frames")
        out["ours"] += t
        out["ours_cpu"] += c
        errs["ours"] += e
        solve_times += [r.total_time for r in solves[1:]]
        its += [int(r.result.iterations[0]) for r in solves[1:]]
        for name, q in rest.items():
            ob.pose.bones[name].rotation_quaternion = q
        # Blender: IK constraints on the same chains (Standard solver, its defaults)
        made = []
        for name, empty in zip(goals, targets, strict=True):
            con = ob.pose.bones[name].constraints.new("IK")
            con.target, con.chain_count, con.use_tail = empty, 3, True
            con.use_rotation = goals[name] > 0
            made.append((name, con))
        t, c, e = play(scene, frames, lambda: tip_errors(ob, goals, targets))
        out["blender"] += t
        out["blender_cpu"] += c
        errs["blender"] += e
        for name, con in made:
            ob.pose.bones[name].constraints.remove(con)
        # neither: the evaluation of the frame alone
        t, c, _ = play(scene, frames, lambda: 0.0)
        out["none"] += t
        out["none_cpu"] += c
    res: dict[str, Any] = {"rig": rig, "frames": frames, "repeats": repeats}
    for key, values in out.items():
        v = np.array(values) * 1e3
        res[key] = {"median": float(np.median(v)), "p95": float(np.percentile(v, 95))}
    v = np.array(solve_times) * 1e3
    res["ours_update"] = {"median": float(np.median(v)), "p95": float(np.percentile(v, 95))}
    res["iterations_mean"] = float(np.mean(its))
    for key, values in errs.items():
        res[f"{key}_max_error"] = float(np.max(values))
        res[f"{key}_under_1e-4"] = float(np.mean(np.array(values) < 1e-4))
    return res


def print_playback(res: dict[str, Any]) -> None:
    print(
        f"playback, {res['rig']}: {res['frames']} frames x {res['repeats']} repeats, ms per frame"
    )
    print(f"{'(wall time unless CPU)':<34}{'median':>9}{'p95':>9}")
    rows = (
        ("frame_set, live solving (ours)", "ours"),
        ("frame_set, Blender IK constraints", "blender"),
        ("frame_set, neither", "none"),
        ("our live update alone", "ours_update"),
        ("CPU: frame_set, ours", "ours_cpu"),
        ("CPU: frame_set, Blender IK", "blender_cpu"),
        ("CPU: frame_set, neither", "none_cpu"),
    )
    for label, key in rows:
        print(f"{label:<34}{res[key]['median']:9.3f}{res[key]['p95']:9.3f}")
    ratio = res["ours"]["median"] / res["blender"]["median"]
    ratio_cpu = res["ours_cpu"]["median"] / res["blender_cpu"]["median"]
    print(
        f"ours / Blender per frame (medians): {ratio:.1f}x wall, {ratio_cpu:.1f}x CPU; "
        f"our iterations per frame {res['iterations_mean']:.2f}"
    )
    res["ratio_wall"], res["ratio_cpu"] = ratio, ratio_cpu
    print(
        f"largest tip error: ours {res['ours_max_error']:.2e} "
        f"({100 * res['ours_under_1e-4']:.1f} % of frames under 1e-4), Blender "
        f"{res['blender_max_error']:.2e} ({100 * res['blender_under_1e-4']:.1f} %)"
    )


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
