"""Real motion on a real rig: the CMU walk (BVH) baked onto Rigify's human meta-rig.

1. Imports ``../shared/data/cmu-131-01-walk.bvh`` with Blender's bundled BVH importer (996
   frames at 120 fps, metres) and adds Rigify's human meta-rig (``armature_human_metarig_add``).
2. Scale: s = the rig's hip-joint height above the ankle / the clip's (at rest), so the legs
   match (the clip's subject is smaller than the meta-rig). Each tracked point's world path is
   scaled by s and shifted up by a constant c_j = (rig height of the joint - s x clip height
   of the joint), both measured above the ankle at rest: the torso of the meta-rig is longer
   than the clip's, so its head and hands are higher.
3. The meta-rig's object follows the clip's pelvis (position scaled, rotation as in the clip),
   keyed every frame; the bones above the chains then follow it.
4. Empties are keyed along the paths; goals (chain lengths):
   - feet: ``foot.L/R`` tail (ball of the foot) <- clip ``LeftToe/RightToe`` head; chain 3
     (foot, shin, thigh); pole: the clip's knee (``LeftKnee`` head) -> the knee bends as in the
     clip, no pole angle;
   - hands: ``hand.L/R`` head (the wrist) <- clip ``LeftWrist/RightWrist`` head; chain 3
     (hand, forearm, upper_arm); pole: the clip's elbow;
   - head: ``spine.006`` tail (top of the head) <- clip ``Head`` tail; chain 5 (head, neck
     x2, chest, spine.002): the shoulders hang from the chest, so arms and head share a tree.
5. Lean bake (``reduce_keys``, 0.25 degrees, 2 mm) into a new action, then plays the keys back
   with Blender (no IK) and measures per-goal tracking error (mean, p95, max), foot sliding
   during contact (contact: the clip's foot moves slower than 0.2 m/s, scaled, for at least
   0.1 s; sliding: the largest horizontal distance of the baked foot from where it was at the
   start of the contact), time and keys. Writes a PNG plot of the error over time and a JSON
   and markdown report to benchmarks/results/.

    bash scripts/mocap.sh [--frames N] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import bpy as _bpy
import numpy as np

bpy: Any = _bpy

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))  # also when imported by a benchmark
from checkout import load_checkout  # type: ignore[import-not-found]  # noqa: E402

CLIP = ROOT.parent / "shared" / "data" / "cmu-131-01-walk.bvh"
# goal bone, use_tail, chain length, clip joint (head or tail), pole joint (head) or None
GOALS: list[tuple[str, bool, int, tuple[str, str], str | None]] = [
    ("foot.L", True, 3, ("LeftToe", "head"), "LeftKnee"),
    ("foot.R", True, 3, ("RightToe", "head"), "RightKnee"),
    ("hand.L", False, 3, ("LeftWrist", "head"), "LeftElbow"),
    ("hand.R", False, 3, ("RightWrist", "head"), "RightElbow"),
    ("spine.006", True, 5, ("Head", "tail"), None),
]
CONTACT_SPEED = 0.2  # m/s (scaled), below which a foot is planted
CONTACT_MIN = 0.1  # s


def key_object(ob: Any, write: Any, paths: dict[tuple[str, int], np.ndarray]) -> None:
    """Key ``ob``'s transform channels every frame, in bulk."""
    if ob.animation_data is None:
        ob.animation_data_create()
    if ob.animation_data.action is None:
        ob.animation_data.action = bpy.data.actions.new(f"{ob.name}Action")
    action = ob.animation_data.action
    for (path, index), values in paths.items():
        fc = write.ensure_fcurve(ob, action, path, index, "Object Transforms")
        frames = np.arange(1, len(values) + 1, dtype=np.float64)
        write.replace_keys(fc, frames, values, 0)  # 0: constant (every frame is keyed)


def point(ob: Any, bone: str, end: str) -> np.ndarray:
    pb = ob.pose.bones[bone]
    return np.array(ob.matrix_world @ (pb.head if end == "head" else pb.tail))


def rest_point(ob: Any, bone: str, end: str) -> np.ndarray:
    b = ob.data.bones[bone]
    return np.array(ob.matrix_world @ (b.head_local if end == "head" else b.tail_local))


def contacts(path: np.ndarray, fps: float) -> list[tuple[int, int]]:
    """Frame intervals [a, b) where a point moves slower than CONTACT_SPEED."""
    speed = np.linalg.norm(np.gradient(path, axis=0), axis=1) * fps
    slow = speed < CONTACT_SPEED
    out, start = [], None
    for f, s in enumerate([*slow, False]):
        if s and start is None:
            start = f
        elif not s and start is not None:
            if f - start >= CONTACT_MIN * fps:
                out.append((start, f))
            start = None
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="CMU walk onto Rigify's meta-rig")
    parser.add_argument("--frames", type=int, default=0, help="frames to use (0: all)")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    parser.add_argument("--blend", type=Path, help="also save the baked scene here")
    args = parser.parse_args(argv)
    t_start = time.perf_counter()
    addon = load_checkout()
    from mathutils import Matrix, Quaternion

    write = addon.bridge.write
    bpy.ops.wm.read_factory_settings(use_empty=True)
    import addon_utils

    addon_utils.enable("rigify", default_set=True)
    bpy.ops.object.armature_human_metarig_add()
    rig = bpy.context.object
    bpy.ops.object.mode_set(mode="OBJECT")
    bpy.ops.import_anim.bvh(filepath=str(CLIP), update_scene_fps=True, update_scene_duration=True)
    clip = bpy.context.object
    scene = bpy.context.scene
    fps = scene.render.fps / scene.render.fps_base
    n = scene.frame_end - scene.frame_start + 1
    if args.frames:
        n = min(n, args.frames)
    scene.frame_start, scene.frame_end = 1, n

    # scale and vertical corrections from the rest poses (heights above the ankle)
    rig_ankle = rest_point(rig, "foot.L", "head")[2]
    clip_ankle = rest_point(clip, "LeftAnkle", "head")[2]
    s = (rest_point(rig, "thigh.L", "head")[2] - rig_ankle) / (
        rest_point(clip, "LeftHip", "head")[2] - clip_ankle
    )

    def correction(rig_z: float, clip_z: float) -> float:
        return (rig_z - rig_ankle) - s * (clip_z - clip_ankle)

    joints = {(j, e) for _, _, _, (j, e), _ in GOALS} | {
        (p, "head") for *_, p in GOALS if p is not None
    }
    rig_of = {(j, e): (b, t) for b, t, _, (j, e), _ in GOALS}
    rig_of.update(
        {
            (p, "head"): ("shin" + b[4:] if b.startswith("foot") else "forearm" + b[4:], False)
            for b, _, _, _, p in GOALS
            if p is not None
        }
    )
    lift = {
        k: correction(
            rest_point(rig, rig_of[k][0], "tail" if rig_of[k][1] else "head")[2],
            rest_point(clip, k[0], k[1])[2],
        )
        for k in joints
    }
    lift_hips = correction(rest_point(rig, "spine", "head")[2], rest_point(clip, "Hips", "head")[2])

    # sample the clip
    paths = {k: np.empty((n, 3)) for k in joints}
    hips_pos, hips_rot = np.empty((n, 3)), np.empty((n, 4))
    hips_rest = (clip.matrix_world @ clip.data.bones["Hips"].matrix_local).to_quaternion()
    for f in range(n):
        scene.frame_set(f + 1)
        for k in joints:
            paths[k][f] = s * point(clip, *k) + [0.0, 0.0, lift[k]]
        m = clip.matrix_world @ clip.pose.bones["Hips"].matrix
        hips_pos[f] = s * np.array(m.translation) + [0.0, 0.0, lift_hips]
        hips_rot[f] = m.to_quaternion() @ hips_rest.inverted()
    for f in range(1, n):  # one hemisphere
        if np.dot(hips_rot[f], hips_rot[f - 1]) < 0:
            hips_rot[f] *= -1
    # the rig's object: its pelvis (spine head) on the clip's, turned like it
    pelvis = Matrix.Translation(-rig.data.bones["spine"].head_local)
    loc = np.empty((n, 3))
    for f in range(n):
        m = Matrix.Translation(hips_pos[f]) @ Quaternion(hips_rot[f]).to_matrix().to_4x4() @ pelvis
        loc[f] = m.translation
    rig.rotation_mode = "QUATERNION"
    key_object(
        rig,
        write,
        {("location", i): loc[:, i] for i in range(3)}
        | {("rotation_quaternion", i): hips_rot[:, i] for i in range(4)},
    )
    clip.hide_viewport = True

    # targets, poles and goals
    empties = {}
    for k in joints:
        e = bpy.data.objects.new(f"IK {k[0]}", None)
        scene.collection.objects.link(e)
        key_object(e, write, {("location", i): paths[k][:, i] for i in range(3)})
        empties[k] = e
    props = rig.jacobian_ik
    # 0.1 mm is far below what mocap needs; unreachable frames (proportions differ) stop at 50
    props.tolerance, props.max_iterations = 1e-4, 50
    for bone, use_tail, chain, joint, pole in GOALS:
        g = props.goals.add()
        g.bone, g.use_tail, g.chain_length, g.target = bone, use_tail, chain, empties[joint]
        if pole is not None:
            g.pole_target = empties[(pole, "head")]
    scene.frame_set(1)

    t0 = time.perf_counter()
    run = addon.bridge.run(
        rig,
        scene,
        range(1, n + 1),
        reduce_keys=True,
        key_tolerance=0.25,
        position_tolerance=0.002,
        new_action=True,
    )
    bake_time = time.perf_counter() - t0

    # playback without IK
    errors = np.empty((n, len(GOALS)))
    feet = {b: np.empty((n, 3)) for b, *_ in GOALS if b.startswith("foot")}
    for f in range(n):
        scene.frame_set(f + 1)
        for e, (bone, use_tail, _, joint, _) in enumerate(GOALS):
            p = point(rig, bone, "tail" if use_tail else "head")
            errors[f, e] = np.linalg.norm(p - paths[joint][f])
            if bone in feet:
                feet[bone][f] = p
    goals = {
        bone: {
            "mean": float(errors[:, e].mean()),
            "p95": float(np.percentile(errors[:, e], 95)),
            "max": float(errors[:, e].max()),
        }
        for e, (bone, *_) in enumerate(GOALS)
    }
    sliding = {}
    for bone, _, _, joint, _ in GOALS:
        if bone not in feet:
            continue
        spans = contacts(paths[joint], fps)
        baked = [
            float(np.linalg.norm(feet[bone][a:b, :2] - feet[bone][a, :2], axis=1).max())
            for a, b in spans
        ]
        source = [
            float(np.linalg.norm(paths[joint][a:b, :2] - paths[joint][a, :2], axis=1).max())
            for a, b in spans
        ]
        sliding[bone] = {
            "contacts": len(spans),
            "contact_frames": int(sum(b - a for a, b in spans)),
            "baked_drift_mean": float(np.mean(baked)) if baked else 0.0,
            "baked_drift_max": float(np.max(baked)) if baked else 0.0,
            "clip_drift_mean": float(np.mean(source)) if source else 0.0,
            "clip_drift_max": float(np.max(source)) if source else 0.0,
        }
    total = time.perf_counter() - t_start
    report = {
        "clip": CLIP.name,
        "frames": n,
        "fps": fps,
        "scale": float(s),
        "rig": f"{rig.name} ({len(rig.data.bones)} bones)",
        "goals": goals,
        "foot_sliding": sliding,
        "keys_written": run.keys,
        "keys_full_bake": run.full_keys,
        "converged_frames": run.converged,
        "most_iterations": int(run.iterations.max()),
        "solver_error_max": float(run.position_error.max()),
        "warnings": run.warnings,
        "time": {
            "import_and_setup": t0 - t_start,
            "bake": bake_time,
            "bake_read": run.read_time,
            "bake_solve": run.solve_time,
            "bake_write": run.write_time,
            "total": total,
        },
        "action": rig.animation_data.action.name,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    plot(errors, [b for b, *_ in GOALS], fps, args.out / "mocap_error.png", report)
    (args.out / "mocap_report.json").write_text(json.dumps(report, indent=2) + "\n")
    (args.out / "mocap_report.md").write_text(markdown(report))
    if args.blend:
        bpy.ops.wm.save_as_mainfile(filepath=str(args.blend.resolve()))
        report["saved"] = str(args.blend)
    print(json.dumps(report, indent=2))
    return 0


def plot(errors: np.ndarray, names: list[str], fps: float, path: Path, report: dict) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t = np.arange(len(errors)) / fps
    fig, ax = plt.subplots(figsize=(8, 3.6))
    for e, name in enumerate(names):
        ax.plot(t, np.maximum(errors[:, e], 1e-7) * 1000, lw=1, label=name)
    ax.set_yscale("log")
    ax.set_xlabel("time (s)")
    ax.set_ylabel("playback error (mm)")
    ax.set_title(
        f"CMU 131-01 walk on Rigify's meta-rig: {report['frames']} frames, "
        f"{report['keys_written']} keys (lean bake)",
        fontsize=9,
    )
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=7, ncol=5, loc="upper center")
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)


def markdown(report: dict) -> str:
    lines = [
        f"# Mocap: {report['clip']} on {report['rig']}",
        "",
        f"{report['frames']} frames at {report['fps']:.0f} fps, scale {report['scale']:.3f}, "
        f"{report['keys_written']} keys written (full bake: {report['keys_full_bake']}), "
        f"total {report['time']['total']:.1f} s (bake {report['time']['bake']:.1f} s).",
        "",
        "| goal | mean (mm) | p95 (mm) | max (mm) |",
        "|---|---|---|---|",
    ]
    for name, g in report["goals"].items():
        lines.append(
            f"| {name} | {g['mean'] * 1e3:.2f} | {g['p95'] * 1e3:.2f} | {g['max'] * 1e3:.2f} |"
        )
    lines += [
        "",
        "| foot | contacts | baked drift mean / max (mm) | clip drift mean / max (mm) |",
        "|---|---|---|---|",
    ]
    for name, c in report["foot_sliding"].items():
        lines.append(
            f"| {name} | {c['contacts']} | {c['baked_drift_mean'] * 1e3:.1f} / "
            f"{c['baked_drift_max'] * 1e3:.1f} | {c['clip_drift_mean'] * 1e3:.1f} / "
            f"{c['clip_drift_max'] * 1e3:.1f} |"
        )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main(sys.argv[sys.argv.index("--") + 1 :] if "--" in sys.argv else sys.argv[1:]))
