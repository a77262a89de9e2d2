"""Read an armature and its goals into the solver's Skeleton, Goals and start Pose.

The skeleton holds the goal bones and all their ancestors (parents before children). Bones of
the goals' chains get free rotation axes from Blender's IK settings; the other bones are fixed
at their current evaluated pose, read frame by frame.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import NDArray

from ..solvers import Effector, Goals, Joint, Pose, Skeleton
from ..solvers.so3 import det3, det3_quick, inv3, unmirror
from . import full_body
from .errors import RigError
from .polar import CHANNELS_TOLERANCE, SCALE_EPS, nearest_rotation, scaled
from .suspend import suspended

Array = NDArray[np.float64]

MAX_COORDINATE = 1e8
"""Largest world coordinate accepted in targets and the armature's transform (world units).

Blender stores transforms in float32: beyond this a coordinate is off by several units, which
is almost always a driver or script gone wrong (an inf location reads as 3.4e38)."""


class ScaledBone(NamedTuple):
    """A chain bone whose pose scale a solve sets (``limits.solve_scaled``)."""

    bone: int
    column: int  # its column among ``limits.stretch_bones``, -1: it does not stretch itself
    parent: int  # the stretched parent whose scale it inherits, -1: none


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
    root: int = -1  # the skeleton bone freed by move_root (a Joint.free), -1: none
    body: full_body.BodyMass | None = None  # bone masses when a goal has ``support`` on
    balance_weight: float = 0.0  # the balance task's weight (0: the distance is only measured)
    scaled: tuple[ScaledBone, ...] = ()  # chain bones whose pose scale a solve sets (IK stretch)
    # per effector: the bone whose frame no solve moves nearest above it, and the bones
    # between (``scale_anchors``; computed once)
    anchors: _Anchors | None = field(default=None, repr=False, compare=False)
    start_index: _StartIndex | None = field(default=None, repr=False, compare=False)
    # the last frame's ``_fixed_local`` and what it was made of (live posing)
    fixed_local: tuple[bytes, Array] | None = field(default=None, repr=False, compare=False)


def _matrices(collection: Any, attr: str) -> Array:
    """(N, 4, 4) row-major matrices of a bone collection by ``foreach_get`` (column-major)."""
    buf = np.empty(len(collection) * 16, dtype=np.float32)
    collection.foreach_get(attr, buf)
    return np.swapaxes(buf.reshape(-1, 4, 4), 1, 2).astype(np.float64)


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
    if getattr(goal, "type", "REACH") == "AIM":
        if goal.position_weight <= 0.0:
            raise RigError(f"{label}: an aim goal needs a position weight above zero")
    elif goal.position_weight <= 0.0 and goal.rotation_weight <= 0.0:
        raise RigError(f"{label}: both weights are zero")


def chain_length(ob: Any, goal: Any, label: str = "") -> int:
    """Bones in a goal's chain, the goal's bone included (0: up to the root).

    With ``goal.chain_root`` set, the chain runs from the goal's bone up to that bone and
    ``chain_length`` is ignored; a root that is neither the goal's bone nor one of its parents
    raises RigError. Bones locked in every axis count, as in Blender's IK (a Rigify
    ``hand_fk.L`` needs 4 to reach ``upper_arm_fk.L``: ``MCH-hand_fk.L`` sits in between), so
    a converted IK constraint's ``chain_count`` means the same bones here.
    """
    root = getattr(goal, "chain_root", "")
    if not root:
        return int(goal.chain_length)
    label = label or f"goal ({goal.bone})"
    bones = ob.data.bones
    if root not in bones:
        raise RigError(f"{label}: chain root {root!r} is not in armature {ob.data.name!r}")
    bone, count = bones.get(goal.bone), 1
    while bone is not None and bone.name != root:
        bone, count = bone.parent, count + 1
    if bone is None:
        raise RigError(
            f"{label}: chain root {root!r} is not {goal.bone!r} or one of its parents "
            f"(its parents: {', '.join(b.name for b in bones[goal.bone].parent_recursive)})"
        )
    return count


def chain_names(ob: Any, goal: Any, label: str = "") -> list[str]:
    """The bones of a goal's chain, from the goal's bone up (RigError as ``chain_length``)."""
    length = chain_length(ob, goal, label)
    bone, names = ob.data.bones.get(goal.bone), list[str]()
    while bone is not None and (length == 0 or len(names) < length):
        names.append(bone.name)
        bone = bone.parent
    return names


def is_locked(pbone: Any, transform_locks: bool = True) -> bool:
    """Whether the solver cannot rotate a pose bone at all (IK lock, or with
    ``transform_locks`` a rotation lock, on X, Y, Z)."""
    return not _joint(pbone, transform_locks).rotation_axes


def locked_in_chain(ob: Any, goal: Any, label: str = "") -> list[str]:
    """The bones of a goal's chain locked in every axis (they count, but never move)."""
    pbones = ob.pose.bones if ob.pose is not None else None
    if pbones is None:
        return []
    locks = bool(getattr(goal, "use_transform_locks", True))
    return [n for n in chain_names(ob, goal, label) if is_locked(pbones[n], locks)]


def locked_message(label: str, locked: list[str]) -> str:
    return (
        f"{label}: locked in every axis, so never moved: {', '.join(locked)} "
        "(counted in the chain length, as in Blender's IK)"
    )


def check_editable(ob: Any, keys: bool) -> None:
    """Raise RigError when ``ob``'s pose (or, with ``keys``, its action) is read-only."""
    if ob.library is not None:
        raise RigError(
            f"armature {ob.name!r} is linked from library {ob.library.filepath!r} (read-only): "
            "add a library override to pose it"
        )
    override = ob.override_library
    if override is not None and override.is_system_override:
        raise RigError(
            f"armature {ob.name!r} is a system library override (read-only): make it editable"
        )
    if ob.mode == "EDIT":
        raise RigError(f"armature {ob.name!r} is in edit mode: leave edit mode first")
    ad = ob.animation_data
    if keys and ad is not None:
        _check_nla(ob.name, ad)
    action = ad.action if ad is not None else None
    if keys and action is not None and action.library is not None:
        raise RigError(
            f"action {action.name!r} of {ob.name!r} is linked from library "
            f"{action.library.filepath!r} (read-only): assign a local action"
        )


def _check_nla(name: str, ad: Any) -> None:
    """Raise RigError when keys written into the active action would not play back as
    written: its NLA in tweak mode (the tweaked strip plays its action at the strip's frames,
    the keys are written at the scene's: a strip starting 10 frames later played them 1.5 m
    off), or the action blended with the NLA tracks below it (1.1-2.1 m off on a test rig)."""
    if ad.use_tweak_mode:
        raise RigError(
            f"the NLA of {name!r} is in tweak mode (editing a strip's action, which plays at "
            "the strip's frames, not the scene's): leave tweak mode first (Tab in the NLA "
            "editor)"
        )
    blends = ad.action_blend_type != "REPLACE" or ad.action_influence < 1.0
    strips = [s for t in ad.nla_tracks if not t.mute for s in t.strips if not s.mute]
    if ad.use_nla and blends and strips:
        how = f"{ad.action_blend_type.title()} at influence {ad.action_influence:.2f}"
        raise RigError(
            f"the action of {name!r} blends with its NLA tracks ({how}): the keys would be "
            "mixed with the strips' motion on playback; set its Blending to Replace and its "
            "Influence to 1 (NLA editor, sidebar, Edited Action)"
        )


def check_evaluated(ob: Any, view_layer: Any) -> None:
    """Raise RigError when the armature or an enabled goal's target or pole is an object the
    view layer does not evaluate: disabled in viewports (the screen icon), or in collections
    that are all excluded or disabled, or not in the view layer at all. Its matrices stay
    where they were, so a bake read a frozen target at every frame (1 m off on a test rig,
    reported as converged). Hidden with the eye (H) an object is still evaluated. Also when
    the armature, or an armature whose bone is a target or pole, shows its Rest Position: its
    pose is not evaluated, so the chains were solved against the rest pose of the bones above
    them (1.7 m off on playback in Pose Position on a test rig)."""
    objects = [("armature", ob, True)]
    for index, goal in enabled_goals(ob):
        label = goal_label(index, goal)
        objects += [
            (f"{label}: target", goal.target, bool(goal.target_bone)),
            (f"{label}: pole", goal.pole_target, bool(goal.pole_target_bone)),
        ]
    for what, obj, posed in objects:
        if obj is None:
            continue
        if posed and obj.type == "ARMATURE" and obj.data.pose_position == "REST":
            raise RigError(
                f"{what} {obj.name!r} shows its Rest Position, so its pose is not evaluated "
                "and the chains would be solved against the rest pose: switch the armature "
                "to Pose Position (Armature properties > Pose)"
            )
        why = ""
        if obj.hide_viewport:
            why = "is disabled in viewports"
        elif not _in_enabled_collection(obj, view_layer):
            why = "is only in excluded or disabled collections (or not in the view layer)"
        if why:
            raise RigError(
                f"{what} {obj.name!r} {why}, so the scene does not evaluate it and its "
                "animation would be read as frozen: enable it (hide it with H instead)"
            )


PROBE_TURN = 0.3
"""Radians each chain bone is turned by ``check_target_dependence`` (about its X and Z)."""


def pole_position(target: Any, bone: str) -> Array:
    """World position of a pole: the object's origin, or the head of its pose bone ``bone``."""
    if bone:
        return np.array(target.matrix_world @ target.pose.bones[bone].head, dtype=float)
    return np.array(target.matrix_world.translation, dtype=float)


def check_target_dependence(ob: Any, free_names: list[str], update: Callable[[], None]) -> None:
    """Raise RigError when an enabled goal's target or pole moves with the chain bones the
    solve turns, through a constraint or a driver (a Child Of or Copy Location on a solved
    bone; a prop held by one hand that carries the other hand's target): a cycle the
    parenting test (``_check_cycles``) does not see. The bake reads the targets where the
    animated pose puts them, the keys then move them on playback. Found by turning every
    chain bone by PROBE_TURN, updating (``update``: the view layer) and reading the targets
    again; the channels are put back exactly and updated."""
    goals = enabled_goals(ob)
    if not goals:
        return

    def read() -> Array:
        out = []
        for _, g in goals:
            out.append(_target_matrix(g)[:3, 3])
            pole, bone = g.pole_target, g.pole_target_bone
            if pole is not None and (pole.pose is None or bone not in pole.pose.bones):
                bone = ""  # (a missing pole bone: the pole is ignored, poles.find_poles)
            out.append(np.zeros(3) if pole is None else pole_position(pole, bone))
        return np.array(out)

    attrs = ("location", "scale", "rotation_quaternion", "rotation_euler", "rotation_axis_angle")
    pbones = [ob.pose.bones[n] for n in free_names]
    saved = [[tuple(getattr(pb, a)) for a in attrs] for pb in pbones]
    c, s = math.cos(PROBE_TURN), math.sin(PROBE_TURN)
    turn = np.array([[c, -s * c, s * s, 0], [s, c * c, -c * s, 0], [0, s, c, 0], [0, 0, 0, 1.0]])
    before = read()
    try:
        for pb in pbones:
            pb.matrix_basis = (np.array(pb.matrix_basis) @ turn).tolist()
        update()
        after = read()
    finally:
        for pb, values in zip(pbones, saved, strict=True):
            for a, v in zip(attrs, values, strict=True):
                setattr(pb, a, v)
        update()
    moved = np.linalg.norm(after - before, axis=1) > 1e-5 * (1.0 + np.abs(before).max())
    for k in np.flatnonzero(moved).tolist():
        index, goal = goals[k // 2]
        what = "target" if k % 2 == 0 else "pole"
        name = goal.target.name if k % 2 == 0 else goal.pole_target_bone or goal.pole_target.name
        raise RigError(
            f"{goal_label(index, goal)}: {what} {name!r} moves with the solved chain bones (a "
            "constraint or driver makes it follow one): a cycle, the keys would move it on "
            "playback; make it follow a bone outside the chains, such as a control bone"
        )


def _in_enabled_collection(obj: Any, view_layer: Any) -> bool:
    """Whether ``obj`` is in a collection of ``view_layer`` that is neither excluded nor
    disabled in viewports, nor below one that is."""
    holding = list(obj.users_collection)
    stack = [(view_layer.layer_collection, False)]
    while stack:
        layer, off = stack.pop()
        off = off or layer.exclude or layer.collection.hide_viewport
        if not off and layer.collection in holding:
            return True
        stack += [(child, off) for child in layer.children]
    return False


def _check_cycles(ob: Any, goals: list[tuple[int, Any]], moved: set[str]) -> None:
    """Raise RigError when a goal's target moves with a solved bone (a cycle).

    ``moved``: the chains' bones and their descendants. The target is cyclic when it is one of
    them (``target_bone`` of this armature) or an object parented to one of them.
    """
    for i, g in goals:
        target, bone = g.target, g.target_bone if g.target == ob else ""
        while target is not None and target != ob and not bone:
            if target.parent == ob and target.parent_type == "BONE":
                bone = target.parent_bone
            target = target.parent
        if bone in moved:
            b = ob.data.bones[bone]
            line = {b.name, *(a.name for a in b.parent_recursive)}
            movers = [(j, h) for j, h in goals if line & set(chain_names(ob, h))]
            if movers and all(j != i for j, _ in movers):
                # its target is set by another goal's result: Blender solves that IK first
                raise RigError(
                    f"{goal_label(i, g)}: target bone {bone!r} follows the chain of "
                    f"{goal_label(*movers[0])}: one IK's target set by another IK's result "
                    "(a cascade, as in Rigify's paws and hooves) is not supported; turn one of "
                    "them off (on a Rigify rig, Bake Rigify FK from IK keys the FK controls)"
                )
            raise RigError(
                f"{goal_label(i, g)}: target bone {bone!r} moves with the solved chains "
                "(a cycle): pick a bone outside the chains, e.g. a control bone"
            )


def _joint(pbone: Any, transform_locks: bool = True) -> Joint:
    """Blender's IK settings of a pose bone as a solver Joint: its IK locks, and with
    ``transform_locks`` its rotation locks, take axes away (Blender's IK constraint only
    heeds the IK locks: Rigify locks the rotation of the IK chain's MCH bones it turns)."""
    axes = "".join(
        a
        for i, a in enumerate("XYZ")
        if not getattr(pbone, f"lock_ik_{a.lower()}")
        and not (transform_locks and pbone.lock_rotation[i])
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
    goals = _checked_goals(ob)
    bones = ob.data.bones
    index = {b.name: i for i, b in enumerate(bones)}
    parent_of = [index[b.parent.name] if b.parent else -1 for b in bones]
    needed, free, warnings, chains = _chains(ob, goals, index, parent_of)
    props = ob.jacobian_ik
    root = _moving_root(ob, goals, index, parent_of, needed, free)

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

    # bones in the chain of a goal that heeds the transform locks
    locks = set().union(
        *(c for c, (_, g) in zip(chains, goals, strict=True) if g.use_transform_locks)
    )
    # Move Root's translation is weighed in the longest chain's length (Joint.length)
    reach = max((sum(float(bones[b].length) for b in c) for c in chains), default=1.0)
    pose_index, joints, free_list = _joints(ob, order, free, locks, (root, reach), warnings)
    # each goal's own chain (and Move Root's bone): a goal moves the chains of its IK tree,
    # never a bone only another tree's chain holds (Blender's chain length)
    effectors = [
        Effector(
            position[index[g.bone]],
            (0.0, float(bones[g.bone].length), 0.0) if g.use_tail else (0.0, 0.0, 0.0),
            name=g.bone,
            chain=tuple(sorted(position[b] for b in chain | ({root} if root >= 0 else set()))),
        )
        for (_, g), chain in zip(goals, chains, strict=True)
    ]
    names = [bones[b].name for b in order]
    skeleton = Skeleton(parents, rest, joints, effectors, names=names)
    connected = np.array([bones[b].use_connect for b in order], dtype=bool)
    root_index = position[root] if root >= 0 else -1
    body, balance = _body(ob, goals, names, root_index)
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
        root_index,
        body,
        float(props.balance_weight) if balance else 0.0,
    )


def _checked_goals(ob: Any) -> list[tuple[int, Any]]:
    """``ob``'s enabled goals (index, goal); RigError when ``ob`` or a goal cannot be solved."""
    if ob is None or ob.type != "ARMATURE":
        raise RigError("the active object is not an armature")
    if ob.pose is None:
        raise RigError(f"armature {ob.name!r} has no pose yet (evaluate the scene first)")
    goals = enabled_goals(ob)
    if not goals:
        raise RigError(f"armature {ob.name!r} has no enabled goals")
    for i, g in goals:
        check_goal(ob, i, g)
    return goals


def _chains(
    ob: Any, goals: list[tuple[int, Any]], index: dict[str, int], parent_of: list[int]
) -> tuple[set[int], set[int], list[str], list[set[int]]]:
    """The bones the goals need (their chains and every bone above), the free ones (in a
    chain), the warnings about chain lengths and locked bones, and each goal's chain."""
    needed: set[int] = set()
    free: set[int] = set()
    warnings: list[str] = []
    chains: list[set[int]] = []
    for i, g in goals:
        length = chain_length(ob, g, goal_label(i, g))
        b, depth = index[g.bone], 0
        chains.append(set())
        while b >= 0:
            needed.add(b)
            if length == 0 or depth < length:
                free.add(b)
                chains[-1].add(b)
            b, depth = parent_of[b], depth + 1
        if length > depth:
            warnings.append(
                f"{goal_label(i, g)}: chain length {length} goes beyond the root: "
                f"clamped to {depth} bone(s)"
            )
        locked = locked_in_chain(ob, g, goal_label(i, g))
        if locked:
            warnings.append(locked_message(goal_label(i, g), locked))
    return needed, free, warnings, chains


def _moving_root(
    ob: Any,
    goals: list[tuple[int, Any]],
    index: dict[str, int],
    parent_of: list[int],
    needed: set[int],
    free: set[int],
) -> int:
    """The bone Move Root frees (-1 when off; it and the bones above join ``needed``); refuses
    targets that move with the solved bones (RigError)."""
    bones = ob.data.bones
    props = ob.jacobian_ik
    root = -1
    if getattr(props, "move_root", False) and props.root_stiffness < 1.0:
        connected_all = [b.use_connect for b in bones]
        root = full_body.find_root(
            parent_of, [index[g.bone] for _, g in goals], free, connected_all
        )
        b = root
        while b >= 0:
            needed.add(b)
            b = parent_of[b]
    free_names = {bones[b].name for b in free}
    if root >= 0:
        free_names.add(bones[root].name)
    moved = {
        bone.name
        for bone in bones
        if any(a.name in free_names for a in [bone, *bone.parent_recursive])
    }
    _check_cycles(ob, goals, moved)
    return root


def _joints(
    ob: Any,
    order: list[int],
    free: set[int],
    locks: set[int],
    root_reach: tuple[int, float],
    warnings: list[str],
) -> tuple[NDArray[np.intp], list[Joint], list[int]]:
    """Per bone of ``order``: its pose bone's index, its joint (locked outside the chains,
    with its rotation locks when in ``locks``, six DOFs for the moving root) and the model
    indices of the bones that can turn; warnings for what the solver does not reproduce are
    appended. RigError when nothing can move. ``root_reach``: the moving root (-1: none) and
    the length its translation is weighed in."""
    (root, reach), bones = root_reach, ob.data.bones
    pbones = ob.pose.bones
    pose_index = np.array([pbones.find(bones[b].name) for b in order], dtype=np.intp)
    joints: list[Joint] = []
    free_list: list[int] = []
    for i, b in enumerate(order):
        pb = pbones[int(pose_index[i])]
        joint = _joint(pb, b in locks) if b in free else Joint(rotation_axes="")
        if b == root:
            joint = full_body.root_joint(pb, ob.jacobian_ik.root_stiffness, reach)
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
    return pose_index, joints, free_list


def _body(
    ob: Any, goals: list[tuple[int, Any]], names: list[str], root_index: int
) -> tuple[full_body.BodyMass | None, bool]:
    """The bones' masses when a goal is a support, and whether Balance is on; RigError when
    Balance has no support or no mass."""
    balance = bool(getattr(ob.jacobian_ik, "balance", False))
    body = None
    if any(getattr(g, "support", False) for _, g in goals):
        body = full_body.body_mass(ob, names, root_index)
        if balance and not np.any(body.mass > 0):
            raise RigError("balance: no bone has mass (deforming bones or a 'jik_mass' property)")
    elif balance:
        raise RigError("balance needs at least one goal with Support on (e.g. the feet)")
    return body, balance


def _target_matrix(goal: Any, depsgraph: Any = None) -> Array:
    """World matrix of a goal's target: the object, or the head frame of its target bone (as
    ``depsgraph`` evaluated it, when given)."""
    target = goal.target if depsgraph is None else goal.target.evaluated_get(depsgraph)
    m = np.array(target.matrix_world, dtype=np.float64)
    if goal.target_bone:
        m = m @ np.array(target.pose.bones[goal.target_bone].matrix, dtype=np.float64)
    return m


def _degenerate(m: Array) -> NDArray[np.bool_]:
    """Which (..., 3, 3) matrices have a scale of (nearly) zero on an axis."""
    s = np.linalg.svd(m, compute_uv=False)
    return s[..., -1] <= 1e-9 * np.maximum(s[..., 0], 1e-300)


def check_frame(
    ob: Any,
    model: RigModel,
    frame: int,
    base: Array,
    targets: Array,
    basis: Array,
    evaluated: Array,
) -> None:
    """Raise RigError on values the solver cannot use: NaN, inf, coordinates beyond
    MAX_COORDINATE, a zero scale in the armature's transform, its bones or a rotation target."""
    where = f"frame {frame}"
    if not np.all(np.isfinite(base)) or np.max(np.abs(base)) > MAX_COORDINATE:
        raise RigError(
            f"{where}: the transform of armature {ob.name!r} is NaN, infinite or beyond "
            f"{MAX_COORDINATE:g}"
        )
    if _degenerate(base[:3, :3]):
        raise RigError(f"{where}: armature {ob.name!r} has a scale of zero on an axis")
    for e, g in enumerate(model.goals):
        label = f"{where}: goal {e + 1} ({g.bone})"
        m = targets[e]
        if not np.all(np.isfinite(m)) or np.max(np.abs(m[:3, 3])) > MAX_COORDINATE:
            raise RigError(
                f"{label}: target {g.target.name!r} is NaN, infinite or beyond {MAX_COORDINATE:g}"
            )
        if g.rotation_weight > 0.0 and _degenerate(m[:3, :3]):
            raise RigError(
                f"{label}: target {g.target.name!r} has a scale of zero on an axis, so no "
                "orientation"
            )
    bad = ~np.all(np.isfinite(basis), axis=(1, 2)) | ~np.all(np.isfinite(evaluated), axis=(1, 2))
    bad[~bad] = _degenerate(evaluated[~bad, :3, :3])
    if np.any(bad):
        name = model.names[int(np.flatnonzero(bad)[0])]
        raise RigError(f"{where}: bone {name!r} has a NaN, infinite or zero scale pose")


def affine_inverse(m: Array) -> Array:
    """Inverses of affine (..., 4, 4) matrices (bottom row 0 0 0 1), by cofactors
    (``so3.inv3``). numpy's ``inv`` calls LAPACK, which inside Blender here took 5-10 ms of wall
    time for a handful of 4x4 matrices (0.3 ms of CPU) on a loaded machine; these few
    elementwise operations do not wait."""
    out = np.zeros_like(m)
    out[..., :3, :3] = inv3(m[..., :3, :3])
    out[..., :3, 3] = -np.einsum("...ij,...j->...i", out[..., :3, :3], m[..., :3, 3])
    out[..., 3, 3] = 1.0
    return out


def _suspicious(base: Array, target: Array, evaluated: Array, basis: Array) -> NDArray[np.bool_]:
    """(F,) frames that may hold a value ``check_frame`` refuses (it then says which)."""
    values = [base.reshape(len(base), -1), target.reshape(len(base), -1)]
    values += [evaluated.reshape(len(base), -1), basis.reshape(len(base), -1)]
    flat = np.concatenate(values, axis=1)
    bad = ~(np.abs(flat).max(axis=1) <= MAX_COORDINATE)  # (NaN compares false: bad too)
    m = np.concatenate([base[:, None, :3, :3], target[..., :3, :3], evaluated[..., :3, :3]], 1)
    if bad.any():
        m = np.where(np.isfinite(m), m, 0.0)  # all 3x3 blocks of a frame at once
    tiny = np.abs(det3_quick(m)) <= 1e-12 * np.abs(m).max(axis=(-1, -2), initial=1e-300) ** 3
    return np.asarray(bad | tiny.any(axis=1))


@dataclass
class FrameData:
    """Goals and start pose for F frames, read from the scene. ``unscale`` (F, E, 4, 4) and
    ``error_scale`` (F, E), set where a bone above a chain is scaled (``scale_maps``): the
    solver's targets were moved into the unscaled model by ``unscale`` (world to world, every
    effector of the skeleton, poles too), and its position errors times ``error_scale`` are
    the scene's."""

    goals: Goals
    pose: Pose
    frames: list[int]
    unscale: Array | None = None
    error_scale: Array | None = None


class _Anchors(NamedTuple):
    """Per effector of the skeleton (goals, then poles): ``anchor``, the nearest bone above it
    whose frame no solve moves (neither it nor a bone above it has a DOF; -1: none), and
    ``inside``, the bones from below the anchor down to the effector's bone (whose frames the
    solve moves); ``tops``, the anchors; ``checked``, the bones inside a goal's chain whose
    own scale would change the chain (not ``RigModel.scaled``: their scale is the solve's)."""

    anchor: NDArray[np.intp]
    inside: list[NDArray[np.intp]]
    tops: NDArray[np.intp]
    checked: NDArray[np.intp]


def scale_anchors(model: RigModel) -> _Anchors:
    """The model's ``_Anchors`` (computed once)."""
    if model.anchors is not None:
        return model.anchors
    sk = model.skeleton
    moved = np.zeros(sk.n_bones, dtype=bool)
    moved[sk.dof_bone] = True
    moved[model.free] = True
    anchor = np.full(sk.n_effectors, -1, dtype=np.intp)
    inside: list[NDArray[np.intp]] = []
    for e in range(sk.n_effectors):
        path = []
        b = int(sk.eff_bone[e])
        while b >= 0:
            path.append(b)
            b = int(model.parents[b])
        path.reverse()  # root first
        first = next((i for i, b in enumerate(path) if moved[b]), len(path))
        anchor[e] = path[first - 1] if first > 0 else -1
        inside.append(np.array(path[first:], dtype=np.intp))
    checked = np.concatenate([np.zeros(0, dtype=np.intp), *inside[: len(model.goals)]])
    checked = np.setdiff1d(checked, np.array([s.bone for s in model.scaled], dtype=np.intp))
    model.anchors = _Anchors(anchor, inside, np.unique(anchor[anchor >= 0]), checked)
    return model.anchors


def scale_maps(
    model: RigModel, local: Array, evaluated: Array, pose: Pose
) -> tuple[Array, Array] | None:
    """Bones scaled in pose mode (a root bone's scale resizing the character), which the
    solver's model does not have (it keeps the rest lengths): (F, E, 4, 4) armature-space maps
    and (F, E) error scales, or None when no bone above a chain is scaled. Bones scaled inside
    a goal's chain are named in ``model.warnings``.

    Where the scale sits on an effector's anchor or above it (``scale_anchors``), every bone
    the solve moves for it is the anchor's frame M_A times an unscaled transform, and the
    solver's model has the same bones in the anchor's unscaled frame U_A (the nearest
    rotations of the anchor's and its parents' local transforms). So a target T in the scene
    is T' = U_A M_A^-1 T in the model: the solve of T' gives the joint angles that meet T, and
    its errors are the scene's over the anchor's scale (uniform scale; a non-uniform one
    changes shapes as bones turn, and is only approximated). A scale below the anchor (a
    chain bone's own, or a bone between) changes the chain's lengths as it turns: those bones
    are solved unscaled, with a warning."""
    # a bone scaled somewhere on the path to an anchor has a local transform that is not a
    # rotation: one test of all bones against their nearest rotations (``pose``) decides
    off = np.abs(local[..., :3, :3] - pose.rotations).max(axis=(-1, -2)) > SCALE_EPS
    if not np.any(off):
        return None
    an = scale_anchors(model)
    for b in an.checked[off[:, an.checked].any(axis=0)].tolist():
        goals = [e for e in range(len(model.goals)) if b in an.inside[e]]
        names = ", ".join(f"{e + 1} ({model.goals[e].bone})" for e in goals)
        warning = (
            f"{model.names[b]}: scaled in pose mode inside the chain of goal {names}; the "
            "solver keeps bone lengths, so the keys miss the target where it is scaled (scale "
            "a bone above the chain, such as the root, instead)"
        )
        if warning not in model.warnings:
            model.warnings.append(warning)
    hit = scaled(evaluated[:, an.tops, :3, :3]).any(axis=0)
    if not np.any(hit):
        return None
    unit = model.skeleton.forward(pose)  # (F, B, 4, 4) the unscaled model
    frames, n_eff = evaluated.shape[0], len(an.anchor)
    maps = np.broadcast_to(np.eye(4), (frames, n_eff, 4, 4)).copy()
    scale = np.ones((frames, n_eff))
    for a in an.tops[hit].tolist():
        m_a = evaluated[:, a]
        which = an.anchor == a
        maps[:, which] = (unit[:, a] @ affine_inverse(m_a))[:, None]
        scale[:, which] = (np.abs(det3(m_a[:, :3, :3])) ** (1.0 / 3.0))[:, None]
    return maps, scale


def unscale_targets(
    position: Array, rotation: Array | None, maps: Array, base: Array
) -> tuple[Array, Array | None]:
    """World targets (F, E, 3) and orientations (F, E, 3, 3) moved into the unscaled model:
    base M base^-1 applied (M from ``scale_maps``; orientations back to rotations)."""
    world = base[:, None] @ maps @ affine_inverse(base)[:, None]  # (F, E, 4, 4)
    pos = np.einsum("feij,fej->fei", world[..., :3, :3], position) + world[..., :3, 3]
    if rotation is None:
        return pos, None
    return pos, nearest_rotation(world[..., :3, :3] @ rotation)


def read_frames(
    ob: Any,
    model: RigModel,
    frames: Sequence[int],
    evaluate: Callable[[int], None],
    progress: Callable[[float], None] | None = None,
    depsgraph: Any = None,
) -> FrameData:
    """Read targets, the armature's world matrix and the start pose at each frame.

    ``evaluate(frame)`` brings the scene to that frame (``scene.frame_set``; for the current
    frame a view-layer update). Chain bones start from their pose channels (``matrix_basis``,
    scale removed; connected bones have no location); fixed bones get the local transform of
    their evaluated matrix, so constraints and drivers on them are respected. With
    ``depsgraph`` the armature and the targets are read as it evaluated them (live solving on a
    render's frame change: the original objects still hold the viewport's frame).
    """
    n_frames, n_bones, n_goals = len(frames), len(model.names), len(model.goals)
    base = np.empty((n_frames, 4, 4))
    target = np.empty((n_frames, n_goals, 4, 4))
    basis = np.empty((n_frames, n_bones, 4, 4))
    evaluated = np.empty((n_frames, n_bones, 4, 4))
    every = None if model.body is None else np.empty((n_frames, len(ob.pose.bones), 4, 4))
    every_basis = None if every is None else np.empty_like(every)
    # per frame only the reads (Blender must be at that frame); the maths runs once afterwards
    arm = ob if depsgraph is None else ob.evaluated_get(depsgraph)
    for f, frame in enumerate(frames):
        evaluate(frame)
        base[f] = np.array(arm.matrix_world, dtype=np.float64)
        for e, g in enumerate(model.goals):
            target[f, e] = _target_matrix(g, depsgraph)
        pbones = arm.pose.bones
        channels = _matrices(pbones, "matrix_basis")
        basis[f] = channels[model.pose_index]
        matrices = _matrices(pbones, "matrix")
        evaluated[f] = matrices[model.pose_index]
        if every is not None and every_basis is not None:
            every[f], every_basis[f] = matrices, channels
        if progress is not None:
            progress((f + 1) / n_frames)
    for f in np.flatnonzero(_suspicious(base, target, evaluated, basis)):
        check_frame(ob, model, frames[f], base[f], target[f], basis[f], evaluated[f])

    local, pose = _start_pose(model, basis, evaluated)
    unscale = scale_maps(model, local, evaluated, pose)

    aim = full_body.aim_axes(model.goals)
    weights_rot = np.array([g.rotation_weight for g in model.goals])
    if aim is not None:
        weights_rot[np.linalg.norm(aim, axis=1) > 0] = 0.0  # an aim goal has no rotation rows
    support = None
    balance = None
    if model.body is not None and every is not None and every_basis is not None:
        support = np.array([bool(getattr(g, "support", False)) for g in model.goals])
        balance = full_body.balance_goal(model.body, every, model.balance_weight, every_basis)
    position = target[:, :, :3, 3]
    rotation = target_orientations(target[:, :, :3, :3]) if np.any(weights_rot > 0) else None
    maps = error_scale = None
    if unscale is not None:
        maps, error_scale = unscale
        position, rotation = unscale_targets(position, rotation, maps[:, :n_goals], base)
    goals = Goals(
        position=position,
        rotation=rotation,
        position_weight=np.array([g.position_weight for g in model.goals]),
        rotation_weight=weights_rot,
        base=base,
        aim=aim,
        support=support,
        balance=balance,
    )
    return FrameData(goals, pose, list(frames), maps, error_scale)


def target_orientations(m: Array) -> Array:
    """The orientations the targets' (..., 3, 3) matrices ask for: their nearest rotations,
    scale removed. A mirrored target (negative scale, as an Empty duplicated with Mirror) has
    a reflection there, which has no nearest rotation of its own (the polar factor's axis
    flip fell on whichever axis the SVD ordered last): its X axis is turned around first, so
    the bone follows its Y and Z, as on a mirrored armature (solvers/goals.py)."""
    return nearest_rotation(unmirror(m))


class _StartIndex(NamedTuple):
    """The model's bones that no solve moves (``fixed``), the positions among them of those
    with a parent (``up``) and their parents (``up_parents``), and their rest matrices: what
    ``_start_pose`` reads of the model at every call (computed once)."""

    fixed: NDArray[np.intp]
    up: NDArray[np.intp]
    up_parents: NDArray[np.intp]
    rest_fixed: Array
    rest_up: Array


def _start_index(model: RigModel) -> _StartIndex:
    """The model's ``_StartIndex`` (computed once: a live update reads one frame)."""
    if model.start_index is None:
        free = np.zeros(len(model.names), dtype=bool)
        free[model.free] = True
        fixed = np.flatnonzero(~free)
        up = np.flatnonzero(model.parents[fixed] >= 0)
        model.start_index = _StartIndex(
            fixed, up, model.parents[fixed[up]], model.rest[fixed], model.rest[fixed[up]]
        )
    return model.start_index


def _fixed_local(model: RigModel, basis: Array, evaluated: Array) -> Array:
    """The local transforms (F, n, 4, 4) of the bones no solve moves (``_StartIndex.fixed``):
    their evaluated matrices relative to their parents' where a constraint or their
    inheritance makes those differ from their channels, else their channels. One frame's are
    kept on the model with what they were made of, and given again while that holds still (a
    live update while a target is dragged: the bones above the chains do not move)."""
    at = _start_index(model)
    above, inputs, own = evaluated[:, at.up_parents], evaluated[:, at.fixed], basis[:, at.fixed]
    key = None
    if len(basis) == 1:
        key = above.tobytes() + inputs.tobytes() + own.tobytes()
        kept = model.fixed_local
        if kept is not None and kept[0] == key:
            return kept[1]
    parent_frame = np.empty((len(basis), *at.rest_fixed.shape))
    parent_frame[:] = at.rest_fixed
    parent_frame[:, at.up] = above @ at.rest_up
    derived = affine_inverse(parent_frame) @ inputs
    # where nothing but the channels set the bone (no constraint or inheritance mode changes
    # it), the channels themselves: the evaluated matrices carry float32 round-off of the
    # parents' pose, so the same channels read under another pose of the chains above (a
    # bake's own keys) would start the solve 1e-8 elsewhere
    scale = 1.0 + np.abs(own[..., :3, :]).max(axis=(-1, -2))
    close = np.abs(derived - own).max(axis=(-1, -2)) <= CHANNELS_TOLERANCE * scale
    out = np.where(close[..., None, None], own, derived)
    if key is not None:
        model.fixed_local = (key, out)
    return out


def _start_pose(model: RigModel, basis: Array, evaluated: Array) -> tuple[Array, Pose]:
    """The bones' local transforms (F, B, 4, 4) and the start pose: chain bones from their
    channels (``basis``), the others from their evaluated matrices relative to their parents'
    where a constraint or their inheritance makes those differ from their channels, else from
    their channels (scale in both, rotations without it; connected bones have no location)."""
    n_frames, n_bones = basis.shape[:2]
    local = basis.copy()  # chain bones: their channels; the others: evaluated, relative
    fixed = _start_index(model).fixed
    if fixed.size:
        local[:, fixed] = _fixed_local(model, basis, evaluated)
    rot = nearest_rotation(local[..., :3, :3])
    loc = np.where(model.connected[:, None], 0.0, local[..., :3, 3])
    return local, Pose(rot, loc, np.zeros((n_frames, n_bones)))


def current_evaluator(context_view_layer: Any) -> Callable[[int], None]:
    """An ``evaluate`` for the current frame that does not re-apply animation."""

    def evaluate(_frame: int) -> None:
        context_view_layer.update()

    return evaluate


def frame_evaluator(scene: Any) -> Callable[[int], None]:
    def evaluate(frame: int) -> None:
        with suspended():  # the animated pose at that frame, not a live solution of it
            scene.frame_set(frame)

    return evaluate
