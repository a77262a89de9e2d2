"""Real motion on a real rig: a BVH with the CMU skeleton's joint names (by default the CMU walk)
retargeted onto Rigify's human meta-rig by the meta-rig's own proportions, baked with Jacobian IK.

1. Imports the BVH with Blender's bundled importer (metres) and adds Rigify's human meta-rig.
2. Retarget by the target's proportions (no global scale): every limb's goal is placed from the
   TARGET rig's own joint, along the source's direction, by the target's limb length:
   - hips: the rig's pelvis follows the clip's ``Hips`` scaled by r_leg = target leg length /
     source leg length (thigh + shin, at rest), turned as the clip's hips turn; the bones above
     the chains follow the rig object rigidly;
   - ankle = target hip joint + r_leg (source ankle - source hip), that side's r_leg; the foot
     turns as the source's foot turns (world delta from rest), the goal is the ball of the foot
     (``foot`` tail = ankle + that rotation of the rig's rest foot vector) with an orientation
     goal (rotation weight 1); knee pole = target hip + r_leg (source knee - source hip);
   - wrist = target shoulder + r_arm (source wrist - source shoulder), r_arm = target arm
     length / source arm length; elbow pole likewise;
   - top of the head = target neck base + r_head (source head top - source neck base), chain
     head + neck (3 bones) so the chest, and with it the shoulders, stays as the hips carry it.
   Every target is then as far out of its chain as the source's is out of its own: a reach
   the source made, the target can make.
3. Foot contacts are detected in the source (the goal's path, before pinning): a foot is down
   when it moves slower than CONTACT_SPEED and is lower than CONTACT_HEIGHT above its lowest
   point (both in target leg lengths, so any clip and any rig), and up again only once it is
   faster or higher than 1.5 times those (hysteresis); contacts shorter
   than CONTACT_MIN seconds are dropped. With pinning on (the default; ``--no-pin`` turns it
   off), the foot's goal is held at the contact's mean position, moved (as little as it takes)
   to where the leg reaches it over the whole contact (within REACH of the leg's length: a
   held point the leg cannot reach would be missed and the foot would slide), and blended back
   to the path over BLEND seconds on either side (smoothstep), so nothing pops.
4. A bake (the add-on's lean keys at its default tolerances) into a new action, played back by
   Blender with no IK: per-goal error (mean, p95, max) against the goals, foot sliding during
   contacts (largest horizontal distance of the baked foot from where it was at the contact's
   start; the source's own for comparison), converged frames, and for every frame that did not
   converge the reason (a goal beyond its chain's reach, or the iteration limit). Writes
   mocap_report.json / .md and two small PNGs (error over time; the feet's paths before and
   after) into --out.

    bash scripts/mocap.sh [--bvh FILE] [--out DIR] [--frames N] [--no-pin]
"""

from __future__ import annotations

import argparse
import itertools
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
CONTACT_SPEED = 0.1  # target leg lengths per second: below it (and low) a foot is down
CONTACT_HEIGHT = 0.06  # target leg lengths above the foot's lowest point
CONTACT_MIN = 0.1  # s
BLEND = 0.1  # s, on either side of a contact
REACH = 0.995  # a pinned ankle stays within this share of the leg's length from the hip
SIDES = {"L": "Left", "R": "Right"}
# goal bone, use_tail, chain length, rotation weight
GOALS: list[tuple[str, bool, int, float]] = [
    ("foot.L", True, 3, 1.0),
    ("foot.R", True, 3, 1.0),
    ("hand.L", False, 3, 0.0),
    ("hand.R", False, 3, 0.0),
    ("spine.006", True, 3, 0.0),
]


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


def rest(ob: Any, bone: str, end: str = "head") -> np.ndarray:
    b = ob.data.bones[bone]
    return np.array(ob.matrix_world @ (b.head_local if end == "head" else b.tail_local))


def length(points: list[np.ndarray]) -> float:
    return float(sum(np.linalg.norm(b - a) for a, b in itertools.pairwise(points)))


def hemisphere(q: np.ndarray) -> np.ndarray:
    """Quaternions (F, 4) flipped to one hemisphere frame to frame."""
    q = q.copy()
    for f in range(1, len(q)):
        if np.dot(q[f], q[f - 1]) < 0:
            q[f] *= -1
    return q


def contacts(path: np.ndarray, fps: float, leg: float) -> list[tuple[int, int]]:
    """Frame intervals [a, b) where a foot is down: slow and low, with hysteresis (see above)."""
    speed = np.linalg.norm(np.gradient(path, axis=0), axis=1) * fps / leg
    height = (path[:, 2] - np.percentile(path[:, 2], 2)) / leg
    down_in = (speed < CONTACT_SPEED) & (height < CONTACT_HEIGHT)
    up_out = (speed > 1.5 * CONTACT_SPEED) | (height > 1.5 * CONTACT_HEIGHT)
    out, start = [], None
    for f in range(len(path) + 1):
        if start is None:
            if f < len(path) and down_in[f]:
                start = f
        elif f == len(path) or up_out[f]:
            if f - start >= CONTACT_MIN * fps:
                out.append((start, f))
            start = None
    return out


def pin(
    path: np.ndarray,
    spans: list[tuple[int, int]],
    fps: float,
    centers: np.ndarray | None = None,
    radius: float = np.inf,
) -> tuple[np.ndarray, list[float]]:
    """The path held at each contact's mean position, blended in and out over BLEND seconds.

    With ``centers`` (F, 3) the held point is moved, as little as it takes, to where it is
    within ``radius`` of every centre over the contact and its blends (the leg's reach: the
    centre is where the hip puts the ball of a fully stretched foot; ``reachable``). A blend of
    two reachable points is reachable (the reach is a ball), so every pinned frame is too.
    Returns the pinned path and how far each contact's held point was moved.
    """
    out = path.copy()
    n, ramp = len(path), max(1, round(BLEND * fps))
    f = np.arange(n)
    moved = []
    for a, b in spans:
        held = path[a:b].mean(axis=0)
        if centers is not None:
            near = centers[max(0, a - ramp) : min(n, b + ramp)]
            held, mean = reachable(held, near, radius), held
            moved.append(float(np.linalg.norm(held - mean)))
        d = np.maximum(np.maximum(a - f, f - (b - 1)), 0) / (ramp + 1)  # 0 inside
        t = np.clip(1.0 - d, 0.0, 1.0)
        w = t * t * (3.0 - 2.0 * t)  # smoothstep
        out += w[:, None] * (held - out)
    return out, moved


def reachable(p: np.ndarray, centers: np.ndarray, radius: float, rounds: int = 200) -> np.ndarray:
    """A point near ``p`` within ``radius`` of every centre: projections onto the ball that is
    furthest off, one at a time, until none is (the balls' intersection, when there is one, is
    convex; else the point where the rounds end)."""
    p = p.copy()
    for _ in range(rounds):
        dist = np.linalg.norm(p - centers, axis=1)
        k = int(np.argmax(dist))
        if dist[k] <= radius:
            break
        p = centers[k] + (p - centers[k]) * (radius * (1.0 - 1e-9) / dist[k])
    return p


def drift(path: np.ndarray, spans: list[tuple[int, int]]) -> list[float]:
    """Per contact: the largest horizontal distance from where the foot was at its start."""
    return [float(np.linalg.norm(path[a:b, :2] - path[a, :2], axis=1).max()) for a, b in spans]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="A CMU-skeleton BVH onto Rigify's meta-rig")
    parser.add_argument("--bvh", type=Path, default=CLIP, help="BVH with CMU joint names")
    parser.add_argument("--frames", type=int, default=0, help="frames to use (0: all)")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    parser.add_argument("--blend", type=Path, help="also save the baked scene here")
    parser.add_argument("--no-pin", dest="pin", action="store_false", help="feet not pinned")
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
    bpy.ops.import_anim.bvh(
        filepath=str(args.bvh), update_scene_fps=True, update_scene_duration=True
    )
    clip = bpy.context.object
    scene = bpy.context.scene
    fps = scene.render.fps / scene.render.fps_base
    span = clip.animation_data.action.frame_range  # the scene's may be longer
    first, n = round(span[0]), round(span[1]) - round(span[0]) + 1
    if args.frames:
        n = min(n, args.frames)

    # proportions at rest: limb lengths of both skeletons
    leg_t = {s: [rest(rig, f"{b}.{s}") for b in ("thigh", "shin", "foot")] for s in SIDES}
    leg_s = {s: [rest(clip, f"{p}{b}") for b in ("Hip", "Knee", "Ankle")] for s, p in SIDES.items()}
    arm_t = {s: [rest(rig, f"{b}.{s}") for b in ("upper_arm", "forearm", "hand")] for s in SIDES}
    arm_s = {
        s: [rest(clip, f"{p}{b}") for b in ("Shoulder", "Elbow", "Wrist")] for s, p in SIDES.items()
    }
    head_t = [rest(rig, b) for b in ("spine.004", "spine.005", "spine.006")]
    head_t.append(rest(rig, "spine.006", "tail"))
    head_s = [rest(clip, b) for b in ("lowerneck", "Neck", "Head")] + [rest(clip, "Head", "tail")]
    r_legs = {s: length(leg_t[s]) / length(leg_s[s]) for s in SIDES}
    r_leg = float(np.mean(list(r_legs.values())))  # the hips'
    r_arm = {s: length(arm_t[s]) / length(arm_s[s]) for s in SIDES}
    r_head = length(head_t) / length(head_s)
    foot_vec = {s: rest(rig, f"foot.{s}", "tail") - leg_t[s][2] for s in SIDES}
    foot_rest_t = {s: np.array(rig.data.bones[f"foot.{s}"].matrix_local.to_3x3()) for s in SIDES}

    # sample the clip: joint positions, hips and feet rotations
    joints = {"Hips", "lowerneck"}
    for p in SIDES.values():
        joints |= {f"{p}{b}" for b in ("Hip", "Knee", "Ankle", "Shoulder", "Elbow", "Wrist")}
    src = {k: np.empty((n, 3)) for k in joints}
    src["HeadTop"] = np.empty((n, 3))
    hips_rot = np.empty((n, 4))
    foot_rot = {s: np.empty((n, 3, 3)) for s in SIDES}
    hips_rest = (clip.matrix_world @ clip.data.bones["Hips"].matrix_local).to_quaternion()
    foot_rest_s = {
        s: np.array((clip.matrix_world @ clip.data.bones[f"{p}Ankle"].matrix_local).to_3x3())
        for s, p in SIDES.items()
    }
    for f in range(n):
        scene.frame_set(first + f)
        mw = clip.matrix_world
        for k in joints:
            src[k][f] = mw @ clip.pose.bones[k].head
        src["HeadTop"][f] = mw @ clip.pose.bones["Head"].tail
        m = mw @ clip.pose.bones["Hips"].matrix
        hips_rot[f] = m.to_quaternion() @ hips_rest.inverted()
        for s, p in SIDES.items():
            r = np.array((mw @ clip.pose.bones[f"{p}Ankle"].matrix).to_3x3().normalized())
            foot_rot[s][f] = r @ foot_rest_s[s].T @ foot_rest_t[s]  # source's turn, target's foot
    hips_rot = hemisphere(hips_rot)
    scene.frame_start, scene.frame_end = 1, n

    # the rig object: its pelvis on the clip's hips scaled by the leg ratio, turned like them;
    # vertically so that the rig's hip joints are r_leg x the clip's above the floor (z = 0)
    pelvis = rest(rig, "spine")
    hips_s = rest(clip, "Hips")
    lift = np.mean(
        [r_leg * (leg_s[s][0][2] - hips_s[2]) - (leg_t[s][0][2] - pelvis[2]) for s in SIDES]
    )
    hips_pos = r_leg * src["Hips"] + [0.0, 0.0, lift]
    world = np.empty((n, 4, 4))
    for f in range(n):
        world[f] = np.array(
            Matrix.Translation(hips_pos[f].tolist())
            @ Quaternion(hips_rot[f]).to_matrix().to_4x4()
            @ Matrix.Translation((-pelvis).tolist())
        )

    def carried(p: np.ndarray) -> np.ndarray:  # a rest point of the rig, carried by the object
        return np.einsum("fij,j->fi", world[:, :3, :3], p) + world[:, :3, 3]

    targets: dict[str, np.ndarray] = {}
    poles: dict[str, np.ndarray] = {}
    rotations: dict[str, np.ndarray] = {}
    roots: dict[str, np.ndarray] = {}
    toe: dict[str, np.ndarray] = {}  # per side: ankle to ball of the foot, turned (F, 3)
    for s, p in SIDES.items():
        hip = carried(leg_t[s][0])
        ankle = hip + r_legs[s] * (src[f"{p}Ankle"] - src[f"{p}Hip"])
        toe[s] = np.einsum("fij,j->fi", foot_rot[s], foot_rest_t[s].T @ foot_vec[s])
        targets[f"foot.{s}"] = ankle + toe[s]  # the ball: the ankle plus the turned foot
        rotations[f"foot.{s}"] = foot_rot[s]
        poles[f"foot.{s}"] = hip + r_legs[s] * (src[f"{p}Knee"] - src[f"{p}Hip"])
        roots[f"foot.{s}"] = hip
        shoulder = carried(arm_t[s][0])
        targets[f"hand.{s}"] = shoulder + r_arm[s] * (src[f"{p}Wrist"] - src[f"{p}Shoulder"])
        poles[f"hand.{s}"] = shoulder + r_arm[s] * (src[f"{p}Elbow"] - src[f"{p}Shoulder"])
        roots[f"hand.{s}"] = shoulder
    neck = carried(head_t[0])
    targets["spine.006"] = neck + r_head * (src["HeadTop"] - src["lowerneck"])
    roots["spine.006"] = neck

    # foot contacts in the source (the goal's path before pinning), then pinning
    leg = float(np.mean([length(leg_t[s]) for s in SIDES]))
    spans = {f"foot.{s}": contacts(targets[f"foot.{s}"], fps, leg) for s in SIDES}
    before = {b: targets[b].copy() for b in spans}
    moved: dict[str, list[float]] = {}
    if args.pin:
        for s in SIDES:
            b = f"foot.{s}"
            radius = REACH * length(leg_t[s])  # the ball is reachable within this of hip + toe
            targets[b], moved[b] = pin(targets[b], spans[b], fps, roots[b] + toe[s], radius)

    # the rig object, targets, poles and goals
    rig.rotation_mode = "QUATERNION"
    key_object(
        rig,
        write,
        {("location", i): world[:, i, 3] - 0.0 for i in range(3)}
        | {("rotation_quaternion", i): hips_rot[:, i] for i in range(4)},
    )
    clip.hide_viewport = True
    props = rig.jacobian_ik
    props.tolerance, props.max_iterations = 1e-4, 100
    for bone, use_tail, chain, weight in GOALS:
        target = bpy.data.objects.new(f"IK {bone}", None)
        scene.collection.objects.link(target)
        channels = {("location", i): targets[bone][:, i] for i in range(3)}
        if bone in rotations:
            target.rotation_mode = "QUATERNION"
            q = hemisphere(np.array([Matrix(r.tolist()).to_quaternion() for r in rotations[bone]]))
            channels |= {("rotation_quaternion", i): q[:, i] for i in range(4)}
        key_object(target, write, channels)
        g = props.goals.add()
        g.bone, g.use_tail, g.chain_length, g.target = bone, use_tail, chain, target
        g.rotation_weight = weight
        if bone in poles:
            pole = bpy.data.objects.new(f"pole {bone}", None)
            scene.collection.objects.link(pole)
            key_object(pole, write, {("location", i): poles[bone][:, i] for i in range(3)})
            g.pole_target = pole
    scene.frame_set(1)

    t0 = time.perf_counter()
    run = addon.bridge.run(rig, scene, range(1, n + 1), reduce_keys=True, new_action=True)
    bake_time = time.perf_counter() - t0

    # playback without IK
    names = [b for b, *_ in GOALS]
    errors = np.empty((n, len(GOALS)))
    angle = {b: np.empty(n) for b in rotations}
    baked = {b: np.empty((n, 3)) for b in spans}
    for f in range(n):
        scene.frame_set(f + 1)
        for e, (bone, use_tail, _, _) in enumerate(GOALS):
            pb = rig.pose.bones[bone]
            at = np.array(rig.matrix_world @ (pb.tail if use_tail else pb.head))
            errors[f, e] = np.linalg.norm(at - targets[bone][f])
            if bone in baked:
                baked[bone][f] = at
            if bone in angle:
                r = np.array((rig.matrix_world @ pb.matrix).to_3x3().normalized())
                c = (np.trace(r @ rotations[bone][f].T) - 1.0) / 2.0
                angle[bone][f] = float(np.degrees(np.arccos(np.clip(c, -1.0, 1.0))))
    goals: dict[str, dict[str, float]] = {}
    for e, bone in enumerate(names):
        goals[bone] = {
            "mean": float(errors[:, e].mean()),
            "p95": float(np.percentile(errors[:, e], 95)),
            "max": float(errors[:, e].max()),
        }
        if bone in angle:
            goals[bone] |= {
                "rotation_mean_deg": float(angle[bone].mean()),
                "rotation_max_deg": float(angle[bone].max()),
            }
    sliding = {}
    for bone, sp in spans.items():
        ours, source = drift(baked[bone], sp), drift(before[bone], sp)
        sliding[bone] = {
            "contacts": len(sp),
            "contact_frames": int(sum(b - a for a, b in sp)),
            "mean": float(np.mean(ours)) if ours else 0.0,
            "max": float(np.max(ours)) if ours else 0.0,
            "source_mean": float(np.mean(source)) if source else 0.0,
            "source_max": float(np.max(source)) if source else 0.0,
            # how far pinning moved each contact's held point to keep it within the leg's reach
            "held_moved_max": float(np.max(moved[bone])) if moved.get(bone) else 0.0,
            "held_moved_contacts": int(np.sum(np.array(moved.get(bone, [])) > 0.0)),
        }

    # why frames did not converge: every frame where a goal is off by more than the tolerance
    # or the solver hit its iteration limit (a superset of the frames the solver does not count
    # as converged), by reason: a goal beyond its chain's reach, nearly straight, else the limit
    reach = {}
    for bone, pts in [(f"foot.{s}", leg_t[s]) for s in SIDES] + [
        (f"hand.{s}", arm_t[s]) for s in SIDES
    ]:
        end = targets[bone]
        if bone in rotations:  # the ankle must reach: ball minus the turned foot
            s = bone[-1]
            end = end - np.einsum("fij,j->fi", rotations[bone], foot_rest_t[s].T @ foot_vec[s])
        reach[bone] = np.linalg.norm(end - roots[bone], axis=1) / length(pts)
    reach["spine.006"] = np.linalg.norm(targets["spine.006"] - neck, axis=1) / length(head_t)
    stuck = np.flatnonzero(
        (run.iterations >= props.max_iterations)
        | (run.position_error.max(axis=1) > props.tolerance)
    )
    reasons: dict[str, int] = {}
    for f in stuck:
        far = [b for b in names if reach[b][f] > 1.0]
        near = [b for b in names if reach[b][f] > 0.995]
        why = (
            f"beyond reach: {', '.join(far)}"
            if far
            else f"nearly straight (over 99.5 % of the chain's reach): {', '.join(near)}"
            if near
            else "iteration limit"
        )
        reasons[why] = reasons.get(why, 0) + 1
    total = time.perf_counter() - t_start
    report = {
        "clip": args.bvh.name,
        "frames": n,
        "fps": fps,
        "retarget": {"leg_ratio": r_leg, "arm_ratio": r_arm, "head_ratio": r_head},
        "pinned": bool(args.pin),
        "rig": f"{rig.name} ({len(rig.data.bones)} bones)",
        "goals": goals,
        "foot_sliding": sliding,
        "keys_written": run.keys,
        "keys_full_bake": run.full_keys,
        "converged_frames": run.converged,
        "not_converged": {
            "frames": int(n - run.converged),
            "frames_off_or_at_the_limit": len(stuck),
            "reasons": reasons,
        },
        "largest_reach": {b: float(r.max()) for b, r in reach.items()},
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
    plot(errors, names, fps, args.out / "mocap_error.png", report)
    plot_feet(before, baked, spans, fps, args.out / "mocap_feet.png")
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
        f"{report['clip']} on Rigify's meta-rig: {report['frames']} frames, "
        f"{report['keys_written']} keys (lean bake)",
        fontsize=9,
    )
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=7, ncol=5, loc="upper center")
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)


def plot_feet(
    before: dict[str, np.ndarray],
    after: dict[str, np.ndarray],
    spans: dict[str, list[tuple[int, int]]],
    fps: float,
    path: Path,
) -> None:
    """Left: the feet's horizontal paths before (the retargeted source) and after (baked, played
    back), along the direction of travel, contacts shaded. Right: during each contact, the
    horizontal distance from where the foot was at its start (the sliding), before and after."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(before), 2, figsize=(9, 4.2), width_ratios=(2, 1))
    for row, (bone, b) in zip(axes, before.items(), strict=True):
        travel = b[-1, :2] - b[0, :2]
        norm = float(np.linalg.norm(travel))
        d = travel / norm if norm > 1e-6 else np.array([1.0, 0.0])
        t = np.arange(len(b)) / fps
        row[0].plot(t, b[:, :2] @ d, lw=1, color="tab:gray", label="before (source)")
        row[0].plot(t, after[bone][:, :2] @ d, lw=1.2, color="tab:blue", label="after (baked)")
        for a, e in spans[bone]:
            row[0].axvspan(a / fps, (e - 1) / fps, color="tab:green", alpha=0.15, lw=0)
            for p, color in ((b, "tab:gray"), (after[bone], "tab:blue")):
                slide = np.linalg.norm(p[a:e, :2] - p[a, :2], axis=1) * 1e3
                row[1].plot(t[a:e] - t[a], slide, lw=1, color=color)
        row[0].set_ylabel(f"{bone} (m)", fontsize=8)
        row[1].set_ylabel("sliding (mm)", fontsize=8)
        for ax in row:
            ax.grid(alpha=0.3)
            ax.tick_params(labelsize=7)
    axes[0][0].legend(fontsize=7, loc="upper left")
    axes[0][0].set_title("feet along the walk (contacts shaded)", fontsize=9)
    axes[0][1].set_title("during contacts: gray before, blue after", fontsize=9)
    axes[-1][0].set_xlabel("time (s)", fontsize=8)
    axes[-1][1].set_xlabel("time into the contact (s)", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)


def markdown(report: dict) -> str:
    lines = [
        f"# Mocap: {report['clip']} on {report['rig']}",
        "",
        f"{report['frames']} frames at {report['fps']:.0f} fps, leg ratio "
        f"{report['retarget']['leg_ratio']:.3f}, feet pinned: {report['pinned']}, "
        f"{report['keys_written']} keys written (full bake: {report['keys_full_bake']}), "
        f"{report['converged_frames']} frames converged, "
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
        "| foot | contacts | sliding mean / max (mm) | source's mean / max (mm) "
        "| held point moved into reach (contacts, max mm) |",
        "|---|---|---|---|---|",
    ]
    for name, c in report["foot_sliding"].items():
        lines.append(
            f"| {name} | {c['contacts']} | {c['mean'] * 1e3:.2f} / {c['max'] * 1e3:.2f} | "
            f"{c['source_mean'] * 1e3:.1f} / {c['source_max'] * 1e3:.1f} | "
            f"{c['held_moved_contacts']}, {c['held_moved_max'] * 1e3:.1f} |"
        )
    if report["not_converged"]["reasons"]:
        lines += ["", "Frames not converged, by reason:", ""]
        lines += [f"- {k}: {v}" for k, v in report["not_converged"]["reasons"].items()]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main(sys.argv[sys.argv.index("--") + 1 :] if "--" in sys.argv else sys.argv[1:]))
