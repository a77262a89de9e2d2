"""Playback with Live (``benchmarks/live.py --playback``): per frame, live solving on frame
changes beside Blender's IK constraints on the same chains and beside neither, in one run."""

from __future__ import annotations

import sys
import time
from typing import Any

import bpy
import numpy as np
from live_rigs import build_playback, chain_of


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
