"""Rigify: bake the FK controls of a generated rig's limbs so they follow its IK over a range.

What Rigify's own IK-to-FK snap does for one frame, for every frame of a range at once and
keyed in one go. With a limb's ``IK_FK`` switch at 0 (IK), the ORG bones of the limb follow the
IK controls (or whatever drives them: constraints, targets, drivers); each FK control is set,
top down, to the pose matrix of its ORG bone (Rigify's "rest delta": ``org @ org_rest^-1 @
fk_rest``, as its snap does). The FK controls' parents between them (``MCH-hand_fk.L``,
``MCH-foot_fk.L``: locked helpers with a Copy Scale) are evaluated by Blender itself, one
view-layer update per level of the chain, so the result is exact whatever those helpers do.

Nothing is written before every frame is read and solved; only the FK controls' location
(unless locked), rotation and scale (unless locked) F-curves change, and only inside the range.
The switch: ``IK_FK`` goes to 1.0 (FK) afterwards. When it is animated (it has an F-curve) it is
keyed 1.0 on every frame of the range, so the rest of the timeline keeps its switching; when it
is not, the property is set to 1.0 (not keyed).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import bpy
import numpy as np
from mathutils import Matrix
from numpy.typing import NDArray

from . import rig, write
from .errors import RigError

Array = NDArray[np.float64]

SWITCH = "IK_FK"


@dataclass(frozen=True)
class Limb:
    """One Rigify limb: the bone holding its switches, its FK controls top down and the ORG
    bones they are snapped to (the same order)."""

    switch_bone: str
    fk: tuple[str, ...]
    org: tuple[str, ...]


def _limb(side: str, switch: str, parts: tuple[str, ...]) -> Limb:
    return Limb(
        f"{switch}.{side}",
        tuple(f"{p}_fk.{side}" for p in parts),
        tuple(f"ORG-{p}.{side}" for p in parts),
    )


LIMBS = {
    "ARM_L": _limb("L", "upper_arm_parent", ("upper_arm", "forearm", "hand")),
    "ARM_R": _limb("R", "upper_arm_parent", ("upper_arm", "forearm", "hand")),
    "LEG_L": _limb("L", "thigh_parent", ("thigh", "shin", "foot", "toe")),
    "LEG_R": _limb("R", "thigh_parent", ("thigh", "shin", "foot", "toe")),
}
LIMB_ITEMS = [
    ("ARM_L", "Left Arm", "upper_arm_fk.L, forearm_fk.L, hand_fk.L"),
    ("ARM_R", "Right Arm", "upper_arm_fk.R, forearm_fk.R, hand_fk.R"),
    ("LEG_L", "Left Leg", "thigh_fk.L, shin_fk.L, foot_fk.L, toe_fk.L"),
    ("LEG_R", "Right Leg", "thigh_fk.R, shin_fk.R, foot_fk.R, toe_fk.R"),
]


@dataclass
class RigifyBakeReport:
    """What a Rigify FK bake did."""

    frames: list[int]
    limbs: list[str]
    bones: list[str]  # the keyed FK controls
    keys: int
    error: float  # largest distance, over frames and FK controls, of a control's tail from
    # its ORG bone's tail under IK (world units): the FK pose's distance from the IK result
    switch_keyed: bool  # IK_FK keyed in the range (it was animated), else set
    warnings: list[str] = field(default_factory=list)


def check(ob: Any, limbs: Iterable[str], frames: list[int]) -> list[Limb]:
    """The limbs to bake; RigError on anything a bake cannot use (nothing is changed)."""
    if ob is None or ob.type != "ARMATURE":
        raise RigError("the active object is not an armature")
    if ob.pose is None:
        raise RigError(f"armature {ob.name!r} has no pose yet (evaluate the scene first)")
    if "rig_id" not in ob.data:
        raise RigError(
            f"armature {ob.name!r} is not a generated Rigify rig (its data has no 'rig_id'): "
            "generate the rig from its meta-rig first"
        )
    names = sorted(set(limbs))
    if not names:
        raise RigError("no limb chosen: pick at least one of " + ", ".join(LIMBS))
    unknown = [n for n in names if n not in LIMBS]
    if unknown:
        raise RigError(f"unknown limb(s) {', '.join(unknown)}: use {', '.join(LIMBS)}")
    if not frames:
        raise RigError("the frame range is empty")
    rig.check_editable(ob, keys=True)
    pbones = ob.pose.bones
    chosen = [_without_shared_toe(pbones, LIMBS[n]) for n in names]
    missing = [
        b
        for limb in chosen
        for b in (limb.switch_bone, *limb.fk, *limb.org)
        if pbones.get(b) is None
    ]
    if missing:
        raise RigError(f"armature {ob.name!r} has no bone(s) {', '.join(missing)}")
    no_switch = [limb.switch_bone for limb in chosen if SWITCH not in pbones[limb.switch_bone]]
    if no_switch:
        raise RigError(f"no {SWITCH!r} property on {', '.join(no_switch)}")
    return chosen


def _without_shared_toe(pbones: Any, limb: Limb) -> Limb:
    """A leg generated without Rigify's "Extra IK Toe" has one toe control (``toe.L``) for IK and
    FK, so no ``toe_fk.L`` to bake: the leg is baked down to the foot."""
    if not limb.fk[-1].startswith("toe_fk.") or pbones.get(limb.fk[-1]) is not None:
        return limb
    return Limb(limb.switch_bone, limb.fk[:-1], limb.org[:-1])


def _save(pbones: Any, names: list[str]) -> list[tuple[Any, ...]]:
    return [
        (
            tuple(pb.location),
            tuple(pb.rotation_quaternion),
            tuple(pb.rotation_euler),
            tuple(pb.rotation_axis_angle),
            tuple(pb.scale),
        )
        for pb in (pbones[n] for n in names)
    ]


def _restore(pbones: Any, names: list[str], saved: list[tuple[Any, ...]]) -> None:
    for n, (loc, quat, euler, axis_angle, scale) in zip(names, saved, strict=True):
        pb = pbones[n]
        pb.location, pb.rotation_quaternion, pb.rotation_euler = loc, quat, euler
        pb.rotation_axis_angle, pb.scale = axis_angle, scale


def _switch_fcurve(ob: Any, limb: Limb) -> Any | None:
    path = f'pose.bones["{bpy.utils.escape_identifier(limb.switch_bone)}"]["{SWITCH}"]'
    for fc in write.object_fcurves(ob):
        if fc.data_path == path:
            return fc
    return None


def bake_fk(
    ob: Any,
    scene: Any,
    frames: Iterable[int],
    limbs: Iterable[str],
    *,
    view_layer: Any = None,
    switch: bool = True,
    progress: Callable[[float], None] | None = None,
) -> RigifyBakeReport:
    """Key the FK controls of ``limbs`` (names of LIMBS) of Rigify rig ``ob`` on ``frames`` so
    that they reproduce the pose the IK gives; with ``switch``, turn ``IK_FK`` to 1.0 (FK).
    RigError on bad input, having written nothing."""
    frame_list = [int(f) for f in frames]
    chosen = check(ob, limbs, frame_list)
    if view_layer is None:
        view_layer = bpy.context.view_layer
    fk_names = [b for limb in chosen for b in limb.fk]
    original_frame = scene.frame_current
    seeds = write.current_rotations(ob, fk_names)
    snapped = _snap_frames(ob, scene, view_layer, chosen, frame_list, progress)

    channels = _channels(ob, fk_names, snapped.basis, seeds)
    if not all(np.isfinite(c.values).all() for c in channels):
        raise RigError("the FK pose contains NaN or inf; nothing was written")
    error = _tail_error(ob, fk_names, snapped)

    keys = write.write_keys(ob, channels, frame_list)
    keyed = False
    if switch:
        switch_keys, keyed = _switch_to_fk(ob, chosen, frame_list)
        keys += switch_keys
    scene.frame_set(original_frame)
    return RigifyBakeReport(
        frames=frame_list,
        limbs=sorted(set(limbs)),
        bones=fk_names,
        keys=keys,
        error=error,
        switch_keyed=keyed,
        warnings=[
            f"{LIMBS[n].fk[-1]}: not in the rig (Rigify's Extra IK Toe off), so the toe control "
            "is shared by IK and FK and not baked"
            for n in sorted(set(limbs))
            if LIMBS[n].fk[-1] not in fk_names
        ],
    )


@dataclass
class _Snapped:
    """Per frame and FK control (F, K, 4, 4): the basis that snaps it to its ORG bone, the pose
    matrix it was asked to reach and the one it reached (its parents snapped first)."""

    basis: Array
    targets: Array
    reached: Array


def _snap_frames(
    ob: Any,
    scene: Any,
    view_layer: Any,
    chosen: list[Limb],
    frame_list: list[int],
    progress: Callable[[float], None] | None,
) -> _Snapped:
    """Rigify's IK-to-FK snap on every frame, read with the IK on (the switches at 0, their
    F-curves muted meanwhile); the switches, the FK controls' pose and the frame are restored."""
    pbones = ob.pose.bones
    fk_names = [b for limb in chosen for b in limb.fk]
    depth = max(len(limb.fk) for limb in chosen)
    levels = [[limb.fk[k] for limb in chosen if k < len(limb.fk)] for k in range(depth)]
    org_of = {f: o for limb in chosen for f, o in zip(limb.fk, limb.org, strict=True)}
    rest = {n: np.array(ob.data.bones[n].matrix_local) for n in (*fk_names, *org_of.values())}
    # the rest delta that takes an ORG bone's pose matrix to its FK control's (Rigify's snap)
    delta = {f: np.linalg.inv(rest[o]) @ rest[f] for f, o in org_of.items()}
    column = {n: k for k, n in enumerate(fk_names)}
    n_frames, n_bones = len(frame_list), len(fk_names)
    out = _Snapped(*(np.empty((n_frames, n_bones, 4, 4)) for _ in range(3)))

    original_frame = scene.frame_current
    switches = [pbones[limb.switch_bone] for limb in chosen]
    switch_values = [float(pb[SWITCH]) for pb in switches]
    saved = _save(pbones, fk_names)
    # read the IK result whatever the switch is animated to: its F-curves muted meanwhile
    muted = [fc for fc in (_switch_fcurve(ob, limb) for limb in chosen) if fc and not fc.mute]
    try:
        for fc in muted:
            fc.mute = True
        for pb in switches:
            pb[SWITCH] = 0.0
        ob.update_tag()
        for f, frame in enumerate(frame_list):
            scene.frame_set(frame)
            for name, org in org_of.items():
                out.targets[f, column[name]] = np.array(pbones[org].matrix) @ delta[name]
            for level in levels:
                for name in level:
                    pbones[name].matrix = Matrix(out.targets[f, column[name]].tolist())
                    out.basis[f, column[name]] = np.array(pbones[name].matrix_basis)
                view_layer.update()  # the next level's parents follow (MCH-hand_fk.L ...)
            for name in fk_names:
                out.reached[f, column[name]] = np.array(pbones[name].matrix)
            if progress is not None:
                progress((f + 1) / n_frames)
    finally:
        for fc in muted:
            fc.mute = False
        for pb, value in zip(switches, switch_values, strict=True):
            pb[SWITCH] = value
        _restore(pbones, fk_names, saved)
        ob.update_tag()
        scene.frame_set(original_frame)
    return out


def _tail_error(ob: Any, fk_names: list[str], snapped: _Snapped) -> float:
    """The largest world distance between an FK control's tail as reached and as asked."""
    lengths = np.array([ob.data.bones[n].length for n in fk_names])
    tail = np.zeros((len(fk_names), 4))
    tail[:, 1], tail[:, 3] = lengths, 1.0
    world = np.array(ob.matrix_world)
    tails = np.einsum("ij,fbjk,bk->fbi", world, snapped.reached, tail)
    want = np.einsum("ij,fbjk,bk->fbi", world, snapped.targets, tail)
    return float(np.linalg.norm((tails - want)[..., :3], axis=-1).max())


def _switch_to_fk(ob: Any, chosen: list[Limb], frame_list: list[int]) -> tuple[int, bool]:
    """Turn each limb's IK_FK switch to 1.0 (FK): keyed on the frames where it has an F-curve,
    set otherwise; the keys written and whether any switch was keyed."""
    pbones = ob.pose.bones
    keys, keyed = 0, False
    x = np.asarray(frame_list, dtype=np.float64)
    for limb in chosen:
        fcurve = _switch_fcurve(ob, limb)
        if fcurve is None:
            pbones[limb.switch_bone][SWITCH] = 1.0
        else:
            write.replace_keys(fcurve, x, np.ones(len(frame_list)), write._interpolation_value())
            keys += len(frame_list)
            keyed = True
    ob.update_tag()
    return keys, keyed


def _channels(ob: Any, names: list[str], basis: Array, seeds: write.Seeds) -> list[write.Channel]:
    """Location (unless locked), rotation in the bone's mode, scale (unless locked) of the
    basis matrices (F, K, 4, 4) of bones ``names``."""
    scale = np.linalg.norm(basis[..., :3, :3], axis=-2)  # (F, K, 3): column lengths
    rotation = rig.nearest_rotation(basis[..., :3, :3] / scale[..., None, :])
    out = []
    rot_channels = write.rotation_channels(ob, names, rotation, seeds)
    for k, name in enumerate(names):
        pb = ob.pose.bones[name]
        if not all(pb.lock_location):
            out.append(write.Channel(name, "location", basis[:, k, :3, 3]))
        out.append(rot_channels[k])
        if not all(pb.lock_scale):
            out.append(write.Channel(name, "scale", scale[:, k]))
    return out
