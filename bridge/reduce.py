"""Lean bakes: keep only the keys Blender needs to reproduce the solved motion within tolerances.

**The curves.** Every kept key sits on the solved value, and its handles lie along slopes of
the solved motion there, each handle a third of the way to the neighbouring key. Between two
keys Blender's Bezier curve is then the cubic Hermite interpolant of the values and slopes at
its ends (x is linear in the Bezier parameter), so a segment depends on its two keys only.
A segment takes the central difference of the solved values at both ends (``_slopes``: a
one-sided one beside a jump) where that keeps it within the tolerance; else, at one end or
both, the one-sided difference of second order from inside the segment (ahead of its first
key, behind its last), whichever of those pairs (``ENDS``) keeps it nearest the values
(``key_slopes``). Over a segment of many frames the cubic falls short of motion that swings
(it cannot follow the fourth derivative); the inner slopes are steeper than the motion's by a
third of its third derivative where the central ones are flatter by a sixth (on a swing the
third derivative opposes the first), which makes up part of the shortfall; at a corner of the
motion (a goal leaving reach, a chain straightening, a tree's goals starting to conflict: the
joints' speed changes within a frame or two) they follow each side where central slopes lean
across it. A key whose two segments took different slopes is a corner of the curve (FREE
handles); elsewhere its handles are ALIGNED and the curve is C1.
Measured by furthest reach alone at one tolerance (a prototype of ``_reach``): 20 sine curves
of 250 frames, 1,538 keys with the central slopes of ``_slopes``, 1,233 with the inner ones at
both ends, 1,163 choosing between those two; zoo seed 8383's first double-Y tree, 6,684, 4,218
and 4,120 (4,061 choosing among the four pairs). Lean bakes with the checks below, on seed
8383's four double-Y trees: 6,478, 3,463, 3,370 and 4,112 keys with central slopes; 3,986,
2,265, 2,061 and 2,703 choosing between the central and the inner pair; 3,913, 2,225, 2,043 and
2,678 among the four (of 12,000-17,000 in a full bake), within the same tolerances.

**What must hold**, on Blender's own evaluation of the written curves (``fcurve.evaluate`` at
every frame of the range; ground truth, never our formula):

1. each bone's rotation within ``key_tolerance`` of the solved one (the angle between the two,
   whatever the rotation mode: Blender normalises quaternions, so only that angle shows);
   stretch scale and a moved root's location within their share of ``position_tolerance``
   (below; the scale over the bone's length);
2. every goal's effector, in the pose rebuilt from the evaluated curves with the solver's
   forward kinematics, within ``position_tolerance`` (world units) of where the solve put it.

**Choosing the keys.** First each curve alone, by furthest reach (``_reach``, all curves at
once): from a key, the next one is the furthest frame whose segment (with one of the pairs of
slopes of ``ENDS``) keeps the curve within a per-component tolerance (``component_tolerances``)
derived from the bone's share of the tolerances (``_budgets``): an angle no larger than
``key_tolerance``, nor than the share of ``position_tolerance`` of every effector the bone
carries (the tolerance over the root of the number of channels that move it, loosened by the
headroom the effector leaves, ``SPLIT``) over the effector's distance from the bone's head.
Then rounds of checks 1-2 on Blender's evaluation: for every bone, channel or effector off, the
worst frame of every gap between the frames keyed in all its curves is keyed in those of its
curves that are, relative to their tolerance, at least half as far off there as the furthest
one (after 10 rounds in all of them); the changed curves are rewritten and evaluated again,
until nothing is off. Keys outside the range stay as they were (``write.replace_keys``):
values, interpolation, handle types, and non-automatic handles.
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
from .limits import NO_INHERIT
from .write import Channel

Array = NDArray[np.float64]
JUMP = 4.0  # one-sided differences this many times apart in size: a jump between them
SPLIT = 2.0
"""The most an effector's share of the position tolerance is loosened by its headroom
(``_Reducer.__init__``): the curves are chosen once with the root-sum-square split, the
effector's error on their Hermite curves predicted, and the shares of an effector that stayed
within a fraction r of the tolerance scaled by min(1 / r, SPLIT). On 16 captured zoo bakes
(seeds 1, 7: every kind; 2, 3: humanoids and trees; 3, 4: tentacles) the split alone left the
effectors at 0.53-0.86 of the tolerance (tentacles 0.96-1.0) and the checks added no key; with
the headroom taken 5-15 % fewer keys on humanoids, trees, quadrupeds and spiders, tentacles
unchanged, in 1-3 rounds (one fixed factor of 2 for every effector cost the tentacles up to 28 %
more keys in up to 19 rounds)."""
SHARE_ROUNDS = 10  # rounds that key only the curves furthest off; later ones key all of them
CENTRAL, AHEAD, BEHIND = 0, 1, 2  # the rows of ``_slopes``
ENDS = ((CENTRAL, CENTRAL), (AHEAD, BEHIND), (AHEAD, CENTRAL), (CENTRAL, BEHIND))
"""The slopes a segment may leave its first key and arrive at its last with (``key_slopes``)."""


@dataclass
class ReduceReport:
    keys: int  # keys written
    full_keys: int  # keys a full bake writes (every frame of every channel)
    rounds: int
    channel_error: float  # largest error of a check relative to its tolerance (<= 1)
    rotation_error: float  # largest bone rotation difference on playback of the curves (radians)
    position_error: float  # largest effector distance on playback of the curves (world units)


@dataclass
class _Curve:
    channel: int  # index into the channels
    fcurve: Any
    values: Array  # (F,) solved values
    slopes: Array  # (3, F) solved slopes, per frame (``_slopes``)
    tolerance: float  # per-component tolerance (the channel's own one for non-rotations)


def _enum_value(prop: str, name: str) -> int:
    items = bpy.types.Keyframe.bl_rna.properties[prop].enum_items  # type: ignore[attr-defined]
    return int(items[name].value)


def is_rotation(ch: Channel) -> bool:
    return ch.attr.startswith("rotation_")


def component_tolerances(ch: Channel, angle: float, distance: float, length: float) -> Array:
    """Per-component tolerance of one channel that keeps its bone's rotation within ``angle``
    (radians), its stretch or location within ``distance``, however the components' errors
    combine: four quaternion components within sin(angle / 4) are at most 2 sin(angle / 4)
    apart, the chord of ``angle``; Euler angles add at most their sum, and seldom line up (a
    third of the angle each in the worst case, a root of three here: the rotation check repairs
    the rare frame where they do); an axis turned by e
    moves a rotation by at most 2 sin(e / 2) (chord) times sin(its angle / 2) <= 1."""
    n = ch.values.shape[1]
    if ch.attr == "rotation_quaternion":
        return np.full(n, math.sin(angle / 4.0))
    if ch.attr == "rotation_axis_angle":
        return np.array([angle / 2.0] + [math.sin(angle / 8.0)] * 3)
    if ch.attr == "scale":
        return np.full(n, distance / max(length, 1e-12))
    if ch.attr == "location":  # a root moved by move_root (bridge/full_body.py)
        return np.full(n, distance / math.sqrt(3.0))
    return np.full(n, angle / math.sqrt(3.0))


def _matrices(ch: Channel, values: Array, mode: str) -> Array:
    if ch.attr == "rotation_quaternion":
        q = values / np.maximum(np.linalg.norm(values, axis=1, keepdims=True), 1e-12)
        return rotations.matrix_from_quaternion(q)
    if ch.attr == "rotation_axis_angle":
        return rotations.matrix_from_axis_angle(values)
    return rotations.matrix_from_euler(values, mode)


def rotation_angle(ch: Channel, values: Array, mode: str) -> Array:
    """(F,) angle between the rotations ``values`` and the solved ones, radians."""
    if ch.attr == "rotation_quaternion":
        q = values / np.maximum(np.linalg.norm(values, axis=1, keepdims=True), 1e-12)
        s = ch.values / np.linalg.norm(ch.values, axis=1, keepdims=True)
        d = np.minimum(np.linalg.norm(q - s, axis=1), np.linalg.norm(q + s, axis=1))
        return 4.0 * np.arcsin(np.minimum(d / 2.0, 1.0))  # |q - s| = 2 sin(angle / 4)
    diff = _matrices(ch, values, mode) - _matrices(ch, ch.values, mode)
    d = np.linalg.norm(diff, axis=(1, 2))  # |R1 - R2|_F = 2 sqrt(2) sin(angle / 2)
    return 2.0 * np.arcsin(np.minimum(d / (2.0 * math.sqrt(2.0)), 1.0))


class _PoseBuilder:
    """Rebuilds solver poses from channel values and measures world effector positions."""

    def __init__(
        self, ob: Any, skeleton: Skeleton, template: Pose, base: Array, channels: list[Channel]
    ) -> None:
        self.skeleton, self.template, self.base = skeleton, template, base
        index = {n: i for i, n in enumerate(skeleton.names)}
        self.bone = [index[ch.bone] for ch in channels]
        self.modes = write.rotation_modes(ob, [ch.bone for ch in channels])
        self.lengths = [float(ob.data.bones[ch.bone].length) for ch in channels]
        # a scale channel is relative to the scale channel of the parent it inherits from
        # (bridge/limits.py: uniform, as Blender's IK writes stretch); -1: none
        scale_of = {self.bone[k]: k for k, ch in enumerate(channels) if ch.attr == "scale"}
        self.inherits = [
            scale_of.get(int(skeleton.parents[self.bone[k]]), -1)
            if ch.attr == "scale" and ob.data.bones[ch.bone].inherit_scale not in NO_INHERIT
            else -1
            for k, ch in enumerate(channels)
        ]

    def points(self, channels: list[Channel], values: list[Array]) -> Array:
        kin = self._kinematics(channels, values)
        lin, trans = self.base[:, :3, :3], self.base[:, :3, 3]
        return np.einsum("fij,fej->fei", lin, kin.points) + trans[:, None]

    def levers(self, channels: list[Channel], n_goals: int) -> Array:
        """(K, E): the largest world distance over the frames from channel k's bone head (its
        pivot) to goal effector e, in the solved motion."""
        kin = self._kinematics(channels, [ch.values for ch in channels])
        heads = kin.head[:, self.bone]  # (F, K, 3)
        arm = kin.points[:, None, :n_goals] - heads[:, :, None]  # (F, K, E, 3)
        world = np.einsum("fij,fkej->fkei", self.base[:, :3, :3], arm)
        return np.linalg.norm(world, axis=3).max(axis=0)

    def _kinematics(self, channels: list[Channel], values: list[Array]) -> Any:
        pose = self.template.copy()
        world: dict[int, Array] = {}  # the scale channels' scale in the armature (parents first)
        for k, ch in enumerate(channels):
            if ch.attr == "scale":
                up = self.inherits[k]
                world[k] = values[k][:, 1] * (world[up] if up >= 0 else 1.0)
                if self.skeleton.joints[self.bone[k]].stretch:
                    pose.stretch[:, self.bone[k]] = (world[k] - 1.0) * self.lengths[k]
            elif ch.attr == "location":
                pose.locations[:, self.bone[k]] = values[k]
            else:
                pose.rotations[:, self.bone[k]] = _matrices(ch, values[k], self.modes[k])
        return self.skeleton.forward_kinematics(pose)


def _slopes(x: Array, v: Array) -> Array:
    """(3, F) slopes of the solved values at every frame: ``CENTRAL``, the central difference,
    or beside a jump (the two one-sided differences more than 4x apart in size) the smaller
    one-sided one, so a key next to a flip does not lean into it; ``AHEAD`` and ``BEHIND``, the
    one-sided differences of second order from the two frames after and before it (first order
    next to the range's end, the central one at it)."""
    out = np.empty((3, len(v)))
    if len(x) < 3:
        out[:] = np.gradient(v, x) if len(x) == 2 else 0.0
        return out
    m = np.gradient(v, x, edge_order=2)
    d = np.diff(v) / np.diff(x)
    back, ahead = d[:-1], d[1:]
    small, large = np.minimum(np.abs(back), np.abs(ahead)), np.maximum(np.abs(back), np.abs(ahead))
    jump = large > JUMP * small + 1e-12
    inner = np.where(np.abs(back) < np.abs(ahead), back, ahead)
    m[1:-1] = np.where(jump, inner, m[1:-1])
    out[CENTRAL] = out[AHEAD] = out[BEHIND] = m
    step = np.diff(x)
    out[AHEAD, :-2] = _parabola_slope(v[:-2], v[1:-1], v[2:], step[:-1], step[1:])
    out[AHEAD, -2] = d[-1]
    out[BEHIND, 2:] = _parabola_slope(v[2:], v[1:-1], v[:-2], -step[1:], -step[:-1])
    out[BEHIND, 1] = d[0]
    return out


def _parabola_slope(v0: Array, v1: Array, v2: Array, h1: Array, h2: Array) -> Array:
    """The slope at x0 of the parabola through (x0, v0), (x0 + h1, v1), (x0 + h1 + h2, v2):
    ahead of x0 with steps h > 0, behind it with steps h < 0."""
    c0, c1, c2 = (2 * h1 + h2) / (h1 * (h1 + h2)), (h1 + h2) / (h1 * h2), h1 / (h2 * (h1 + h2))
    return np.asarray(-c0 * v0 + c1 * v1 - c2 * v2)


def _basis(t: Array, h: Array | float) -> tuple[Any, Any, Any, Any]:
    """The cubic Hermite basis at t in [0, 1] of a segment h frames long: the weights of its
    first value, first slope, last value and last slope (the slopes' times h)."""
    t2, t3 = t * t, t * t * t
    return 2 * t3 - 3 * t2 + 1, (t3 - 2 * t2 + t) * h, 3 * t2 - 2 * t3, (t3 - t2) * h


def _cubic(t: Array, h: Array | float, va: Any, ma: Any, vb: Any, mb: Any) -> Array:
    """Cubic Hermite polynomial at t in [0, 1] of a segment h frames long (values, slopes)."""
    w_va, w_ma, w_vb, w_mb = _basis(t, h)
    return w_va * va + w_ma * ma + w_vb * vb + w_mb * mb


def hermite(
    x: Array,
    keys: NDArray[np.intp],
    values: Array,
    leaving: Array,
    arriving: Array,
) -> Array:
    """The curve through ``values[keys]`` (indices into x), each segment leaving its first key
    with the slope ``leaving`` there and arriving at its last with ``arriving``, at every x:
    what Blender's Bezier curve through those keys with handles at thirds evaluates to."""
    j = np.clip(np.searchsorted(keys, np.arange(len(x)), side="right") - 1, 0, len(keys) - 2)
    a, b = keys[j], keys[j + 1]
    h = x[b] - x[a]
    return _cubic((x - x[a]) / h, h, values[a], leaving[a], values[b], arriving[b])


def _segment_errors(
    x: Array,
    v: Array,
    m: Array,
    curve: NDArray[np.intp],
    a: NDArray[np.intp],
    b: NDArray[np.intp],
    tol: Array,
) -> Array:
    """For segments of curves (``curve``: rows of v (C, F) and their slopes m (C, 3, F)) with
    keys at a and b, tolerances ``tol``: (4, S) the largest distance of each segment from the
    values, with each pair of end slopes of ``ENDS``; the other pairs only where the central
    one leaves the tolerance (inf elsewhere). Every segment is padded to the longest."""
    out = np.full((len(ENDS), len(a)), np.inf)
    span = b - a
    i = np.arange(int(span.max()) + 1)
    inside = i[None, :] <= span[:, None]
    at = np.minimum(a[:, None] + i[None, :], len(x) - 1)
    rows = np.arange(len(a))
    h = (x[b] - x[a])[:, None]
    t = (x[at] - x[a][:, None]) / h
    w_va, w_ma, w_vb, w_mb = _basis(t, h)  # shared by every pair of slopes
    fixed = w_va * v[curve, a][:, None] + w_vb * v[curve, b][:, None]
    off_values = np.where(inside, fixed - v[curve[:, None], at], 0.0)
    lead, trail = np.where(inside, w_ma, 0.0), np.where(inside, w_mb, 0.0)
    for k, (start, end) in enumerate(ENDS):
        ma, mb = m[curve, start, a][:, None], m[curve, end, b][:, None]
        out[k, rows] = np.abs(off_values + lead * ma + trail * mb).max(axis=1)
        if k == 0:  # the others where the central slopes leave the tolerance
            off = np.flatnonzero(out[0, rows] > tol)
            rows, curve, a, b = off, curve[off], a[off], b[off]
            off_values, lead, trail = off_values[off], lead[off], trail[off]
    return out


def key_slopes(
    x: Array, masks: NDArray[np.bool_], values: Array, m: Array, tol: Array
) -> tuple[Array, Array]:
    """(leaving, arriving), (C, F) each: for curves keyed at ``masks`` (C, F) (values (C, F),
    slopes m (C, 3, F), tolerances (C,)), the slopes each segment between two keys of a curve
    leaves its first key and arrives at its last with: the central ones where they keep the
    segment within its curve's tolerance, else the pair of ``ENDS`` that keeps it nearest the
    values (the first such pair on a tie; a key whose two segments took different slopes is a
    corner of the curve, its handles FREE; elsewhere the curve is C1)."""
    leaving, arriving = m[:, CENTRAL].copy(), m[:, CENTRAL].copy()
    c, f = np.nonzero(masks)  # every curve's keys, in order
    seg = np.flatnonzero(c[:-1] == c[1:])  # consecutive keys of one curve: a segment
    if seg.size == 0:
        return leaving, arriving
    c, a, b = c[seg], f[seg], f[seg + 1]
    # segments of like length together (within a factor of two: a long one does not pad all)
    err = np.empty((len(ENDS), len(a)))
    size = np.ceil(np.log2(b - a)).astype(np.intp)
    for group in np.unique(size):
        at = np.flatnonzero(size == group)
        err[:, at] = _segment_errors(x, values, m, c[at], a[at], b[at], tol[c[at]])
    pick = np.where(err[0] > tol[c], np.argmin(err, axis=0), 0)
    ends = np.array(ENDS)
    leaving[c, a] = m[c, ends[pick, 0], a]
    arriving[c, b] = m[c, ends[pick, 1], b]
    return leaving, arriving


def _segments_off(
    x: Array,
    v: Array,
    m: Array,
    tol: Array,
    curve: NDArray[np.intp],
    a: NDArray[np.intp],
    b: NDArray[np.intp],
) -> Any:
    """For segments of curves (``curve``: rows of v, m) with keys at a and b: whether each
    leaves its tolerance anywhere, with every pair of end slopes of ``ENDS``."""
    return np.all(_segment_errors(x, v, m, curve, a, b, tol) > tol, axis=0)


def _reach(x: Array, v: Array, m: Array, tol: Array) -> NDArray[np.bool_]:
    """Keys by furthest reach, every curve (row of v) at once: from each key the furthest frame
    whose segment stays within the curve's tolerance, searched by doubling the step while the
    segment holds, then halving it."""
    curves, n = v.shape
    mask = np.zeros((curves, n), dtype=bool)
    mask[:, [0, -1]] = True
    a = np.zeros(curves, dtype=np.intp)
    b, step = a + 1, np.ones(curves, dtype=np.intp)
    halving = np.zeros(curves, dtype=bool)
    active = a < n - 1
    while active.any():
        # a finished search keys its frame and starts the next segment there
        end = active & halving & (step <= 1)
        mask[end, b[end]] = True
        a[end], b[end], step[end], halving[end] = b[end], b[end] + 1, 1, False
        active &= a < n - 1
        shrink = active & halving
        step[shrink] //= 2
        # doubling past the range's end: halve from here on
        past = active & ~halving & (b + step > n - 1)
        halving |= past
        test = np.flatnonzero(active & ~past & (b + step <= n - 1))
        if len(test) == 0:
            continue
        cand = b[test] + step[test]
        off = _segments_off(x, v, m, tol[test], test, a[test], cand)
        grow = test[~off]
        b[grow] = cand[~off]
        step[grow[~halving[grow]]] *= 2
        halving[test[off]] = True
    return mask


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


def _write_curve(
    fcurve: Any,
    x: Array,
    curve: _Curve,
    mask: NDArray[np.bool_],
    slopes: tuple[Array, Array],
    handles: tuple[int, int, int],
) -> None:
    """Replace the keys inside the range by the kept ones, with handles a third of the way to
    each neighbouring key (outside the range: to the nearest key there, else as long as the
    inner handle) along ``slopes`` (``key_slopes``: leaving, arriving at each frame): ALIGNED
    where a key's two slopes are one, else FREE (``handles``: the values of BEZIER, ALIGNED and
    FREE)."""
    keys = np.flatnonzero(mask)
    leaving, arriving = slopes
    kx, ky = x[keys], curve.values[keys]
    write.replace_keys(fcurve, kx, ky, handles[0])
    points = fcurve.keyframe_points
    n = len(points)
    co = np.empty(2 * n, dtype=np.float32)
    points.foreach_get("co", co)
    px = co[0::2].astype(np.float64)
    first = int(np.searchsorted(px, kx[0] - 1e-3))
    inside = slice(first, first + len(keys))
    before = px[first - 1] if first > 0 else None
    after = px[first + len(keys)] if first + len(keys) < n else None
    gaps = np.diff(kx)
    first_gap, last_gap = (gaps[0], gaps[-1]) if len(gaps) else (1.0, 1.0)
    left = np.concatenate([[kx[0] - before if before is not None else first_gap], gaps]) / 3.0
    right = np.concatenate([gaps, [after - kx[-1] if after is not None else last_gap]]) / 3.0
    types = np.where(leaving[keys] == arriving[keys], handles[1], handles[2]).astype(np.int32)
    for prop in ("handle_left_type", "handle_right_type"):
        t = np.empty(n, dtype=np.int32)
        points.foreach_get(prop, t)
        t[inside] = types
        points.foreach_set(prop, t)
    for prop, dx, km in (
        ("handle_left", -left, arriving[keys]),
        ("handle_right", right, leaving[keys]),
    ):
        h = np.empty(2 * n, dtype=np.float32)
        points.foreach_get(prop, h)
        h[2 * first : 2 * (first + len(keys)) : 2] = kx + dx
        h[2 * first + 1 : 2 * (first + len(keys)) : 2] = ky + km * dx
        points.foreach_set(prop, h)
    fcurve.update()


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
    x = np.asarray(frames, dtype=np.float64)
    builder = _PoseBuilder(ob, skeleton, template, base, channels)
    moves = skeleton.dof_affects[:n_goals]  # every bone that moves a goal (keys that hold it)
    effector_channels = [
        [
            k
            for k in range(len(channels))
            if np.any(moves[e] & (skeleton.dof_bone == builder.bone[k]))
        ]
        for e in range(n_goals)
    ]
    reducer = _Reducer(
        ob, channels, x, builder, n_goals, effector_channels, key_tolerance, position_tolerance
    )
    eff_curves = [[c for k in ks for c in reducer.of_channel[k]] for ks in effector_channels]
    rounds = 0
    for round_ in range(1, max_rounds + 1):
        rounds = round_
        reducer.write_dirty()
        add = reducer.channel_frames(round_)
        dist = np.linalg.norm(
            builder.points(channels, reducer.values())[:, :n_goals] - reducer.reference, axis=2
        )
        reducer.position_error = float(dist.max()) if dist.size else 0.0
        reducer.position_ratio = reducer.position_error / position_tolerance
        for e in range(n_goals):
            over = np.where(dist[:, e] > position_tolerance, dist[:, e], 0.0)
            reducer.key_group(add, eff_curves[e], over, round_)
        if not reducer.mark(add):
            break
    return ReduceReport(
        keys=int(reducer.masks.sum()),
        full_keys=len(reducer.curves) * len(x),
        rounds=rounds,
        channel_error=max(reducer.channel_ratio, reducer.position_ratio),
        rotation_error=reducer.rotation_error,
        position_error=reducer.position_error,
    )


def _budgets(
    channels: list[Channel],
    builder: _PoseBuilder,
    n_goals: int,
    effector_channels: list[list[int]],
    key_tolerance: float,
    position_tolerance: float,
    scale: Array,
) -> tuple[list[float], list[float]]:
    """Each channel's share of the tolerances: a rotation may turn its bone by at most
    ``key_tolerance`` and move each effector it carries by at most its share of
    ``position_tolerance`` (the tolerance over the root of the number of channels that move
    that effector, errors of different bones seldom line up, times the effector's ``scale``,
    at most the tolerance), through its lever (the effector's largest distance from the bone's
    head); a stretch or location moves each effector by at most its share. Returns (angle,
    distance) per channel."""
    levers = builder.levers(channels, n_goals) if n_goals else np.zeros((len(channels), 0))
    share = np.full(len(channels), position_tolerance)
    turn = np.full(len(channels), key_tolerance)
    for e, ks in enumerate(effector_channels):
        if not ks:
            continue
        part = min(1.0, scale[e] / math.sqrt(len(ks))) * position_tolerance
        for k in ks:
            share[k] = min(share[k], part)
            if levers[k, e] > 0.0:
                turn[k] = min(turn[k], part / levers[k, e])
    return turn.tolist(), share.tolist()


def _scale_levers(
    channels: list[Channel],
    builder: _PoseBuilder,
    n_goals: int,
    effector_channels: list[list[int]],
) -> list[float]:
    """Per channel, what a scale error is over: a scale channel's bone length, or the largest
    distance from its head to an effector it carries where that is farther (a uniform scale
    scales the bone and every bone that inherits it, so it moves the effector by the error
    times that distance); the bone length for the other channels (unused)."""
    out = list(builder.lengths)
    if not n_goals or not any(ch.attr == "scale" for ch in channels):
        return out
    levers = builder.levers(channels, n_goals)
    for e, ks in enumerate(effector_channels):
        for k in ks:
            if channels[k].attr == "scale":
                out[k] = max(out[k], float(levers[k, e]))
    return out


class _Reducer:
    """The curves of a lean bake, their kept frames and Blender's evaluation of them."""

    def __init__(
        self,
        ob: Any,
        channels: list[Channel],
        x: Array,
        builder: _PoseBuilder,
        n_goals: int,
        effector_channels: list[list[int]],
        key_tolerance: float,
        position_tolerance: float,
    ) -> None:
        self.channels, self.x, self.builder = channels, x, builder
        self.key_tolerance = key_tolerance
        self.handles = (
            _enum_value("interpolation", "BEZIER"),
            _enum_value("handle_left_type", "ALIGNED"),
            _enum_value("handle_left_type", "FREE"),
        )
        action = write.ensure_action(ob)
        self.curves: list[_Curve] = []
        self.of_channel: list[list[int]] = []
        for k, ch in enumerate(channels):
            path = write.channel_path(ch.bone, ch.attr)
            self.of_channel.append([])
            for i in range(ch.values.shape[1]):
                fcurve = write.ensure_fcurve(ob, action, path, i, ch.bone)
                v = ch.values[:, i]
                self.of_channel[k].append(len(self.curves))
                self.curves.append(_Curve(k, fcurve, v, _slopes(x, v), 0.0))
        self.solved = np.array([c.values for c in self.curves]).reshape(-1, len(x))
        self.evaluated = self.solved.copy()
        self.slopes = np.array([c.slopes for c in self.curves]).reshape(-1, 3, len(x))
        # the solved effectors, what the lean curves are held to
        self.reference = builder.points(channels, [ch.values for ch in channels])[:, :n_goals]
        self.tolerances = np.full(len(self.curves), np.nan)
        self.masks = np.zeros(self.evaluated.shape, dtype=bool)
        self.lengths = _scale_levers(channels, builder, n_goals, effector_channels)
        budget = (n_goals, effector_channels, key_tolerance, position_tolerance)
        self._choose(*budget, np.ones(n_goals))
        if n_goals and len(x) > 1:  # loosen each effector's shares by its headroom (SPLIT)
            slopes = key_slopes(x, self.masks, self.solved, self.slopes, self.tolerances)
            curve = [
                hermite(x, np.flatnonzero(self.masks[c]), self.solved[c], *(s[c] for s in slopes))
                for c in range(len(self.curves))
            ]
            got = builder.points(
                channels, [np.array([curve[c] for c in cs]).T for cs in self.of_channel]
            )
            off = np.linalg.norm(got[:, :n_goals] - self.reference, axis=2).max(axis=0)
            self._choose(*budget, np.clip(position_tolerance / np.maximum(off, 1e-300), 1, SPLIT))
        self.dirty = np.ones(len(self.curves), dtype=bool)
        self.channel_ratio = self.position_ratio = 0.0
        self.rotation_error = self.position_error = 0.0

    def _choose(
        self,
        n_goals: int,
        effector_channels: list[list[int]],
        key_tolerance: float,
        position_tolerance: float,
        scale: Array,
    ) -> None:
        """The curves' tolerances (``_budgets`` with each effector's share times ``scale``) and
        their keys by furthest reach (again only for the curves whose tolerance changed)."""
        angles, distances = _budgets(
            self.channels,
            self.builder,
            n_goals,
            effector_channels,
            key_tolerance,
            position_tolerance,
            scale,
        )
        for k, ch in enumerate(self.channels):
            tol = component_tolerances(ch, angles[k], distances[k], self.lengths[k])
            for i, c in enumerate(self.of_channel[k]):
                self.curves[c].tolerance = float(tol[i])
        tolerances = np.array([c.tolerance for c in self.curves])
        new = np.flatnonzero(tolerances != self.tolerances)  # every curve the first time (NaN)
        self.tolerances = tolerances
        if new.size:
            self.masks[new] = _reach(self.x, self.solved[new], self.slopes[new], tolerances[new])

    def write_dirty(self) -> None:
        dirty = np.flatnonzero(self.dirty)
        leaving, arriving = key_slopes(
            self.x,
            self.masks[dirty],
            self.solved[dirty],
            self.slopes[dirty],
            self.tolerances[dirty],
        )
        for k, c in enumerate(dirty):
            curve = self.curves[c]
            slopes = (leaving[k], arriving[k])
            _write_curve(curve.fcurve, self.x, curve, self.masks[c], slopes, self.handles)
            self.evaluated[c] = [curve.fcurve.evaluate(f) for f in self.x]
        self.dirty[:] = False
        target = np.array([c.values for c in self.curves]).reshape(self.masks.shape)
        self.relative = (
            np.abs(self.evaluated - target) / np.maximum(self.tolerances, 1e-300)[:, None]
        )

    def values(self) -> list[Array]:
        return [self.evaluated[cs].T for cs in self.of_channel]

    def channel_frames(self, round_: int) -> list[set[int]]:
        """Frames to key for check 1 (the module docstring); records the largest errors."""
        add: list[set[int]] = [set() for _ in self.curves]
        self.channel_ratio = self.rotation_error = 0.0
        for k, ch in enumerate(self.channels):
            cs = self.of_channel[k]
            if is_rotation(ch):
                angle = rotation_angle(ch, self.evaluated[cs].T, self.builder.modes[k])
                self.rotation_error = max(self.rotation_error, float(angle.max()))
                ratio = float(angle.max()) / self.key_tolerance
                over = np.where(angle > self.key_tolerance, angle, 0.0)
                self.key_group(add, cs, over, round_)
            else:
                ratio = float(self.relative[cs].max())
                for c in cs:
                    off = np.where(self.relative[c] > 1.0, self.relative[c], 0.0)
                    add[c].update(_gap_worst(self.masks[c], off))
            self.channel_ratio = max(self.channel_ratio, ratio)
        return add

    def key_group(self, add: list[set[int]], curves: list[int], over: Array, round_: int) -> None:
        """At the worst frame of every gap between the frames keyed in all ``curves`` where
        ``over`` > 0: key the curves furthest off there (all of them after SHARE_ROUNDS)."""
        if not curves or not np.any(over > 0.0):
            return
        cs = np.array(curves, dtype=np.intp)
        share = 0.5 if round_ <= SHARE_ROUNDS else 0.0
        for f in _gap_worst(self.masks[cs].all(axis=0), over):
            score = self.relative[cs, f]
            for c in cs[score >= share * score.max()]:
                add[int(c)].add(f)

    def mark(self, add: list[set[int]]) -> bool:
        """Key the new frames; whether any curve changed."""
        for c, new in enumerate(add):
            new_frames = [f for f in new if not self.masks[c, f]]
            if new_frames:
                self.masks[c, new_frames] = True
                self.dirty[c] = True
        return bool(self.dirty.any())
