"""Full-body goals on an armature (issue 16): hips that help, balance, aim goals.

- ``move_root``: the root bone (see ``find_root``) joins the skeleton as a free joint
  (``Joint.free``: rotation and location, ``root_stiffness``), shared by every goal; its
  location and rotation are written (keys on its ``location`` and rotation channels).
- ``balance``: every bone's mass (a ``jik_mass`` custom property on the pose bone or the bone,
  else its length for deforming bones) lumped onto the skeleton bone it moves with, as
  ``solvers.Balance``; the support point is the midpoint of the goals with ``support`` on.
- AIM goals (``goal.type``): ``Goals.aim`` holds the local axis ``goal.aim_axis``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..solvers import AXIS_VECTORS, Balance, Goals, Joint, Pose, SolveResult
from .polar import CHANNELS_TOLERANCE, nearest_rotation, scaled
from .write import Channel

Array = NDArray[np.float64]

MASS_PROPERTY = "jik_mass"


def find_root(
    parent_of: list[int], goal_bones: list[int], free: set[int], connected: list[bool]
) -> int:
    """The root bone that ``move_root`` frees: the nearest common ancestor of the goal bones,
    moved up past chain bones (they already turn) and bones connected to their parent (Blender
    ignores their location): a humanoid's hips for hands and feet."""

    def ancestors(b: int) -> list[int]:
        out = []
        while b >= 0:
            out.append(b)
            b = parent_of[b]
        return out

    common = set(ancestors(goal_bones[0]))
    for b in goal_bones[1:]:
        common &= set(ancestors(b))
    if not common:  # goals on separate hierarchies: the first goal's top bone
        return ancestors(goal_bones[0])[-1]
    root = next(b for b in ancestors(goal_bones[0]) if b in common)  # the nearest one
    while parent_of[root] >= 0 and (root in free or connected[root]):
        root = parent_of[root]
    return root


def root_joint(pbone: Any, stiffness: float, length: float = 1.0) -> Joint:
    """The freed root's joint: ``Joint.free`` without the axes the pose bone locks
    (``lock_location``, ``lock_rotation``: e.g. hips that may not rise), all with ``stiffness``
    (at most 0.99), its translation weighed in ``length`` (model units, ``Joint.length``: the
    longest goal chain's, so hips move as far on a rig in centimetres as in metres; in model
    units, a rig scaled 100x (object 0.01) turned its hips 0.76 rad where the same rig in
    metres turned them 0.25 rad and moved them 0.25 m)."""
    rot = "".join(a for i, a in enumerate("XYZ") if not pbone.lock_rotation[i])
    loc = "".join(a for i, a in enumerate("XYZ") if not pbone.lock_location[i])
    s = min(max(float(stiffness), 0.0), 0.99)
    keys = [f"rot_{a.lower()}" for a in rot] + [f"loc_{a.lower()}" for a in loc]
    stiff = {k: s for k in keys} if s > 0 else {}
    return Joint(rot, location_axes=loc, stiffness=stiff, length=max(float(length), 1e-9))


@dataclass
class BodyMass:
    """Bone masses of an armature for the balance task."""

    mass: Array  # (N,) per armature bone (ob.data.bones order)
    owner: NDArray[np.intp]  # (N,) the skeleton bone each moves with, -1: none
    half_length: Array  # (N,) the mass point is the bone's middle
    skeleton_bones: NDArray[np.intp]  # (B,) the armature bone of each skeleton bone
    pose_order: NDArray[np.intp]  # (N,) each armature bone's index in ob.pose.bones
    parent: NDArray[np.intp]  # (N,) each armature bone's parent, -1: none
    rest_rel: Array  # (N, 4, 4) each bone's rest frame in its parent's (its own: no parent)
    paths: list[list[int]]  # (N,) the bones from below its owner down to it ([]: its owner)


def body_mass(ob: Any, names: list[str], root: int) -> BodyMass:
    """Masses of ``ob``'s bones; ``names`` the skeleton's bones, ``root`` the freed root
    (bones above it, e.g. a master control at the floor, weigh nothing unless ``jik_mass``)."""
    bones = ob.data.bones
    position = {n: i for i, n in enumerate(names)}
    n = len(bones)
    mass = np.zeros(n)
    owner = np.full(n, -1, dtype=np.intp)
    half = np.zeros(n)
    above_root: set[str] = set()
    if root >= 0:
        b = bones[names[root]].parent
        while b is not None:
            above_root.add(b.name)
            b = b.parent
    for i, bone in enumerate(bones):
        pb = ob.pose.bones.get(bone.name)
        value = None
        for holder in (pb, bone):
            if holder is not None and MASS_PROPERTY in holder.keys():
                value = float(holder[MASS_PROPERTY])
                break
        if value is None:
            value = float(bone.length) if bone.use_deform and bone.name not in above_root else 0.0
        mass[i] = max(value, 0.0) if np.isfinite(value) else 0.0
        half[i] = 0.5 * float(bone.length)
        b = bone
        while b is not None and b.name not in position:
            b = b.parent
        owner[i] = position[b.name] if b is not None else -1
    skeleton_bones = np.array([bones.find(name) for name in names], dtype=np.intp)
    pose_order = np.array([ob.pose.bones.find(b.name) for b in bones], dtype=np.intp)
    parent = np.array([bones.find(b.parent.name) if b.parent else -1 for b in bones], np.intp)
    rest = np.array([np.array(b.matrix_local, dtype=np.float64) for b in bones]).reshape(-1, 4, 4)
    rest_rel = rest.copy()
    up = parent >= 0
    rest_rel[up] = np.linalg.inv(rest[parent[up]]) @ rest[up]
    paths: list[list[int]] = []
    for i in range(n):
        path: list[int] = []
        b = i
        while owner[i] >= 0 and b != skeleton_bones[owner[i]]:
            path.insert(0, b)
            b = int(parent[b])
        paths.append(path)
    return BodyMass(mass, owner, half, skeleton_bones, pose_order, parent, rest_rel, paths)


def balance_goal(
    body: BodyMass, evaluated: Array, weight: float, channels: Array | None = None
) -> Balance:
    """``Balance`` for F frames from the evaluated armature-space matrices (F, N, 4, 4) of all
    pose bones (``ob.pose.bones`` order): each bone's middle, lumped onto the skeleton bone it
    moves with (at the offset it has in that bone's frame at that frame); bones no skeleton
    bone moves are fixed mass. With their ``channels`` (``matrix_basis``, same order) the
    offsets come from the channels of the bones in between where those give the evaluated
    matrices (``_exact_offsets``)."""
    f, nb = len(evaluated), len(body.skeleton_bones)
    evaluated = evaluated[:, body.pose_order]
    y = evaluated[:, :, :3, 1]
    y = y / np.maximum(np.linalg.norm(y, axis=-1, keepdims=True), 1e-300)
    mid = evaluated[:, :, :3, 3] + y * body.half_length[None, :, None]  # (F, N, 3)
    idx = np.flatnonzero((body.owner >= 0) & (body.mass > 0))
    own = body.owner[idx]
    frames = evaluated[:, body.skeleton_bones]  # (F, B, 4, 4) the owners' frames
    rot = nearest_rotation(frames[..., :3, :3])
    local = np.einsum("fkji,fkj->fki", rot[:, own], mid[:, idx] - frames[:, own][..., :3, 3])
    if channels is not None:
        _exact_offsets(body, evaluated, channels[:, body.pose_order], idx, local)
    lump = (own[None, :] == np.arange(nb)[:, None]) * body.mass[idx][None, :]  # (B, k)
    mass = lump.sum(axis=1)
    center = np.einsum("bk,fki->fbi", lump, local) / np.maximum(mass, 1e-300)[None, :, None]
    fixed = (body.owner < 0) & (body.mass > 0)
    fixed_mass = float(body.mass[fixed].sum())
    fixed_center = np.zeros((f, 3))
    if fixed_mass > 0:
        fixed_center = np.einsum("n,fni->fi", body.mass[fixed], mid[:, fixed]) / fixed_mass
    return Balance(mass, center, weight, fixed_mass, fixed_center)


def _exact_offsets(
    body: BodyMass, evaluated: Array, channels: Array, idx: NDArray[np.intp], local: Array
) -> None:
    """In place: the offsets ``local`` (F, K, 3) of the bones ``idx`` (armature order) in their
    owners' frames, composed from the rest frames and channels of the bones from the owner
    down (in float64), where the owner and those bones are unscaled and their channels give
    their evaluated matrices. Read from the evaluated matrices instead, they carry float32
    round-off of the pose of the chains above, so a bake read from its own keys moved the
    centre of mass by 1e-8 and its keys by 3e-7."""
    unscaled = ~scaled(evaluated[..., :3, :3]).any(axis=0)  # (N,)
    for j, n in enumerate(idx):
        path = body.paths[n]
        if not (unscaled[body.skeleton_bones[body.owner[n]]] and unscaled[path].all()):
            continue
        t = np.broadcast_to(np.eye(4), (len(evaluated), 4, 4))
        for k in path:
            step = body.rest_rel[k] @ channels[:, k]
            own = evaluated[:, body.parent[k]] @ step
            scale = 1.0 + np.abs(evaluated[:, k, :3, :]).max()
            if np.abs(own - evaluated[:, k]).max() > CHANNELS_TOLERANCE * scale:
                break  # a constraint or its inheritance sets the bone: as evaluated
            t = t @ step
        else:
            y = t[:, :3, 1]
            half = body.half_length[n] / np.linalg.norm(y, axis=-1, keepdims=True)
            local[:, j] = t[:, :3, 3] + y * half


def aim_axes(goals: list[Any]) -> Array | None:
    """(E, 3) local aim axes (zero for REACH goals), None when no goal aims."""
    if not any(getattr(g, "type", "REACH") == "AIM" for g in goals):
        return None
    return np.array(
        [
            AXIS_VECTORS[g.aim_axis] if getattr(g, "type", "REACH") == "AIM" else (0.0, 0.0, 0.0)
            for g in goals
        ]
    )


def root_channels(name: str, locations: Array) -> list[Channel]:
    """The root's location channel (F, 3) (its rotation is written with the chains')."""
    return [Channel(name, "location", np.asarray(locations, dtype=np.float64))]


def poles_follow_root(
    model: Any,
    reader: Any,
    goals: Any,
    start: Pose,
    result: SolveResult,
    solve_again: Callable[[Goals, Pose], SolveResult],
) -> SolveResult:
    """With ``move_root`` and poles (Converge mode): a second solve whose poles' swivel points
    are computed from the hips where the first solve put them (a pole's swivel point is fixed
    during a solve; computed from the start hips it would pull the root back). The chains with
    a pole start again from rest, the root from its solved pose."""
    if model.root < 0 or not reader.poles:
        return result
    upper = [model.names.index(p.upper) for p in reader.poles]
    for _ in range(PASSES):
        kin = model.skeleton.forward_kinematics(result.pose)
        reader.follow(kin.head[:, upper])
        pose = start.copy()
        pose.rotations[:, model.root] = result.pose.rotations[:, model.root]
        pose.locations[:, model.root] = result.pose.locations[:, model.root]
        reader.reset_start(pose, model)
        result = solve_again(reader.goals(goals, start.frames), pose)
    return result


PASSES = 1
