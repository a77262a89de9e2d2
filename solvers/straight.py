"""A goal out of reach starts where it ends: its chain held straight, aimed at the target.

A position goal whose target lies beyond its chain's reach, from the chain's fixed base, is
met as closely as it can be by the chain held straight toward the target: its error is then
the target's distance beyond the reach, the lower bound at which the loop stops
(``solve._Problem.lower_bound``). From any other pose the loop creeps there: J^T J loses the
bending directions of a nearly straight chain, and the damped Newton step that gets there
(solvers/curvature.py) costs O(n^3) an iteration on a chain of n DOFs. A 93-bone tentacle took
162 iterations a frame out of reach (5 of 66 frames at the cap of 500), 6.7 s of its 250 frames'
solve; zoo tentacles of 24-38 bones 33 a frame.

So ``straighten`` starts such a frame there: top down, each bone of the chain turns by the
least rotation that points its segment (to the next bone's head, or the effector for the last
bone) at the target, keeping its roll, the bones above it already turned. The loop then finds
the bound met at once (the chain's segments in line: the error equals the bound to rounding)
or goes on from there (a segment offset across its bone: a near answer). It applies to a goal
alone in its IK tree (no other goal, pole or balance shares a DOF with it, and no DOF lies above
its chain, so its base does not move), with a position and no rotation, on a chain whose bones
are all free ball joints (three rotation axes, no limits, no location or stretch). Anything
else starts from the pose given. A function of the frame's targets and its start pose only, so
a range still equals its frames solved one by one; ``solve``, ``solve_tree`` and the one-frame
paths (solvers/solver.py) call it on their start, before their loops.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from .goals import PreparedGoals
from .skeleton import KIND_BALL, ROT_POST, Pose, Skeleton
from .so3 import orthonormalize

Array = NDArray[np.float64]

MIN_BONES = 6
"""Chains shorter than this start as given: a limb of 2-4 bones out of reach gets to its bound
in about 5 iterations of the compiled loop, less than straightening its start costs in numpy
calls (the flip repair solves a tree's frames in 40-70 calls a bake: zoo quadrupeds, spiders
and humanoids baked 5-15 % slower with it)."""


def chains(
    skel: Skeleton, g: PreparedGoals
) -> list[tuple[int, NDArray[np.intp], NDArray[np.intp]]]:
    """The goals ``straighten`` applies to, each with its chain's bones top down and the bones
    above the chain from the root down (cached on the skeleton per goal kinds)."""
    if g.balance is not None:
        return []
    key = (
        (g.w_pos > 0).tobytes(),
        (g.w_rot > 0).tobytes(),
        np.asarray(g.secondary).tobytes(),
        np.asarray(g.is_aim).tobytes(),
    )
    cache: dict[tuple[bytes, ...], list[tuple[int, NDArray[np.intp], NDArray[np.intp]]]]
    cache = skel.__dict__.setdefault("_straight_chains", {})
    found = cache.get(key)
    if found is None:
        found = cache[key] = _chains(skel, g)
    return found


def _chains(
    skel: Skeleton, g: PreparedGoals
) -> list[tuple[int, NDArray[np.intp], NDArray[np.intp]]]:
    out = []
    moves = skel.dof_moves  # (E, n)
    with_dofs = np.zeros(skel.n_bones, dtype=bool)
    with_dofs[skel.dof_bone] = True
    for e in range(skel.n_effectors):
        if not (g.w_pos[e] > 0 and g.w_rot[e] <= 0 and not g.is_aim[e] and not g.secondary[e]):
            continue
        mine = moves[e]
        if not mine.any() or np.any(moves[np.arange(skel.n_effectors) != e][:, mine]):
            continue  # no chain, or another goal shares a DOF with it
        bones = np.unique(skel.dof_bone[mine])
        path: list[int] = []
        b = int(skel.eff_bone[e])
        while b >= 0 and len(path) < len(bones):
            path.append(b)
            b = int(skel.parents[b])
        if sorted(path) != bones.tolist():
            continue  # a bone of the path without DOFs: not a chain of free joints
        above = []
        while b >= 0 and not with_dofs[b]:
            above.append(b)
            b = int(skel.parents[b])
        if b >= 0:
            continue  # a DOF above the chain (another tree carries it, or its own is cut)
        dofs = np.isin(skel.dof_bone, bones)
        if (
            np.any(skel.rot_kind[bones] != KIND_BALL)
            or np.any(skel.dof_kind[dofs] != ROT_POST)
            or np.any(skel.dof_limited[dofs])
        ):
            continue
        if len(path) < MIN_BONES:
            continue
        out.append((e, np.array(path[::-1], dtype=np.intp), np.array(above[::-1], dtype=np.intp)))
    return out


def straighten(skel: Skeleton, g: PreparedGoals, start: Pose) -> Pose:
    """``start`` with the chains of ``chains`` held straight and aimed at their targets on the
    frames where those lie beyond the chain's reach (see the module docstring); ``start``
    itself when there are none."""
    found = chains(skel, g)
    if not found:
        return start
    tm = g.targets_model()
    reach = skel.chain_reach()[0]
    every = np.arange(start.frames)
    out = None
    for e, path, above in found:
        # the base's frame and head, down from the root (the bones above it and the base: a few)
        rot, head = _walk(skel, start, every, above, np.eye(3), np.zeros(3))
        base_rot, base_head = _walk(skel, start, every, path[:1], rot, head)
        base_head = np.broadcast_to(base_head, (len(every), 3))
        toward = tm[:, e] - base_head
        d = np.linalg.norm(toward, axis=-1)
        frames = np.flatnonzero(d > reach[e])
        if frames.size == 0:
            continue
        if out is None:
            out = start.copy()
        u = toward[frames] / d[frames, None]
        parent = np.broadcast_to(rot, (len(every), 3, 3))[frames]
        worlds, heads = [base_rot[frames]], [base_head[frames]]
        for k in range(1, len(path)):  # the chain below the base, on these frames
            r, h = _walk(skel, start, frames, path[k : k + 1], worlds[-1], heads[-1])
            worlds.append(r)
            heads.append(h)
        tip = heads[-1]
        if skel.eff_stretches[e]:
            tip = tip + start.stretch[frames, path[-1], None] * worlds[-1][:, :, 1]
        ends = np.stack([*heads[1:], tip + worlds[-1] @ skel.eff_offset[e]])
        # every bone at once (each turns its own segment, as the walk found it, toward u; its
        # new local rotation is relative to its parent's new frame): (bones, frames, 3, 3)
        shape = (len(path), frames.size)
        swing = _swing((ends - np.stack(heads)).reshape(-1, 3), np.tile(u, (len(path), 1)))
        world = swing.reshape(*shape, 3, 3) @ np.stack(worlds)
        parents = np.concatenate([parent[None], world[:-1]])
        local = np.swapaxes(parents @ skel.rest_rot[path][:, None], -1, -2) @ world
        # projected onto rotations: the transpose above inverts a start's frame only as far as
        # that frame is a rotation, so a start off by e came out about len(path) e off, and a
        # start that was the last frame's straightened answer drifted 10x a frame to NaN
        out.rotations[frames[None, :], path[:, None]] = orthonormalize(local)
    return start if out is None else out


def _walk(
    skel: Skeleton,
    pose: Pose,
    frames: NDArray[np.intp],
    bones: NDArray[np.intp],
    rot: Array,
    head: Array,
) -> tuple[Array, Array]:
    """Forward kinematics (``Skeleton.forward_kinematics``'s) of ``frames`` down ``bones``, each
    the child of the one before, from the first one's parent's frame ``rot``, ``head`` (the
    identity and the origin for a root): the last bone's model-space rotation and head
    (``rot``, ``head`` for no bones)."""
    for b in bones.tolist():
        rest = skel.rest_rot[b]
        local = skel.rest_pos[b]
        if pose.locations[frames, b].any():
            local = local + pose.locations[frames, b] @ rest.T
        p = skel.parents[b]
        if p >= 0 and pose.stretch[frames, p].any():
            local = local + pose.stretch[frames, p, None] * _Y
        head = head + (rot @ local[..., None])[..., 0]
        rot = rot @ rest @ pose.rotations[frames, b]
    return rot, head


_Y = np.array([0.0, 1.0, 0.0])


def _swing(a: Array, u: Array) -> Array:
    """(F, 3, 3) the least rotation turning the directions of ``a`` (F, 3) to the unit ``u``:
    I + [v]x + [v]x^2 / (1 + c) with v = a x u, c = a . u for unit a (the identity where ``a``
    is zero; a half-turn about a fixed perpendicular where they are opposite)."""
    n = np.linalg.norm(a, axis=-1, keepdims=True)
    a = np.where(n > 0, a / np.where(n > 0, n, 1.0), u)
    v = np.cross(a, u)
    c = np.sum(a * u, axis=-1)
    k = np.zeros((*a.shape, 3))
    k[:, 0, 1], k[:, 0, 2], k[:, 1, 2] = -v[:, 2], v[:, 1], -v[:, 0]
    k[:, 1, 0], k[:, 2, 0], k[:, 2, 1] = v[:, 2], -v[:, 1], v[:, 0]
    opposite = c < -1.0 + 1e-9
    out = np.eye(3) + k + (k @ k) / np.where(opposite, 1.0, 1.0 + c)[:, None, None]
    if np.any(opposite):
        p = np.cross(a[opposite], np.where(np.abs(a[opposite, :1]) < 0.9, _X, _Y))
        p /= np.linalg.norm(p, axis=-1, keepdims=True)
        out[opposite] = 2.0 * p[:, :, None] * p[:, None, :] - np.eye(3)
    return out


_X = np.array([1.0, 0.0, 0.0])
