"""Joint limits and stretch read from the rig, beyond Blender's per-bone IK settings.

Limit Rotation constraints
    An enabled, unmuted Limit Rotation constraint on a chain bone with owner space LOCAL
    (``use_limit_x/y/z`` with ``min_*``/``max_*``, radians) becomes a limit of that rotation
    axis, intersected with the bone's own IK limits. The constraint clamps the Euler angles of
    the bone's local rotation (``matrix_basis``); the solver limits its own joint coordinates:
    - hinge (one free axis): the angle about that axis; for a rotation about one axis the
      Euler angle and the hinge angle are the same, so the limit is exact;
    - ball joint (three axes): swing x, swing z (R = exp([sx, 0, sz]) Ry(ty)) and twist y.
      Swing components equal Euler X/Z angles only to first order (the two agree within about
      1 degree up to 20 degrees of combined swing): an approximation; Blender's constraint,
      still active on playback, may clamp a pose near its bounds a little further;
    - two-axis joint: R = R_first(q1) R_second(q2); the constraint's Euler order may compose
      the two angles the other way round: also an approximation away from small angles.
    Other owner spaces are ignored with a warning.

IK stretch
    A chain bone with ``ik_stretch`` > 0 gets a stretch DOF: a translation s along its Y axis
    that moves its tail and children (solver ``Joint(stretch=True)``), with
    - range 0 <= s <= (max_stretch - 1) L: the bone never gets shorter than its rest length L
      and its tail moves out to at most ``max_stretch`` L (a setting, default 2; Import IK
      Constraints raises it to 10 for a constraint that stretches, as Blender's IK has no bound);
    - stiffness 1 - ik_stretch: the DOF's weight in the solver is ik_stretch itself, in units
      of the longest stretching chain through the bone (``Joint.length``: 0.1, the solver
      prefers rotating ten times over stretching; 1, stretching by the chain's length costs as
      much as rotating by one radian). Blender's IK measures stretch in its tree's length too:
      with model units instead, a rig in centimetres (an FBX import, object scale 0.01) hardly
      stretched, and missed targets beyond reach by 0.2-1.5 m where Blender met them.
    It is written back as Blender's IK writes it (iksolver_plugin.cc, ``execute_posetree``): a
    uniform pose scale k = (L + s) / L, and on a chain bone that inherits the scale of a
    stretched parent its own k over the parent's (1 / k_parent when it does not stretch), so no
    bone is sheared and each keeps the length the solver gave it (``solve_scaled``). A scale
    (1, k, 1) along Y alone, written before, sheared the children that inherit it: on a
    generated Rigify rig with targets beyond the limbs' reach, the baked arms played back 7 cm
    off on average (31 cm at most) against 3e-6 now. A child whose head is not on its stretched
    parent's tail moves with the parent's scale on playback: ``offset_child_warnings``.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..solvers import Skeleton
from .rig import RigModel, ScaledBone
from .write import Channel, animated_paths, driven_paths, object_fcurves, rotation_attr

Array = NDArray[np.float64]

STRETCH_UNSUPPORTED = "IK stretch is not supported yet"


def constraint_limits(pbone: Any, axes: str, warnings: list[str]) -> dict[str, tuple[float, float]]:
    """Rotation limits from the bone's active Limit Rotation constraints (LOCAL space)."""
    limits: dict[str, tuple[float, float]] = {}
    for con in pbone.constraints:
        if con.type != "LIMIT_ROTATION" or con.mute or not getattr(con, "enabled", True):
            continue
        if con.owner_space != "LOCAL":
            warnings.append(
                f"{pbone.name}/{con.name}: Limit Rotation in {con.owner_space} space is not a "
                "joint limit of the solve (only LOCAL space is); it still acts on playback, "
                "where it can move the goals off their targets"
            )
            continue
        for a in axes.lower():
            if getattr(con, f"use_limit_{a}"):
                lo, hi = getattr(con, f"min_{a}"), getattr(con, f"max_{a}")
                old = limits.get(f"rot_{a}", (-math.inf, math.inf))
                limits[f"rot_{a}"] = (max(old[0], lo), min(old[1], hi))
    return limits


def _intersect(
    a: dict[str, tuple[float, float]], b: dict[str, tuple[float, float]]
) -> dict[str, tuple[float, float]]:
    out = dict(a)
    for key, (lo, hi) in b.items():
        old = out.get(key, (-math.inf, math.inf))
        lo2, hi2 = max(old[0], lo), min(old[1], hi)
        out[key] = (lo2, hi2) if lo2 <= hi2 else (lo2, lo2)
    return out


def apply_rig_limits(ob: Any, model: RigModel, max_stretch: float = 2.0) -> RigModel:
    """``model`` with Limit Rotation constraints and IK stretch of its chain bones as joint
    limits and stretch DOFs (see the module docstring); unchanged when the rig has neither."""
    if max_stretch < 1.0:
        max_stretch = 1.0
    pbones = ob.pose.bones
    joints = list(model.skeleton.joints)
    warnings = list(model.warnings) + override_warnings(ob, model)
    changed = False
    stretchy = stretch_allowed(model, ob)
    for b in model.free:
        pb = pbones[model.names[b]]
        joint = joints[b]
        limits = constraint_limits(pb, joint.rotation_axes, warnings)
        stretch = pb.ik_stretch > 0.0 and max_stretch > 1.0 and b in stretchy
        if pb.ik_stretch > 0.0 and (stretch or b not in stretchy):  # solved, or kept by choice
            unsupported = f"{pb.name}: {STRETCH_UNSUPPORTED}"
            warnings = [w for w in warnings if not w.startswith(unsupported)]
        if not limits and not stretch:
            continue
        changed = True
        all_limits = _intersect(dict(joint.limits), limits)
        stiffness = dict(joint.stiffness)
        if stretch:
            length = float(pb.bone.length)
            all_limits["stretch"] = (0.0, (max_stretch - 1.0) * length)
            stiffness["stretch"] = min(max(1.0 - float(pb.ik_stretch), 0.0), 0.99)
        joints[b] = replace(
            joint,
            stretch=stretch or joint.stretch,
            limits=all_limits,
            stiffness=stiffness,
            length=stretchy[b] if stretch else joint.length,
        )
    if not changed:
        return replace(model, warnings=warnings)
    skel = model.skeleton
    skeleton = Skeleton(model.parents, model.rest, joints, skel.effectors, names=model.names)
    model = replace(model, skeleton=skeleton, warnings=warnings)
    model.warnings += offset_child_warnings(ob, model)
    return replace(model, scaled=tuple(solve_scaled(ob, model)))


def stretch_allowed(model: RigModel, ob: Any) -> dict[int, float]:
    """The bones of the chains of the goals with Stretch on (``use_stretch``), only they may
    stretch, each with the length of the longest such chain through it (the sum of its bones'
    lengths, model units). Blender's IK constraint stretches its chain's bones only with its
    Stretch on; imported, the goal keeps the constraint's setting (with it off, a chain with
    IK stretch 0.5 was baked 1.34 times longer toward a target out of reach while Blender's IK
    kept it)."""
    skel, bones = model.skeleton, ob.data.bones
    lengths = [float(bones[name].length) for name in model.names]
    out: dict[int, float] = {}
    for e, goal in enumerate(model.goals):
        if getattr(goal, "use_stretch", True):
            chain = skel.effectors[e].chain
            if chain is None:
                chain, b = (), int(skel.eff_bone[e])
                while b >= 0:
                    chain, b = (*chain, b), int(skel.parents[b])
            length = max(sum(lengths[b] for b in chain), 1e-9)
            for b in chain:
                out[b] = max(out.get(b, 0.0), length)
    return out


def override_warnings(ob: Any, model: RigModel) -> list[str]:
    """What changes the solved bones after the channels a bake keys, unseen by the solve: a
    constraint on a chain bone or a goal bone (other than a Limit Rotation, which is a joint
    limit, and those muted, disabled or at influence 0 without animation) and a driver on a
    chain bone's rotation. On playback it moves the goals off their targets (a Copy Rotation
    at influence 0.5 on the middle bone of a 3-bone chain: 0.5 m off on a 2 m chain)."""
    drivers, animated = driven_paths(ob), animated_paths(ob)
    modified = _modified_paths(ob)
    pbones = ob.pose.bones
    out = []
    for b in sorted(set(model.free) | {int(b) for b in model.skeleton.eff_bone}):
        pb = pbones[model.names[b]]
        for con in pb.constraints:
            if con.type == "LIMIT_ROTATION" or con.mute or not getattr(con, "enabled", True):
                continue
            if con.influence <= 0.0 and con.path_from_id("influence") not in animated:
                continue
            kind = con.type.replace("_", " ").title().replace("Ik", "IK")
            out.append(
                f"{pb.name}/{con.name}: this {kind} constraint changes the bone after the "
                "keyed channels, unseen by the solve; on playback it moves the goals off "
                "their targets (mute it, or import it if it is an IK constraint)"
            )
        rotation = pb.path_from_id(rotation_attr(pb.rotation_mode))
        if b in model.free and rotation in drivers:
            out.append(
                f"{pb.name}: its rotation is driven; the driver overrides the baked keys on "
                "playback, which moves the goals off their targets"
            )
        kinds = modified.get(rotation, [])
        if b in model.free and kinds:
            out.append(
                f"{pb.name}: its rotation F-curves have {', '.join(kinds)} modifiers, which "
                "change the baked keys on playback and move the goals off their targets "
                "(mute them)"
            )
    return out


VALUE_MODIFIERS = ("GENERATOR", "FNGENERATOR", "ENVELOPE", "NOISE", "STEPPED", "LIMITS")
"""F-curve modifiers that change a curve's values between its keys (Cycles only repeats it)."""


def _modified_paths(ob: Any) -> dict[str, list[str]]:
    """Data paths of ``ob``'s action whose F-curves have an active modifier that changes their
    values (``VALUE_MODIFIERS``), with the modifiers' kinds."""
    out: dict[str, list[str]] = {}
    for fc in object_fcurves(ob):
        for mod in fc.modifiers:
            if mod.type in VALUE_MODIFIERS and not mod.mute and getattr(mod, "active", True):
                kind = mod.type.title().replace("Fngenerator", "Built-In Function")
                kinds = out.setdefault(fc.data_path, [])
                if kind not in kinds:
                    kinds.append(kind)
    return out


def stretch_bones(model: RigModel) -> list[int]:
    """Skeleton bones with a stretch DOF."""
    return [b for b, j in enumerate(model.skeleton.joints) if j.stretch]


NO_INHERIT = ("NONE", "NONE_LEGACY")
"""``inherit_scale`` modes in which a bone takes none of its parent's scale (the others take
all of a uniform one)."""


def solve_scaled(ob: Any, model: RigModel) -> list[ScaledBone]:
    """The chain bones whose pose scale a solve sets, parents first (``RigModel.scaled``, read
    once when the model is built): every stretched bone, and every chain bone that inherits the
    scale of a stretched parent."""
    stretched = stretch_bones(model)
    column = {b: j for j, b in enumerate(stretched)}
    out = []
    for b in sorted(set(model.free) | set(stretched)):
        parent = int(model.parents[b])
        mode = ob.data.bones[model.names[b]].inherit_scale
        inherits = parent in column and mode not in NO_INHERIT
        if b in column or inherits:
            out.append(ScaledBone(b, column.get(b, -1), parent if inherits else -1))
    return out


def offset_child_warnings(ob: Any, model: RigModel) -> list[str]:
    """Bones of the model whose head is not on the tail of their stretched parent: the solver
    moves them along the parent's Y axis by its stretch s, Blender's uniform scale k moves them
    k times as far from the parent's head (the two agree only on the tail)."""
    out = []
    for b in stretch_bones(model):
        length = float(ob.data.bones[model.names[b]].length)
        for c in np.flatnonzero(model.parents == b).tolist():
            off = model.rest[c, :3, 3] - np.array([0.0, length, 0.0])
            if np.linalg.norm(off) > 1e-5 * max(length, 1e-3):
                out.append(
                    f"{model.names[c]}: its head is off the tail of stretched "
                    f"{model.names[b]}; on playback the parent's stretch moves it away"
                )
    return out


def stretch_channels(ob: Any, model: RigModel, stretch: Array) -> list[Channel]:
    """The pose scale of the bones ``model.scaled`` names over the solved frames: uniform,
    k = (L + s) / L of a stretched bone over the k of the stretched parent it inherits from
    (module docstring); ``stretch``: (F, K) the stretch s of ``stretch_bones``, in their order."""
    factor = {}
    for k, b in enumerate(stretch_bones(model)):
        length = float(ob.data.bones[model.names[b]].length)
        factor[b] = (length + stretch[:, k]) / length
    out = []
    for b, column, parent in model.scaled:
        own = factor[b] if column >= 0 else np.ones(stretch.shape[0])
        value = own / factor[parent] if parent >= 0 else own
        out.append(Channel(model.names[b], "scale", np.repeat(value[:, None], 3, axis=1)))
    return out
