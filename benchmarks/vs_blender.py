"""Jacobian IK against Blender's own IK (Standard solver), side by side in one Blender session.

Run with ``.venv/bin/python -m benchmarks.vs_blender [--frames 250] [--quick]``; writes
``benchmarks/results/vs_blender.md`` and ``vs_blender.json`` and prints the table.

Three rigs, built with bpy.data, with Blender IK constraints (Standard solver, default settings:
500 iterations, no stretch, position only) towards Empties keyed on every frame:

- **A, double-Y tree** (16 bones, 4 goals): Buss and Kim's double-Y shape
  (``shared/reference/buss-kim-shapes.json``) with one Blender bone per link between distinct
  joint positions: a 2-bone trunk from (0, -1.5, 0), which branches into two 1-bone arms, each
  branching again into two 3-bone fingers (2 + 2 + 12 = 16 ball-joint bones, Blender's bones
  have 3 rotational DOF, the paper's hinges are not reproduced). One IK constraint per fingertip
  with chain length 0 (to the root), so the four chains share the trunk and Blender solves them
  as one tree. Targets: the demo program's four formulas with T = 0.02 (frame - 1).
- **B, humanoid** (20 bones; scripts/demo.py's character): IK on hands and feet, chain length 3.
  The hips bob and sway (keys on the hips bone); the hands draw circles and reach out beyond
  their arm's length every 125 frames; the feet step.
- **C, 30-bone chain** (bones 0.1 long along +Z, reach 3.0), one IK constraint on the last bone
  with chain length 0; the target follows a Lissajous curve 1 to 3.3 from the root.

For every rig and method a fresh scene is built, baked and timed; bake times are medians over
``--repeats`` runs, interleaved (Blender, then ours, per rig, per run) so the two share the
same machine load. Blender: ``nla.bake`` (visual keying, only the chains' bones selected, pose,
default channels: location, rotation, scale; into the current action, so the hips keys of B
stay). Ours: ``jacobian_ik.import_constraints`` then ``jacobian_ik.bake`` (LM converge by
default; SDLS converge and LM track as extra rows). The time split of ours comes from the
RunReport that ``bridge.run`` returns (captured by wrapping the operator module's reference to
``run``; the operator itself runs unchanged).

Accuracy is measured on playback: the IK constraints muted, every frame set, the tail of each
goal bone against its Empty's world position.

Reachability: for a chain (B, C) a sample is reachable when the target's distance d from the
chain's root (the head of the top bone of the chain, at that frame) lies within
[max(0, 2 l_max - L), L] (L: the chain's length, l_max its longest bone); the best possible
distance of an unreachable sample is d - L (or the inner radius - d). For the tree (A) a frame
is reachable when some solve put all four tips within 1e-4 of their targets: Blender's bake,
any of ours, or a reference run of the same numpy solver (LM, 1000 iterations, from rest and
four random start poses); the samples of the other frames count as unreachable, and their best
possible distance is the single-chain bound max(0, d - L) (a lower bound, so the excess
reported for A's unreachable samples is an upper bound on the true excess).

Joint jumps: the angle of R_f^T R_{f+1} of each chain bone's local rotation (``matrix_basis``)
between consecutive frames, counted when over 10 degrees.
"""

from __future__ import annotations

import argparse
import atexit
import json
import math
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
sys.path.insert(0, str(ROOT / "scripts"))
from checkout import load_checkout  # noqa: E402

JUMP_DEG = 10.0
REACH_PROOF = 1e-4  # a frame of the tree is reachable when a solve got every tip this close

Bone = tuple[str, tuple[float, float, float], tuple[float, float, float], str | None, bool]

bpy: Any = None  # imported in main(), after HOME points at a throwaway folder


# --------------------------------------------------------------------------------------------
# rigs


@dataclass
class RigSpec:
    key: str
    title: str
    bones: list[Bone]
    constraints: list[tuple[str, int]]  # (bone, chain_count)
    targets: Callable[[int], np.ndarray]  # frames -> (F, E, 3) world positions
    animate_armature: Callable[[Any, int], None] | None = None
    description: str = ""


def double_y_bones() -> list[Bone]:
    """16 bones between the distinct joint positions of Buss-Kim's double-Y shape."""
    c, s = 0.35355339059327373, -0.14644660940672627
    bones: list[Bone] = [
        ("trunk.0", (0.0, -1.5, 0.0), (0.0, -1.0, 0.0), None, False),
        ("trunk.1", (0.0, -1.0, 0.0), (0.0, -0.5, 0.0), "trunk.0", True),
        ("arm.R", (0.0, -0.5, 0.0), (c, s, 0.0), "trunk.1", True),
        ("arm.L", (0.0, -0.5, 0.0), (-c, s, 0.0), "trunk.1", True),
    ]
    fingers = {
        "f1": (
            "arm.R",
            [
                (c, s),
                (0.786566092485493, 0.10355339059327373),
                (1.2195787943777123, 0.35355339059327373),
                (1.6525914962699317, 0.6035533905932737),
            ],
        ),
        "f2": (
            "arm.R",
            [
                (c, s),
                (0.786566092485493, 0.2865660924854931),
                (1.2195787943777123, 0.7195787943777124),
                (1.6525914962699317, 1.1525914962699318),
            ],
        ),
        "f3": (
            "arm.L",
            [
                (-c, s),
                (-0.786566092485493, 0.2865660924854931),
                (-1.2195787943777123, 0.7195787943777124),
                (-1.6525914962699317, 1.1525914962699318),
            ],
        ),
        "f4": (
            "arm.L",
            [
                (-c, s),
                (-0.786566092485493, 0.10355339059327373),
                (-1.2195787943777123, 0.35355339059327373),
                (-1.6525914962699317, 0.6035533905932737),
            ],
        ),
    }
    for name, (parent, points) in fingers.items():
        for i in range(3):
            (x0, y0), (x1, y1) = points[i], points[i + 1]
            bones.append(
                (
                    f"{name}.{i}",
                    (x0, y0, 0.0),
                    (x1, y1, 0.0),
                    parent if i == 0 else f"{name}.{i - 1}",
                    True,
                )
            )
    return bones


def double_y_targets(frames: int) -> np.ndarray:
    """Buss-Kim's demo targets for the double-Y (buss-kim-shapes.json), T = 0.02 (frame - 1)."""
    t = 0.02 * np.arange(frames)
    sin = np.sin
    out = np.stack(
        [
            [2.0 + 3.0 * sin(3 * t), 0.5 + 0.4 * sin(7 * t), 0.3 + 1.4 * sin(5 * t)],
            [0.5 + 0.8 * sin(4 * t), 0.4 + 0.6 * sin(4 * t), -0.2 + 2.0 * sin(3 * t)],
            [-0.5 + 1.6 * sin(6 * t), 0.6 + 0.4 * sin(7 * t), 0.3 + 1.0 * sin(8 * t)],
            [-1.6 + 1.6 * sin(4 * t), 0.3 + 0.6 * sin(4 * t), -0.2 + 0.6 * sin(3 * t)],
        ]
    )  # (E, 3, F)
    return np.moveaxis(out, -1, 0)


def humanoid_bones() -> list[Bone]:
    """scripts/demo.py's 20-bone character (Z up, facing -Y)."""
    import demo  # scripts/ is on sys.path (see the imports)

    return list(demo.BONES)


HUMANOID_GOALS = ["hand.L", "hand.R", "foot.L", "foot.R"]


def humanoid_targets(frames: int) -> np.ndarray:
    """Hands circle in front of the chest and reach out sideways (past the arm's 0.62) around
    frames 63 and 188; feet step in place."""
    f = np.arange(frames, dtype=float)
    phase = 2 * np.pi * f / 50
    reach = np.sin(np.pi * f / 125) ** 8  # 0 .. 1, peaks at f = 62.5 + 125 k
    out = np.zeros((frames, 4, 3))
    for k, s in enumerate((1.0, -1.0)):
        circle = np.stack(
            [
                0.35 * s + 0.1 * s * np.cos(phase),
                np.full(frames, -0.25),
                1.15 + 0.1 * np.sin(phase + k),
            ],
            axis=1,
        )
        out_there = np.array([1.0 * s, -0.05, 1.45])
        out[:, k] = circle + reach[:, None] * (out_there - circle)
    for k, s in enumerate((1.0, -1.0)):
        step = phase + k * np.pi
        out[:, 2 + k] = np.stack(
            [
                np.full(frames, 0.1 * s),
                -0.16 - 0.15 * np.sin(step),
                0.02 + np.maximum(0.0, 0.1 * np.cos(step)),
            ],
            axis=1,
        )
    return out


def animate_hips(ob: Any, frames: int) -> None:
    hips = ob.pose.bones["hips"]
    for frame in range(1, frames + 1, 5):
        phase = 2 * math.pi * (frame - 1) / 50
        # pose location is in the bone's frame: Y is along the bone (up)
        hips.location = (0.03 * math.sin(phase), -0.05 + 0.04 * math.cos(2 * phase), 0.0)
        hips.keyframe_insert("location", frame=frame)


def chain30_bones() -> list[Bone]:
    return [
        (
            f"b{i:02d}",
            (0.0, 0.0, 0.1 * i),
            (0.0, 0.0, 0.1 * (i + 1)),
            f"b{i - 1:02d}" if i else None,
            True,
        )
        for i in range(30)
    ]


def chain30_targets(frames: int) -> np.ndarray:
    t = 2 * np.pi * np.arange(frames) / 250
    p = np.stack([1.6 * np.sin(2 * t), 1.2 * np.sin(3 * t + 0.5), 1.7 + 1.3 * np.sin(t)], axis=1)
    return p[:, None, :]


RIGS = {
    "A": RigSpec(
        "A",
        "A: double-Y tree, 16 bones, 4 goals",
        double_y_bones(),
        [(f"f{k}.2", 0) for k in range(1, 5)],
        double_y_targets,
        description="Buss-Kim double-Y: 2-bone trunk, 2 arms, 4 three-bone fingers; IK on "
        "the 4 fingertips, chain length 0 (shared trunk); Buss-Kim's target formulas, "
        "T = 0.02 (frame - 1)",
    ),
    "B": RigSpec(
        "B",
        "B: humanoid, 20 bones, hands + feet",
        humanoid_bones(),
        [(name, 3) for name in HUMANOID_GOALS],
        humanoid_targets,
        animate_hips,
        description="scripts/demo.py's character; IK on hands and feet, chain length 3; hips "
        "keyed; hands circle and reach out past arm's length twice; feet step",
    ),
    "C": RigSpec(
        "C",
        "C: 30-bone chain, 1 goal",
        chain30_bones(),
        [("b29", 0)],
        chain30_targets,
        description="30 bones of 0.1 along +Z, IK on the last one, chain length 0; target on "
        "a Lissajous curve 1.0 to 3.3 from the root (reach 3.0)",
    ),
}


# --------------------------------------------------------------------------------------------
# Blender set-up


def import_bpy() -> None:
    """Import bpy with HOME in a throwaway folder (Blender reads its user config from HOME)."""
    global bpy
    if bpy is not None:
        return
    if "bpy" not in sys.modules:
        home = tempfile.mkdtemp(prefix="jacobian_ik_bench_home_")
        atexit.register(shutil.rmtree, home, ignore_errors=True)
        os.environ["HOME"] = home
        os.environ["XDG_CONFIG_HOME"] = os.path.join(home, ".config")
    import bpy as _bpy

    bpy = _bpy


class ReportCatcher:
    """Keeps the RunReport of the last ``jacobian_ik.bake``: wraps the operator module's
    reference to ``bridge.run`` (the operator and the bridge run unchanged)."""

    def __init__(self) -> None:
        self.report: Any = None
        module = sys.modules["jacobian_ik.operators.solve"]
        original = module.run

        def wrapped(*args: Any, **kwargs: Any) -> Any:
            self.report = original(*args, **kwargs)
            return self.report

        module.run = wrapped


def build(spec: RigSpec, frames: int) -> tuple[Any, list[Any], np.ndarray]:
    """A fresh scene with the rig, its IK constraints and keyed Empties."""
    bpy.ops.wm.read_factory_settings(use_empty=True)
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, frames
    arm = bpy.data.armatures.new(spec.key)
    ob = bpy.data.objects.new(spec.key, arm)
    scene.collection.objects.link(ob)
    bpy.context.view_layer.objects.active = ob
    bpy.ops.object.mode_set(mode="EDIT")
    for name, head, tail, parent, connected in spec.bones:
        eb = arm.edit_bones.new(name)
        eb.head, eb.tail = head, tail
        if parent is not None:
            eb.parent, eb.use_connect = arm.edit_bones[parent], connected
    bpy.ops.object.mode_set(mode="OBJECT")
    bpy.context.view_layer.update()
    targets = spec.targets(frames)
    empties = []
    for e, (bone, chain) in enumerate(spec.constraints):
        empty = bpy.data.objects.new(f"target.{bone}", None)
        scene.collection.objects.link(empty)
        for f in range(frames):
            empty.location = targets[f, e]
            empty.keyframe_insert("location", frame=f + 1)
        con = ob.pose.bones[bone].constraints.new("IK")
        con.target, con.chain_count = empty, chain
        empties.append(empty)
    if spec.animate_armature is not None:
        spec.animate_armature(ob, frames)
    scene.frame_set(1)
    return ob, empties, targets


def chain_bones(ob: Any, spec: RigSpec) -> list[str]:
    """The bones of every IK chain, in pose-bone order."""
    names: set[str] = set()
    for bone, chain in spec.constraints:
        b, depth = ob.pose.bones[bone], 0
        while b is not None and (chain == 0 or depth < chain):
            names.add(b.name)
            b, depth = b.parent, depth + 1
    return [pb.name for pb in ob.pose.bones if pb.name in names]


def chain_root(ob: Any, bone: str, chain: int) -> tuple[str, float, float]:
    """The top bone of a chain, its total length and its longest bone."""
    b, depth, lengths = ob.pose.bones[bone], 0, []
    top = b
    while b is not None and (chain == 0 or depth < chain):
        lengths.append(b.bone.length)
        top, b, depth = b, b.parent, depth + 1
    return top.name, float(sum(lengths)), float(max(lengths))


def fcurves(ob: Any) -> list[Any]:
    ad = ob.animation_data
    if ad is None or ad.action is None:
        return []
    action = ad.action
    if hasattr(action, "fcurves") and not hasattr(action, "layers"):  # 4.2 line
        return list(action.fcurves)
    from bpy_extras import anim_utils

    bag = anim_utils.action_get_channelbag_for_slot(action, ad.action_slot)
    return [] if bag is None else list(bag.fcurves)


def count_keys(ob: Any) -> int:
    return sum(len(fc.keyframe_points) for fc in fcurves(ob))


def override(ob: Any, pose_bones: list[Any] | None = None) -> Any:
    kw: dict[str, Any] = {
        "object": ob,
        "active_object": ob,
        "selected_objects": [ob],
        "selected_editable_objects": [ob],
    }
    if pose_bones is not None:
        kw["selected_pose_bones"] = pose_bones
    return bpy.context.temp_override(**kw)


# --------------------------------------------------------------------------------------------
# bakes


@dataclass
class Bake:
    time: float
    keys: int
    split: dict[str, float] = field(default_factory=dict)
    ok: bool = True
    solver: dict[str, Any] = field(default_factory=dict)


def bake_blender(ob: Any, spec: RigSpec, frames: int) -> Bake:
    names = chain_bones(ob, spec)
    for pb in ob.pose.bones:
        pb.select = pb.name in names
    selected = [ob.pose.bones[n] for n in names]
    keys0 = count_keys(ob)
    scene = bpy.context.scene
    # evaluation alone (what the IK costs per frame_set), for the time split
    t0 = time.perf_counter()
    for f in range(1, frames + 1):
        scene.frame_set(f)
    t_eval = time.perf_counter() - t0
    scene.frame_set(1)
    with override(ob, selected):
        t0 = time.perf_counter()
        result = bpy.ops.nla.bake(
            frame_start=1,
            frame_end=frames,
            only_selected=True,
            visual_keying=True,
            clear_constraints=False,
            use_current_action=True,
            bake_types={"POSE"},
        )
        elapsed = time.perf_counter() - t0
    return Bake(
        elapsed, count_keys(ob) - keys0, {"frame_set_with_ik": t_eval}, result == {"FINISHED"}
    )


def bake_ours(ob: Any, frames: int, method: str, mode: str, catcher: ReportCatcher) -> Bake:
    keys0 = count_keys(ob)
    catcher.report = None
    with override(ob):
        t0 = time.perf_counter()
        r1 = bpy.ops.jacobian_ik.import_constraints()
        ob.jacobian_ik.method = method
        t1 = time.perf_counter()
        r2 = bpy.ops.jacobian_ik.bake(frame_start=1, frame_end=frames, mode=mode)
        t2 = time.perf_counter()
    rep = catcher.report
    split = {"import": t1 - t0, "operator": t2 - t1}
    solver: dict[str, Any] = {}
    if rep is not None:
        split |= {"read": rep.read_time, "solve": rep.solve_time, "write": rep.write_time}
        solver = {
            "converged": rep.converged,
            "iterations_mean": float(rep.iterations.mean()),
            "iterations_max": int(rep.iterations.max()),
            "solver_error_max": float(rep.position_error.max()),
        }
    ok = r1 == {"FINISHED"} and r2 == {"FINISHED"}
    return Bake(t2 - t0, count_keys(ob) - keys0, split, ok, solver)


# --------------------------------------------------------------------------------------------
# playback


@dataclass
class Playback:
    error: np.ndarray  # (F, E) tip-to-target distance
    distance: np.ndarray  # (F, E) target distance from the chain's root
    jumps: int  # chain-bone transitions over JUMP_DEG
    max_jump_deg: float
    reach: np.ndarray  # (E,) chain length
    inner: np.ndarray  # (E,) inner radius of the chain's workspace
    jumps_by_bone: dict[str, int] = field(default_factory=dict)


def _matrices(collection: Any, attr: str) -> np.ndarray:
    buf = np.empty(len(collection) * 16, dtype=np.float32)
    collection.foreach_get(attr, buf)
    return np.swapaxes(buf.reshape(-1, 4, 4), 1, 2).astype(np.float64)


def playback(ob: Any, spec: RigSpec, empties: list[Any], frames: int) -> Playback:
    """Mute every IK constraint, play the keys back and measure tips, roots and jumps."""
    for pb in ob.pose.bones:
        for con in pb.constraints:
            if con.type == "IK":
                con.mute = True
    pbones = ob.pose.bones
    index = {pb.name: i for i, pb in enumerate(pbones)}
    goal_idx = np.array([index[b] for b, _ in spec.constraints])
    lengths = np.array([pbones[b].bone.length for b, _ in spec.constraints])
    root_idx = np.array([index[chain_root(ob, b, c)[0]] for b, c in spec.constraints])
    chain_names = chain_bones(ob, spec)
    chain_idx = np.array([index[n] for n in chain_names])
    n_goals = len(spec.constraints)
    error = np.empty((frames, n_goals))
    distance = np.empty((frames, n_goals))
    rot = np.empty((frames, len(chain_idx), 3, 3))
    scene = bpy.context.scene
    for f in range(frames):
        scene.frame_set(f + 1)
        world = np.array(ob.matrix_world, dtype=np.float64)
        m = world @ _matrices(pbones, "matrix")
        tips = m[goal_idx, :3, 3] + m[goal_idx, :3, 1] * lengths[:, None]
        roots = m[root_idx, :3, 3]
        target = np.array([e.matrix_world.translation for e in empties], dtype=np.float64)
        error[f] = np.linalg.norm(tips - target, axis=1)
        distance[f] = np.linalg.norm(target - roots, axis=1)
        basis = _matrices(pbones, "matrix_basis")[chain_idx, :3, :3]
        u, _, vt = np.linalg.svd(basis)
        rot[f] = u @ vt
    rel = np.swapaxes(rot[:-1], -1, -2) @ rot[1:]
    cos = np.clip((np.trace(rel, axis1=-2, axis2=-1) - 1.0) / 2.0, -1.0, 1.0)
    angle = np.degrees(np.arccos(cos))
    chains = [chain_root(ob, b, c) for b, c in spec.constraints]
    reach = np.array([c[1] for c in chains])
    inner = np.maximum(0.0, 2 * np.array([c[2] for c in chains]) - reach)
    return Playback(
        error,
        distance,
        int(np.sum(angle > JUMP_DEG)),
        float(angle.max()) if angle.size else 0.0,
        reach,
        inner,
        {
            n: int(c)
            for n, c in zip(chain_names, np.sum(angle > JUMP_DEG, axis=0), strict=True)
            if c
        },
    )


# --------------------------------------------------------------------------------------------
# reachability


def chain_reachability(pb: Playback) -> tuple[np.ndarray, np.ndarray]:
    """(F, E) reachable mask and best possible distance, from the chains' annuli."""
    reach, inner, d = pb.reach, pb.inner, pb.distance
    reachable = (d <= reach) & (d >= inner)
    best = np.maximum(0.0, np.maximum(d - reach, inner - d))
    return reachable, best


def reference_tree_solve(
    addon: ModuleType, ob: Any, frames: int, starts: int
) -> tuple[np.ndarray, np.ndarray]:
    """Tip distances (F, E) of LM runs (1000 iterations) from rest and random starts: per frame
    the run with the smallest largest distance (the reachability proof) and the run with the
    smallest sum of squares (the best known least-squares compromise). The goals must be
    imported (reads targets with the bridge, writes nothing)."""
    from jacobian_ik.bridge import rig as bridge_rig
    from jacobian_ik.solvers import Pose, Settings, solve

    scene = bpy.context.scene
    evaluate = bridge_rig.frame_evaluator(scene)
    evaluate(1)
    model = bridge_rig.build_model(ob)
    data = bridge_rig.read_frames(ob, model, list(range(1, frames + 1)), evaluate)
    settings = Settings(method="lm", max_iterations=1000, tolerance=1e-7)
    best = np.full((frames, len(model.goals)), np.inf)
    best_ss = np.full((frames, len(model.goals)), np.inf)
    rng = np.random.default_rng(7)
    for k in range(starts):
        pose = data.pose
        if k:
            axis = rng.normal(size=(*pose.rotations.shape[:2], 3))
            angle = rng.uniform(0, 1.0, size=pose.rotations.shape[:2])
            axis /= np.linalg.norm(axis, axis=-1, keepdims=True)
            rot = _rodrigues(axis * angle[..., None])
            pose = Pose(rot, data.pose.locations, data.pose.stretch)
        result = solve(model.skeleton, data.goals, settings, pose=pose)
        err = np.asarray(result.position_error)
        better = err.max(axis=1) < best.max(axis=1)
        best[better] = err[better]
        better = np.sum(err**2, axis=1) < np.sum(best_ss**2, axis=1)
        best_ss[better] = err[better]
    scene.frame_set(1)
    return best, best_ss


def _rodrigues(v: np.ndarray) -> np.ndarray:
    theta = np.linalg.norm(v, axis=-1)[..., None, None]
    k = v / np.maximum(np.linalg.norm(v, axis=-1, keepdims=True), 1e-12)
    kx = np.zeros((*v.shape[:-1], 3, 3))
    kx[..., 0, 1], kx[..., 0, 2], kx[..., 1, 2] = -k[..., 2], k[..., 1], -k[..., 0]
    kx = kx - np.swapaxes(kx, -1, -2)
    return np.eye(3) + np.sin(theta) * kx + (1 - np.cos(theta)) * (kx @ kx)


# --------------------------------------------------------------------------------------------
# the run


REFERENCE = "reference LM (1000 it., multi-start; no bake)"
METHODS = [
    ("Blender IK (Standard)", None, None),
    ("ours LM converge", "LM", "CONVERGE"),
    ("ours SDLS converge", "SDLS", "CONVERGE"),
    ("ours LM track", "LM", "TRACK"),
]


def stats(err: np.ndarray, reachable: np.ndarray, best: np.ndarray) -> dict[str, Any]:
    excess = (err - best)[~reachable]
    return {
        "mean": float(err.mean()),
        "rms": float(np.sqrt(np.mean(err**2))),
        "max": float(err.max()),
        "reachable_samples": int(reachable.sum()),
        "unreachable_samples": int((~reachable).sum()),
        "reachable_under_1e-3": float(np.mean(err[reachable] < 1e-3))
        if reachable.any()
        else float("nan"),
        "reachable_mean": float(err[reachable].mean()) if reachable.any() else float("nan"),
        "reachable_max": float(err[reachable].max()) if reachable.any() else float("nan"),
        "unreachable_excess_mean": float(excess.mean()) if excess.size else float("nan"),
        "unreachable_excess_max": float(excess.max()) if excess.size else float("nan"),
    }


def run(
    frames: int = 250,
    repeats: int = 3,
    rigs: str = "ABC",
    methods: list[str] | None = None,
    reference_starts: int = 5,
    log: Callable[[str], None] = print,
) -> dict[str, Any]:
    import_bpy()
    addon = load_checkout()
    catcher = ReportCatcher()
    chosen = [m for m in METHODS if methods is None or m[0] in methods or m[1] is None]
    out: dict[str, Any] = {
        "blender": bpy.app.version_string,
        "checkout": git_state(),
        "openblas_threads": os.environ.get("OPENBLAS_NUM_THREADS", "default"),
        "load_average_start": os.getloadavg()[0],
        "frames": frames,
        "repeats": repeats,
        "rigs": {},
    }
    for key in rigs:
        spec = RIGS[key]
        times: dict[str, list[Bake]] = {m[0]: [] for m in chosen}
        playbacks: dict[str, Playback] = {}
        for r in range(repeats):
            for label, method, mode in chosen:
                ob, empties, _ = build(spec, frames)
                n_chain = len(chain_bones(ob, spec))
                if method is None:
                    bake = bake_blender(ob, spec, frames)
                else:
                    bake = bake_ours(ob, frames, method, mode or "CONVERGE", catcher)
                if not bake.ok:
                    raise RuntimeError(f"{spec.key} / {label}: the bake did not finish")
                times[label].append(bake)
                log(f"{spec.key} run {r + 1}/{repeats} {label}: {bake.time:.3f} s")
                if r == 0:
                    playbacks[label] = playback(ob, spec, empties, frames)
        # reachability (playback of any method gives the same roots: bones above the chains
        # are not baked)
        first = playbacks[chosen[0][0]]
        if spec.key == "A":
            ob_ref, _, _ = build(spec, frames)
            with override(ob_ref):
                bpy.ops.jacobian_ik.import_constraints()
            ref, ref_ss = reference_tree_solve(addon, ob_ref, frames, reference_starts)
            proven = ref.max(axis=1) < REACH_PROOF
            for pb in playbacks.values():
                proven |= pb.error.max(axis=1) < REACH_PROOF
            reachable = np.repeat(proven[:, None], len(spec.constraints), axis=1)
            _, best = chain_reachability(first)
            best = np.where(reachable, 0.0, best)
            rule = (
                f"frame (jointly) reachable when a solve got all 4 tips within {REACH_PROOF:g} "
                f"(reference LM from {reference_starts} starts, or any baked result); "
                "unreachable: single-chain bound max(0, d - L)"
            )
        else:
            reachable, best = chain_reachability(first)
            rule = "d from the chain root within [max(0, 2 l_max - L), L]"
        rows = {}
        for label, _, _ in chosen:
            pb = playbacks[label]
            bakes = times[label]
            split_keys = bakes[0].split.keys()
            chain_ok, _ = chain_reachability(pb)
            rows[label] = {
                "single_chain_reachable_under_1e-3": float(np.mean(pb.error[chain_ok] < 1e-3)),
                "single_chain_reachable_samples": int(chain_ok.sum()),
                "time_median": statistics.median(b.time for b in bakes),
                "times": [b.time for b in bakes],
                "split_median": {
                    k: statistics.median(b.split[k] for b in bakes) for k in split_keys
                },
                "keys": bakes[0].keys,
                "jumps_over_10deg": pb.jumps,
                "max_jump_deg": pb.max_jump_deg,
                "jumps_by_bone": pb.jumps_by_bone,
                "solver": bakes[0].solver,
                **stats(pb.error, reachable, best),
            }
        if spec.key == "A":
            chain_ok, _ = chain_reachability(first)
            rows[REFERENCE] = {
                "single_chain_reachable_under_1e-3": float(np.mean(ref_ss[chain_ok] < 1e-3)),
                "single_chain_reachable_samples": int(chain_ok.sum()),
                "time_median": float("nan"),
                "times": [],
                "split_median": {},
                "keys": 0,
                "jumps_over_10deg": -1,
                "max_jump_deg": float("nan"),
                "jumps_by_bone": {},
                "solver": {},
                **stats(ref_ss, reachable, best),
            }
        out["rigs"][key] = {
            "title": spec.title,
            "description": spec.description,
            "bones": len(spec.bones),
            "goals": len(spec.constraints),
            "chain_bones": n_chain,
            "reachability_rule": rule,
            "methods": rows,
        }
    out["load_average_end"] = os.getloadavg()[0]
    out["targets"] = check_targets(out)
    return out


def git_state() -> str:
    import subprocess

    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=ROOT,
            capture_output=True,
            text=True,
        ).stdout.strip()
    except OSError:
        return "unknown"
    return f"{head}{' + uncommitted changes' if dirty else ''}"


def check_targets(out: dict[str, Any]) -> dict[str, Any]:
    """The issue's targets, for ours (LM converge, the default) against Blender's bake."""
    bl, ours = "Blender IK (Standard)", "ours LM converge"
    res: dict[str, Any] = {}
    rigs = out["rigs"]
    if "A" in rigs and ours in rigs["A"]["methods"]:
        b, o = rigs["A"]["methods"][bl], rigs["A"]["methods"][ours]
        speedup = b["time_median"] / o["time_median"]
        res["A: >= 10x faster, lower error"] = {
            "speedup": speedup,
            "met": bool(speedup >= 10 and o["mean"] < b["mean"] and o["rms"] < b["rms"]),
            "detail": f"{speedup:.1f}x faster; mean error {o['mean']:.3g} vs {b['mean']:.3g}, "
            f"rms {o['rms']:.3g} vs {b['rms']:.3g}; reachable under 1e-3 "
            f"{o['reachable_under_1e-3']:.1%} vs {b['reachable_under_1e-3']:.1%}",
        }
    if "B" in rigs and ours in rigs["B"]["methods"]:
        b, o = rigs["B"]["methods"][bl], rigs["B"]["methods"][ours]
        met = (
            o["time_median"] <= b["time_median"]
            and o["reachable_under_1e-3"] >= b["reachable_under_1e-3"]
        )
        res["B: as fast, as accurate"] = {
            "speedup": b["time_median"] / o["time_median"],
            "met": bool(met),
            "detail": f"{o['time_median']:.3f} s vs {b['time_median']:.3f} s; under 1e-3 "
            f"{o['reachable_under_1e-3']:.1%} vs {b['reachable_under_1e-3']:.1%}",
        }
    if "C" in rigs and ours in rigs["C"]["methods"]:
        o = rigs["C"]["methods"][ours]
        res["C: >= 99 % reachable under 1e-3"] = {
            "met": bool(o["reachable_under_1e-3"] >= 0.99),
            "detail": f"{o['reachable_under_1e-3']:.1%} (Blender "
            f"{rigs['C']['methods'][bl]['reachable_under_1e-3']:.1%})",
        }
    jumps = []
    for key, rig in rigs.items():
        if ours in rig["methods"]:
            jumps.append(
                (
                    key,
                    rig["methods"][ours]["jumps_over_10deg"],
                    rig["methods"][bl]["jumps_over_10deg"],
                )
            )
    res["no more joint jumps > 10 deg than Blender"] = {
        "met": all(o <= b for _, o, b in jumps),
        "detail": ", ".join(f"{k}: {o} vs {b}" for k, o, b in jumps),
    }
    return res


# --------------------------------------------------------------------------------------------
# output


def _f(x: float, digits: int = 3) -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "-"
    return f"{x:.{digits}g}"


def markdown(out: dict[str, Any]) -> str:
    lines = [
        "# Jacobian IK vs Blender's IK (Standard solver)",
        "",
        f"Blender {out['blender']}, checkout {out['checkout']}, {out['frames']} frames, bake "
        f"times: median of {out['repeats']} runs (interleaved). Errors on playback of the baked "
        "keys with IK muted. Generated by `python -m benchmarks.vs_blender`. "
        f"OPENBLAS_NUM_THREADS: {out['openblas_threads']}; 1-min load average "
        f"{out['load_average_start']:.1f} at the start, {out['load_average_end']:.1f} at the end "
        f"({os.cpu_count()} cores).",
        "",
        "| rig | method | bake s | vs Blender | mean err | rms err | max err | reachable < 1e-3 "
        "| reachable max err | unreachable excess mean / max (n) | keys | jumps > 10° (max °) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    bl = "Blender IK (Standard)"
    for key, rig in out["rigs"].items():
        base = rig["methods"][bl]["time_median"]
        for label, m in rig["methods"].items():
            n_r, n_u = m["reachable_samples"], m["unreachable_samples"]
            if label == REFERENCE:
                bake_s, ratio, keys, jumps = "-", "-", "-", "-"
            else:
                bake_s = f"{m['time_median']:.3f}"
                ratio = "1x" if label == bl else f"{base / m['time_median']:.2g}x faster"
                keys = str(m["keys"])
                jumps = f"{m['jumps_over_10deg']} ({m['max_jump_deg']:.0f})"
            lines.append(
                f"| {key} | {label} | {bake_s} | {ratio} | {_f(m['mean'])} | {_f(m['rms'])} | "
                f"{_f(m['max'])} | {_f(100 * m['reachable_under_1e-3'], 4)} % of {n_r} | "
                f"{_f(m['reachable_max'])} | {_f(m['unreachable_excess_mean'])} / "
                f"{_f(m['unreachable_excess_max'])} ({n_u}) | {keys} | {jumps} |"
            )
    lines += ["", "## Rigs and reachability", ""]
    for rig in out["rigs"].values():
        lines.append(
            f"- **{rig['title']}** ({rig['chain_bones']} chain bones): {rig['description']}. "
            f"Reachability: {rig['reachability_rule']}."
        )
        if "jointly" in rig["reachability_rule"]:
            shares = ", ".join(
                f"{label} {100 * m['single_chain_reachable_under_1e-3']:.1f} %"
                for label, m in rig["methods"].items()
            )
            n = next(iter(rig["methods"].values()))["single_chain_reachable_samples"]
            lines.append(
                f"  With the single-chain rule instead (each tip within its chain's reach of the "
                f"root, {n} samples, many not jointly reachable), under 1e-3: {shares}."
            )
    lines += [
        "",
        "## Time split (medians, s)",
        "",
        "Blender: `frame_set` over the range with IK on (evaluation only, no keys) vs the whole "
        "`nla.bake`. Ours: the `import_constraints` and `bake` operators; inside the bake, "
        "RunReport's read (one `frame_set` per frame + reading targets and pose), solve and "
        "write (keys).",
        "",
        "| rig | method | total | split | iterations mean / max | converged |",
        "|---|---|---|---|---|---|",
    ]
    for key, rig in out["rigs"].items():
        for label, m in rig["methods"].items():
            if label == REFERENCE:
                continue
            split = ", ".join(f"{k} {v:.3f}" for k, v in m["split_median"].items())
            s = m["solver"]
            it = f"{s['iterations_mean']:.1f} / {s['iterations_max']}" if s else "-"
            conv = f"{s['converged']} / {out['frames']}" if s else "-"
            lines.append(f"| {key} | {label} | {m['time_median']:.3f} | {split} | {it} | {conv} |")
    lines += ["", "## Targets (ours = LM converge, the default)", ""]
    for name, t in out["targets"].items():
        lines.append(f"- {name}: **{'met' if t['met'] else 'NOT met'}** ({t['detail']})")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=250)
    parser.add_argument("--repeats", type=int, default=None, help="default 3 (1 with --quick)")
    parser.add_argument("--quick", action="store_true", help="1 run, LM and Blender only")
    parser.add_argument("--rigs", default="ABC", help="which rigs, e.g. 'C'")
    parser.add_argument("--out", type=Path, default=RESULTS, help="folder for the results")
    args = parser.parse_args(argv)
    repeats = args.repeats or (1 if args.quick else 3)
    methods = ["ours LM converge"] if args.quick else None
    out = run(
        args.frames,
        repeats,
        args.rigs.upper(),
        methods,
        reference_starts=2 if args.quick else 5,
        log=lambda s: print(s, file=sys.stderr, flush=True),
    )
    text = markdown(out)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "vs_blender.md").write_text(text)
    (args.out / "vs_blender.json").write_text(json.dumps(out, indent=1) + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
