"""Read an armature and its goals into the solver's Skeleton, Goals and start Pose.

The skeleton holds the goal bones and all their ancestors (parents before children). Bones of
the goals' chains get free rotation axes from Blender's IK settings; the other bones are fixed
at their current evaluated pose, read frame by frame.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..solvers import Effector, Goals, Joint, Pose, Skeleton
from .errors import RigError

Array = NDArray[np.float64]


@dataclass
class RigModel:
    """An armature as the solver sees it, and where each solver bone comes from."""

    skeleton: Skeleton
    names: list[str]  # skeleton bone names, parents first
    pose_index: NDArray[np.intp]  # index of each skeleton bone in ob.pose.bones
    parents: NDArray[np.intp]
    rest: Array  # (B, 4, 4) relative to the parent
    free: list[int]  # skeleton bones the solver may rotate (the ones written back)
    connected: NDArray[np.bool_]
    goals: list[Any]  # the enabled goal items, one per effector
    warnings: list[str] = field(default_factory=list)


def _matrices(collection: Any, attr: str) -> Array:
    """(N, 4, 4) row-major matrices of a bone collection by ``foreach_get`` (column-major)."""
    buf = np.empty(len(collection) * 16, dtype=np.float32)
    collection.foreach_get(attr, buf)
    return np.swapaxes(buf.reshape(-1, 4, 4), 1, 2).astype(np.float64)


def nearest_rotation(m: Array) -> Array:
    """The rotation nearest to each (..., 3, 3) matrix (polar decomposition): scale removed."""
    u, _, vt = np.linalg.svd(m)
    r = u @ vt
    flip = np.linalg.det(r) < 0.0
    if np.any(flip):
        u = u.copy()
        u[flip, :, -1] *= -1.0
        r = u @ vt
    return r


def goal_label(index: int, goal: Any) -> str:
    return f"goal {index + 1} ({goal.bone or 'no bone'})"


def enabled_goals(ob: Any) -> list[tuple[int, Any]]:
    return [(i, g) for i, g in enumerate(ob.jacobian_ik.goals) if g.enabled]


def check_goal(ob: Any, index: int, goal: Any) -> None:
    """Raise RigError when a goal cannot be solved (missing bone, target or target bone)."""
    label = goal_label(index, goal)
    if not goal.bone:
        raise RigError(f"{label}: no bone set")
    if goal.bone not in ob.data.bones:
        raise RigError(f"{label}: bone {goal.bone!r} is not in armature {ob.data.name!r}")
    if goal.target is None:
        raise RigError(f"{label}: no target object")
    if goal.target_bone:
        if goal.target.type != "ARMATURE":
            raise RigError(f"{label}: target bone set but {goal.target.name!r} is no armature")
        if goal.target.pose is None or goal.target_bone not in goal.target.pose.bones:
            raise RigError(f"{label}: {goal.target.name!r} has no bone {goal.target_bone!r}")
    if goal.position_weight <= 0.0 and goal.rotation_weight <= 0.0:
        raise RigError(f"{label}: both weights are zero")


def _joint(pbone: Any) -> Joint:
    """Blender's IK settings of a pose bone as a solver Joint."""
    axes = "".join(
        a
        for i, a in enumerate("XYZ")
        if not getattr(pbone, f"lock_ik_{a.lower()}") and not pbone.lock_rotation[i]
    )
    limits: dict[str, tuple[float, float]] = {}
    stiffness: dict[str, float] = {}
    for a in axes.lower():
        if getattr(pbone, f"use_ik_limit_{a}"):
            limits[f"rot_{a}"] = (getattr(pbone, f"ik_min_{a}"), getattr(pbone, f"ik_max_{a}"))
        s = float(getattr(pbone, f"ik_stiffness_{a}"))
        if s > 0.0:
            stiffness[f"rot_{a}"] = min(s, 0.99)
    return Joint(rotation_axes=axes, limits=limits, stiffness=stiffness)


def build_model(ob: Any) -> RigModel:
    """The skeleton of ``ob``'s enabled goals; raises RigError on bad input."""
    if ob is None or ob.type != "ARMATURE":
        raise RigError("the active object is not an armature")
    if ob.pose is None:
        raise RigError(f"armature {ob.name!r} has no pose yet (evaluate the scene first)")
    goals = enabled_goals(ob)
    if not goals:
        raise RigError(f"armature {ob.name!r} has no enabled goals")
    for i, g in goals:
        check_goal(ob, i, g)

    bones = ob.data.bones
    index = {b.name: i for i, b in enumerate(bones)}
    parent_of = [index[b.parent.name] if b.parent else -1 for b in bones]
    needed: set[int] = set()
    free: set[int] = set()
    for _, g in goals:
        b, depth = index[g.bone], 0
        while b >= 0:
            needed.add(b)
            if g.chain_length == 0 or depth < g.chain_length:
                free.add(b)
            b, depth = parent_of[b], depth + 1

    def level(b: int) -> int:
        return 0 if parent_of[b] < 0 else 1 + level(parent_of[b])

    order = sorted(needed, key=lambda b: (level(b), b))
    position = {b: i for i, b in enumerate(order)}
    parents = np.array([position.get(parent_of[b], -1) for b in order], dtype=np.intp)

    local = _matrices(bones, "matrix_local")[order]
    rest = local.copy()
    has_parent = parents >= 0
    rest[has_parent] = np.linalg.inv(local[parents[has_parent]]) @ local[has_parent]
    rest[:, :3, :3] = nearest_rotation(rest[:, :3, :3])  # float32 round-off

    pbones = ob.pose.bones
    pose_index = np.array([pbones.find(bones[b].name) for b in order], dtype=np.intp)
    warnings: list[str] = []
    joints: list[Joint] = []
    free_list: list[int] = []
    for i, b in enumerate(order):
        pb = pbones[int(pose_index[i])]
        joint = _joint(pb) if b in free else Joint(rotation_axes="")
        if joint.rotation_axes:
            free_list.append(i)
        if b in free and pb.ik_stretch > 0.0:
            warnings.append(
                f"{pb.name}: IK stretch is not supported yet, the bone keeps its length"
            )
        if b in free and not bones[b].use_inherit_rotation:
            warnings.append(f"{pb.name}: solved as if it inherited its parent's rotation")
        joints.append(joint)
    if not free_list:
        raise RigError("every bone of the goals' chains is locked: nothing can move")

    effectors = [
        Effector(
            position[index[g.bone]],
            (0.0, float(bones[g.bone].length), 0.0) if g.use_tail else (0.0, 0.0, 0.0),
            name=g.bone,
        )
        for _, g in goals
    ]
    names = [bones[b].name for b in order]
    skeleton = Skeleton(parents, rest, joints, effectors, names=names)
    connected = np.array([bones[b].use_connect for b in order], dtype=bool)
    return RigModel(
        skeleton,
        names,
        pose_index,
        parents,
        rest,
        free_list,
        connected,
        [g for _, g in goals],
        warnings,
    )


def _target_matrix(goal: Any) -> Array:
    """World matrix of a goal's target: the object, or the head frame of its target bone."""
    m = np.array(goal.target.matrix_world, dtype=np.float64)
    if goal.target_bone:
        m = m @ np.array(goal.target.pose.bones[goal.target_bone].matrix, dtype=np.float64)
    return m


@dataclass
class FrameData:
    """Goals and start pose for F frames, read from the scene."""

    goals: Goals
    pose: Pose
    frames: list[int]


def read_frames(
    ob: Any,
    model: RigModel,
    frames: Sequence[int],
    evaluate: Callable[[int], None],
    progress: Callable[[float], None] | None = None,
) -> FrameData:
    """Read targets, the armature's world matrix and the start pose at each frame.

    ``evaluate(frame)`` brings the scene to that frame (``scene.frame_set``; for the current
    frame a view-layer update). Chain bones start from their pose channels (``matrix_basis``,
    scale removed; connected bones have no location); fixed bones get the local transform of
    their evaluated matrix, so constraints and drivers on them are respected.
    """
    n_frames, n_bones, n_goals = len(frames), len(model.names), len(model.goals)
    base = np.empty((n_frames, 4, 4))
    target = np.empty((n_frames, n_goals, 4, 4))
    rot = np.empty((n_frames, n_bones, 3, 3))
    loc = np.zeros((n_frames, n_bones, 3))
    free = np.zeros(n_bones, dtype=bool)
    free[model.free] = True
    has_parent = model.parents >= 0
    for f, frame in enumerate(frames):
        evaluate(frame)
        base[f] = np.array(ob.matrix_world, dtype=np.float64)
        for e, g in enumerate(model.goals):
            target[f, e] = _target_matrix(g)
        pbones = ob.pose.bones
        basis = _matrices(pbones, "matrix_basis")[model.pose_index]
        evaluated = _matrices(pbones, "matrix")[model.pose_index]
        parent_frame = np.empty_like(model.rest)
        parent_frame[~has_parent] = model.rest[~has_parent]
        parent_frame[has_parent] = evaluated[model.parents[has_parent]] @ model.rest[has_parent]
        local = np.where(free[:, None, None], basis, np.linalg.inv(parent_frame) @ evaluated)
        rot[f] = nearest_rotation(local[:, :3, :3])
        loc[f] = np.where(model.connected[:, None], 0.0, local[:, :3, 3])
        if progress is not None:
            progress((f + 1) / n_frames)

    weights_rot = np.array([g.rotation_weight for g in model.goals])
    goals = Goals(
        position=target[:, :, :3, 3],
        rotation=nearest_rotation(target[:, :, :3, :3]) if np.any(weights_rot > 0) else None,
        position_weight=np.array([g.position_weight for g in model.goals]),
        rotation_weight=weights_rot,
        base=base,
    )
    pose = Pose(rot, loc, np.zeros((n_frames, n_bones)))
    return FrameData(goals, pose, list(frames))


def current_evaluator(context_view_layer: Any) -> Callable[[int], None]:
    """An ``evaluate`` for the current frame that does not re-apply animation."""

    def evaluate(_frame: int) -> None:
        context_view_layer.update()

    return evaluate


def frame_evaluator(scene: Any) -> Callable[[int], None]:
    def evaluate(frame: int) -> None:
        scene.frame_set(frame)

    return evaluate
