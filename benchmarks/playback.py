"""Accuracy on playback of baked keys with every IK constraint muted: each goal tip against its
Empty, the target's distance from the chain's root, the chain bones' joint jumps; and what is
reachable (the chains' annuli, or for a tree a reference solve of the same numpy solver).

The bridge is imported inside the functions: it imports bpy, which waits for
``blender.import_bpy``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from jacobian_ik.solvers import Pose, Settings, exp_so3, solve
from jacobian_ik.solvers.rotations import quaternion_from_matrix
from tests.rigs.scenes import RigSpec, chain_bones, chain_root

from . import blender
from .common import rough

JUMP_DEG = 10.0


@dataclass
class Playback:
    error: np.ndarray  # (F, E) tip-to-target distance
    distance: np.ndarray  # (F, E) target distance from the chain's root
    jumps: int  # chain-bone transitions over JUMP_DEG
    max_jump_deg: float
    reach: np.ndarray  # (E,) chain length
    inner: np.ndarray  # (E,) inner radius of the chain's workspace
    jumps_by_bone: dict[str, int] = field(default_factory=dict)
    jitter: float = 0.0  # share of chain-bone samples over 0.1 deg off their cubic (common.rough)
    detached: np.ndarray = field(default_factory=lambda: np.zeros(0))  # (F,) see ``detachment``


def detachment(pose: np.ndarray, rest: np.ndarray, parents: np.ndarray) -> np.ndarray:
    """The largest distance of a bone's head from where its parent holds it (world units), per
    pose: a bone with a parent sits at ``pose[p] @ inv(rest[p]) @ rest[b]``'s origin unless its
    own location channels move it (for bones that inherit their parent's rotation and scale, as
    every zoo rig's do). ``pose`` (..., B, 4, 4) world matrices of the pose bones (e.g. one set
    per frame), ``rest`` (B, 4, 4) their rest matrices (``bone.matrix_local``), ``parents``
    (B,) -1 for a root; returns (...,).

    Blender's IK can leave a bone there: where two IK trees share a bone (hands through the
    spine, a head's chain through the chest), the second tree turns the shared bone after the
    first placed its children, and they stay where the first put them (docs/benchmarks.md)."""
    child = np.flatnonzero(parents >= 0)
    if child.size == 0:
        return np.zeros(pose.shape[:-3])
    par = parents[child]
    offset = np.linalg.solve(rest[par], rest[child][:, :, 3:])  # the head in the parent's rest
    held = (pose[..., par, :, :] @ offset)[..., :3, 0]
    heads = pose[..., child, :, :][..., :3, 3]
    return np.asarray(np.linalg.norm(heads - held, axis=-1).max(axis=-1))


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
    world_poses = np.empty((frames, len(pbones), 4, 4))
    parents = np.array([index[pb.parent.name] if pb.parent else -1 for pb in pbones])
    rest = np.array([np.array(pb.bone.matrix_local, dtype=np.float64) for pb in pbones])
    from jacobian_ik.bridge.rig import _matrices as matrices  # the bridge's matrix reader

    scene = blender.bpy.context.scene
    for f in range(frames):
        scene.frame_set(f + 1)
        world = np.array(ob.matrix_world, dtype=np.float64)
        m = world @ matrices(pbones, "matrix")
        tips = m[goal_idx, :3, 3] + m[goal_idx, :3, 1] * lengths[:, None]
        roots = m[root_idx, :3, 3]
        target = np.array([e.matrix_world.translation for e in empties], dtype=np.float64)
        error[f] = np.linalg.norm(tips - target, axis=1)
        world_poses[f] = m
        distance[f] = np.linalg.norm(target - roots, axis=1)
        basis = matrices(pbones, "matrix_basis")[chain_idx, :3, :3]
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
        rough(quaternion_from_matrix(rot)),
        detachment(world_poses, rest, parents),
    )


def chain_reachability(pb: Playback) -> tuple[np.ndarray, np.ndarray]:
    """(F, E) reachable mask and best possible distance, from the chains' annuli."""
    reach, inner, d = pb.reach, pb.inner, pb.distance
    reachable = (d <= reach) & (d >= inner)
    best = np.maximum(0.0, np.maximum(d - reach, inner - d))
    return reachable, best


def reference_tree_solve(ob: Any, frames: int, starts: int) -> tuple[np.ndarray, np.ndarray]:
    """Tip distances (F, E) of LM runs (1000 iterations) from rest and random starts: per frame
    the run with the smallest largest distance (the reachability proof) and the run with the
    smallest sum of squares (the best known least-squares compromise). The goals must be
    imported (reads targets with the bridge, writes nothing)."""
    from jacobian_ik.bridge import rig as bridge_rig

    scene = blender.bpy.context.scene
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
            rot = exp_so3(axis * angle[..., None])
            pose = Pose(rot, data.pose.locations, data.pose.stretch)
        result = solve(model.skeleton, data.goals, settings, pose=pose)
        err = np.asarray(result.position_error)
        better = err.max(axis=1) < best.max(axis=1)
        best[better] = err[better]
        better = np.sum(err**2, axis=1) < np.sum(best_ss**2, axis=1)
        best_ss[better] = err[better]
    scene.frame_set(1)
    return best, best_ss
