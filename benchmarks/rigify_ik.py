"""A generated Rigify rig with its IK imported: bake and live posing against Blender's own IK.

Rigify's human meta-rig is generated in this process (706 bones; its IK limbs have IK Stretch
0.1), its four IK controls (hands, feet) move along smooth paths (random phases from ``--seed``)
up to ``--amp`` metres from their rest, past the limbs' reach now and then, where the limbs
stretch. In one run:

- **bake**: Blender's Bake Action (visual keying) of the eight IK chain bones against
  ``jacobian_ik.import_constraints`` and ``jacobian_ik.bake`` over the same frames, medians of
  ``--repeats``; then, played back with the IK constraints removed (ours stashes them), how far
  the chains' tips are from their targets, and from where Blender's IK put them.
- **live**: ``--steps`` drags of the left hand's control by a few centimetres, each followed by
  the depsgraph update a viewport makes, with our live posing on (the chains solved and written
  per update), then with the IK constraints put back (Blender's IK in the evaluation): the
  update's median and 95th percentile, and our handler's.

(Named rigify_ik: benchmarks/ is on ``sys.path`` in other benchmarks, where a module named
rigify would be what enabling Blender's Rigify imports.) ::

    .venv/bin/python -m benchmarks.rigify_ik [--frames 100] [--repeats 3] [--steps 300] [--amp 1]
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from typing import Any

import numpy as np

from . import blender

CONTROLS = ("hand_ik.L", "hand_ik.R", "foot_ik.L", "foot_ik.R")
TIPS = ("MCH-forearm_ik.L", "MCH-forearm_ik.R", "MCH-shin_ik.L", "MCH-shin_ik.R")


def build(frames: int, seed: int, amp: float) -> Any:
    """The generated rig, its IK controls keyed on every frame along smooth paths."""
    import addon_utils
    import bpy
    from mathutils import Vector

    bpy.ops.wm.read_factory_settings(use_empty=True)
    blender.load_addon()
    addon_utils.enable("rigify", default_set=True)
    bpy.ops.object.armature_human_metarig_add()
    bpy.ops.pose.rigify_generate()
    rig = bpy.data.objects["rig"]
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, frames
    rng = np.random.default_rng(seed)
    for name in CONTROLS:
        pb = rig.pose.bones[name]
        size = rng.uniform(0.1, 0.35, 3) * amp
        phase, freq = rng.uniform(0, 2 * math.pi, 3), rng.uniform(0.5, 2.0, 3)
        for f in range(1, frames + 1):
            t = 2 * math.pi * f / frames
            pb.location = Vector(tuple(size * np.sin(freq * t + phase)))
            pb.keyframe_insert("location", frame=f)
    return rig


def tips(rig: Any, frames: int) -> tuple[np.ndarray, np.ndarray]:
    """(F, 4, 3) world tails of the IK chains' tips, and the IK controls' heads, played back."""
    import bpy

    out, goals = [], []
    for f in range(1, frames + 1):
        bpy.context.scene.frame_set(f)
        out.append([rig.matrix_world @ rig.pose.bones[n].tail for n in TIPS])
        goals.append([rig.matrix_world @ rig.pose.bones[n].head for n in CONTROLS])
    return np.array(out), np.array(goals)


def chain_names(rig: Any) -> list[str]:
    return [n for tip in TIPS for n in (tip, rig.pose.bones[tip].parent.name)]


def bake_blender(rig: Any, frames: int) -> float:
    """Blender's Bake Action of the chains (visual keying into the action); seconds."""
    elapsed, ok = blender.bake_action(rig, set(chain_names(rig)), frames)
    assert ok
    return elapsed


def bake_ours(rig: Any, frames: int) -> float:
    import bpy

    with blender.override(rig):
        t0 = time.perf_counter()
        assert bpy.ops.jacobian_ik.bake(frame_start=1, frame_end=frames) == {"FINISHED"}
        return time.perf_counter() - t0


def bakes(args: argparse.Namespace) -> dict[str, Any]:
    import bpy

    rig = build(args.frames, args.seed, args.amp)
    t0 = time.perf_counter()
    blender_tips, targets = tips(rig, args.frames)
    evaluated = time.perf_counter() - t0
    theirs = [bake_blender(rig, args.frames) for _ in range(args.repeats)]
    rig = build(args.frames, args.seed, args.amp)
    with blender.override(rig):
        assert bpy.ops.jacobian_ik.import_constraints() == {"FINISHED"}
    ours = [bake_ours(rig, args.frames) for _ in range(args.repeats)]
    played, _ = tips(rig, args.frames)
    stretch = max(rig.pose.bones[n].length / rig.pose.bones[n].bone.length for n in TIPS)
    return {
        "frames": args.frames,
        "blender_evaluated_s": evaluated,
        "blender_tip_error_mean": float(np.linalg.norm(blender_tips - targets, axis=2).mean()),
        "blender_bake_s": statistics.median(theirs),
        "ours_bake_s": statistics.median(ours),
        "ours_tip_error_mean": float(np.linalg.norm(played - targets, axis=2).mean()),
        "ours_tip_error_max": float(np.linalg.norm(played - targets, axis=2).max()),
        "ours_vs_blender_tips_mean": float(np.linalg.norm(played - blender_tips, axis=2).mean()),
        "stretch_at_last_frame": stretch,
    }


def drag(rig: Any, steps: int) -> list[float]:
    """Seconds of each depsgraph update after a small move of the left hand's control."""
    import bpy
    from mathutils import Vector

    pb, out = rig.pose.bones["hand_ik.L"], []
    for i in range(steps):
        pb.location = Vector(
            (0.05 * math.sin(i / 20), 0.03 * math.cos(i / 15), 0.04 * math.sin(i / 25))
        )
        t0 = time.perf_counter()
        bpy.context.view_layer.update()
        out.append(time.perf_counter() - t0)
    return out


def live(args: argparse.Namespace) -> dict[str, Any]:
    import bpy

    rig = build(2, args.seed, args.amp)
    bpy.context.scene.frame_set(1)
    with blender.override(rig):
        assert bpy.ops.jacobian_ik.import_constraints() == {"FINISHED"}
    module = sys.modules["jacobian_ik.live"]
    handler, real = [], module.update_armature

    def timed(*a: Any, **k: Any) -> Any:
        t0 = time.perf_counter()
        result = real(*a, **k)
        handler.append(time.perf_counter() - t0)
        return result

    module.update_armature = timed
    try:
        rig.jacobian_ik.use_live = True
        drag(rig, 20)  # (the model built, the kernel loaded)
        handler.clear()
        ours = drag(rig, args.steps)
        rig.jacobian_ik.use_live = False
    finally:
        module.update_armature = real
    with blender.override(rig):
        assert bpy.ops.jacobian_ik.restore_constraints() == {"FINISHED"}
    drag(rig, 20)
    theirs = drag(rig, args.steps)
    ms = 1e3
    return {
        "steps": args.steps,
        "ours_update_ms_median": statistics.median(ours) * ms,
        "ours_update_ms_p95": float(np.percentile(ours, 95)) * ms,
        "ours_handler_ms_median": statistics.median(handler) * ms,
        "blender_update_ms_median": statistics.median(theirs) * ms,
        "blender_update_ms_p95": float(np.percentile(theirs, 95)) * ms,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--seed", type=int, default=5)
    parser.add_argument("--amp", type=float, default=1.0, help="scale of the controls' paths")
    args = parser.parse_args(argv)
    blender.load_addon()
    blender.warm_kernel()
    print(blender.git_state())
    b = bakes(args)
    print(
        f"bake, {b['frames']} frames: ours {b['ours_bake_s']:.3f} s, Blender's Bake Action "
        f"{b['blender_bake_s']:.3f} s ({b['blender_bake_s'] / b['ours_bake_s']:.2f}x); "
        f"Blender's IK evaluated over the frames {b['blender_evaluated_s']:.3f} s"
    )
    print(
        f"played back: tips to targets ours {b['ours_tip_error_mean']:.2e} mean, "
        f"{b['ours_tip_error_max']:.2e} max (Blender's IK {b['blender_tip_error_mean']:.2e} "
        f"mean); ours to Blender's tips {b['ours_vs_blender_tips_mean']:.2e} mean; longest "
        f"stretch at the last frame {b['stretch_at_last_frame']:.3f}x"
    )
    li = live(args)
    print(
        f"live, {li['steps']} drags: update ours {li['ours_update_ms_median']:.2f} ms median "
        f"(p95 {li['ours_update_ms_p95']:.2f}; our handler {li['ours_handler_ms_median']:.2f}), "
        f"Blender's IK {li['blender_update_ms_median']:.2f} ms (p95 "
        f"{li['blender_update_ms_p95']:.2f})"
    )


if __name__ == "__main__":
    main()
