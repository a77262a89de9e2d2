"""Lean bakes: keep only the keys Blender needs to reproduce the solved motion within tolerances.

Ground truth is Blender itself: the kept keys are written into the real F-curves (Bezier,
AUTO_CLAMPED handles, as Blender computes them in ``fcurve.update``) and the curves are
evaluated with ``fcurve.evaluate`` at every frame of the range. Two checks decide which keys
stay:

1. per channel: |evaluated - solved| <= the channel's tolerance at every frame:
   - Euler angles and the angle of axis-angle: ``key_tolerance`` (degrees, converted);
   - quaternion components: sin(key_tolerance / 4). Two unit quaternions whose components all
     differ by at most e are at most 2 e apart (4 components), and |q1 - q2| = 2 sin(a / 4)
     for a rotation a between them, so each bone's rotation stays within ``key_tolerance``;
   - axis components of axis-angle: sin(key_tolerance / 2) (the axis turns by at most about
     the tolerance); stretch scale: ``position_tolerance`` / bone length;
2. per effector: the pose rebuilt from the evaluated curves with the solver's forward
   kinematics puts every goal's effector within ``position_tolerance`` (world units) of where
   the solve put it.

Greedy insertion from the range's two end keys: each round adds, for every channel, the worst
frame of every gap between its keys that holds a violation, and for every effector the worst
frame of every gap between the frames keyed in all the channels that move it, among the violating
frames (to those of its channels that are, relative to
their tolerance, at least half as far off there as the furthest one; after 10 rounds to all
of them); then the changed
curves are rewritten and re-evaluated. A round adds many keys at once, so a range needs about
log2(frames) rounds.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import bpy
import numpy as np
from numpy.typing import NDArray

from ..solvers import Pose, Skeleton, rotations
from . import write
from .write import Channel

Array = NDArray[np.float64]


@dataclass
class ReduceReport:
    keys: int  # keys written
    full_keys: int  # keys a full bake writes (every frame of every channel)
    rounds: int
    channel_error: float  # largest |evaluated - solved| / tolerance over all channels (<= 1)
    position_error: float  # largest effector distance on playback of the curves (world units)


def _enum_value(prop: str, name: str) -> int:
    items = bpy.types.Keyframe.bl_rna.properties[prop].enum_items  # type: ignore[attr-defined]
    return int(items[name].value)


def channel_tolerances(
    ch: Channel, key_tolerance: float, position_tolerance: float, length: float
) -> Array:
    """Per component tolerance of one channel (see the module docstring)."""
    n = ch.values.shape[1]
    if ch.attr == "rotation_quaternion":
        return np.full(n, math.sin(key_tolerance / 4.0))
    if ch.attr == "rotation_axis_angle":
        return np.array([key_tolerance] + [math.sin(key_tolerance / 2.0)] * 3)
    if ch.attr == "scale":
        return np.full(n, position_tolerance / max(length, 1e-12))
    if ch.attr == "location":  # a root moved by move_root (bridge/full_body.py)
        return np.full(n, position_tolerance)
    return np.full(n, key_tolerance)


def _matrices(ch: Channel, values: Array, mode: str) -> Array:
    if ch.attr == "rotation_quaternion":
        q = values / np.maximum(np.linalg.norm(values, axis=1, keepdims=True), 1e-12)
        return rotations.matrix_from_quaternion(q)
    if ch.attr == "rotation_axis_angle":
        return rotations.matrix_from_axis_angle(values)
    return rotations.matrix_from_euler(values, mode)


class _PoseBuilder:
    """Rebuilds solver poses from channel values and measures world effector positions."""

    def __init__(
        self, ob: Any, skeleton: Skeleton, template: Pose, base: Array, channels: list[Channel]
    ) -> None:
        self.skeleton, self.template, self.base = skeleton, template, base
        index = {n: i for i, n in enumerate(skeleton.names)}
        self.bone = [index[ch.bone] for ch in channels]
        self.modes = [ob.pose.bones[ch.bone].rotation_mode for ch in channels]
        self.lengths = [float(ob.data.bones[ch.bone].length) for ch in channels]

    def points(self, channels: list[Channel], values: list[Array]) -> Array:
        pose = self.template.copy()
        for k, ch in enumerate(channels):
            if ch.attr == "scale":
                pose.stretch[:, self.bone[k]] = (values[k][:, 1] - 1.0) * self.lengths[k]
            elif ch.attr == "location":
                pose.locations[:, self.bone[k]] = values[k]
            else:
                pose.rotations[:, self.bone[k]] = _matrices(ch, values[k], self.modes[k])
        kin = self.skeleton.forward_kinematics(pose)
        lin, trans = self.base[:, :3, :3], self.base[:, :3, 3]
        return np.einsum("fij,fej->fei", lin, kin.points) + trans[:, None]


def _gap_worst(mask: NDArray[np.bool_], err: Array) -> list[int]:
    """For every gap between kept frames that holds err > 0: the frame of the largest err."""
    keys = np.flatnonzero(mask)
    out = []
    for a, b in itertools.pairwise(keys):
        if b - a < 2:
            continue
        seg = err[a + 1 : b]
        k = int(np.argmax(seg))
        if seg[k] > 0.0:
            out.append(a + 1 + k)
    return out


def write_reduced(
    ob: Any,
    channels: list[Channel],
    frames: Sequence[int],
    skeleton: Skeleton,
    template: Pose,
    base: Array,
    n_goals: int,
    key_tolerance: float,
    position_tolerance: float,
    max_rounds: int = 200,
) -> ReduceReport:
    """Key ``channels`` at as few of ``frames`` as the tolerances allow (see the module
    docstring); ``key_tolerance`` in radians, ``position_tolerance`` in world units. Only the
    channels' F-curves change, and only inside the frame range. ``template`` is the solver's
    start pose of every frame (the bones the solver does not move), ``base`` (F, 4, 4) the
    armature's world matrices, ``n_goals`` the goal effectors (the first of the skeleton's)."""
    action = write.ensure_action(ob)
    x = np.asarray(frames, dtype=np.float64)
    n_frames = len(x)
    bezier = _enum_value("interpolation", "BEZIER")
    auto_clamped = _enum_value("handle_left_type", "AUTO_CLAMPED")
    builder = _PoseBuilder(ob, skeleton, template, base, channels)
    reference = builder.points(channels, [ch.values for ch in channels])[:, :n_goals]

    curves: list[tuple[int, int, Any, Array, float]] = []  # channel, index, fcurve, values, tol
    for k, ch in enumerate(channels):
        path = f'pose.bones["{bpy.utils.escape_identifier(ch.bone)}"].{ch.attr}'
        tol = channel_tolerances(ch, key_tolerance, position_tolerance, builder.lengths[k])
        for i in range(ch.values.shape[1]):
            fcurve = write.ensure_fcurve(ob, action, path, i, ch.bone)
            curves.append((k, i, fcurve, ch.values[:, i], float(tol[i])))
    # the curves that move each goal effector
    moves = skeleton.dof_moves[:n_goals]
    eff_curves = [
        [
            c
            for c, (k, _, _, _, _) in enumerate(curves)
            if np.any(moves[e] & (skeleton.dof_bone == builder.bone[k]))
        ]
        for e in range(n_goals)
    ]

    masks = np.zeros((len(curves), n_frames), dtype=bool)
    masks[:, [0, -1]] = True
    evaluated = np.array([v for _, _, _, v, _ in curves])  # replaced on the first round
    dirty = np.ones(len(curves), dtype=bool)
    rounds = 0
    position_error = 0.0
    ratio = 0.0
    for round_ in range(1, max_rounds + 1):
        rounds = round_
        for c in np.flatnonzero(dirty):
            _, _, fcurve, values, _ = curves[c]
            keep = masks[c]
            write.replace_keys(fcurve, x[keep], values[keep], bezier)
            _set_handles(fcurve, x, auto_clamped)
            evaluated[c] = [fcurve.evaluate(f) for f in x]
        dirty[:] = False
        tol = np.array([t for _, _, _, _, t in curves])
        target = np.array([v for _, _, _, v, _ in curves])
        excess = np.abs(evaluated - target) - tol[:, None]
        ratio = float(np.max(np.abs(evaluated - target) / np.maximum(tol, 1e-300)[:, None]))
        add: list[set[int]] = [set() for _ in curves]
        for c in range(len(curves)):
            if np.any(excess[c] > 0.0):
                add[c].update(_gap_worst(masks[c], np.maximum(excess[c], 0.0)))
        values_now = [np.zeros_like(ch.values) for ch in channels]
        for c, (k, i, _, _, _) in enumerate(curves):
            values_now[k][:, i] = evaluated[c]
        dist = np.linalg.norm(builder.points(channels, values_now)[:, :n_goals] - reference, axis=2)
        position_error = float(dist.max()) if dist.size else 0.0
        relative = np.abs(evaluated - target) / np.maximum(tol, 1e-300)[:, None]
        share = 0.5 if round_ <= 10 else 0.0  # then every channel: a handle moved by a key
        for e in range(n_goals):
            bad = dist[:, e] > position_tolerance
            cs = np.array(eff_curves[e], dtype=np.intp)
            keyed = masks[cs].all(axis=0)
            for f in _gap_worst(keyed, np.where(bad, dist[:, e], 0.0)):
                # key the curves that are furthest off (relative to their tolerance) there
                score = relative[cs, f]
                for c in cs[score >= share * score.max()]:
                    add[int(c)].add(f)
        for c, new in enumerate(add):
            new_frames = [f for f in new if not masks[c, f]]
            if new_frames:
                masks[c, new_frames] = True
                dirty[c] = True
        if not dirty.any():
            break
    return ReduceReport(
        keys=int(masks.sum()),
        full_keys=len(curves) * n_frames,
        rounds=rounds,
        channel_error=ratio,
        position_error=position_error,
    )


def _set_handles(fcurve: Any, x: Array, handle_type: int) -> None:
    """AUTO_CLAMPED handles on the keys inside the range, then recompute them."""
    points = fcurve.keyframe_points
    n = len(points)
    co = np.empty(2 * n, dtype=np.float32)
    points.foreach_get("co", co)
    inside = (co[0::2] >= x[0] - 1e-3) & (co[0::2] <= x[-1] + 1e-3)
    for prop in ("handle_left_type", "handle_right_type"):
        types = np.empty(n, dtype=np.int32)
        points.foreach_get(prop, types)
        types[inside] = handle_type
        points.foreach_set(prop, types)
    fcurve.update()
