"""The residual's curvature: the second-order term of the Hessian of the weighted position error.

For E = 1/2 |W^1/2 e|^2 with e = t - p(q), the Hessian is J^T W J + S with
S_ab = -sum_e u_e . d2p_e / dq_a dq_b, u_e = W e_e (Nocedal and Wright, Numerical Optimization,
eq. 10.5). Gauss-Newton and LM drop S; where the goals are met S vanishes with the error, but
where they cannot be met (a target out of reach, goals of one tree in conflict) the error stays
large, and without S the steps creep: near a straight chain J^T J loses the directions that
bend it, so LM took its 500 steps on a tentacle whose target is out of reach and still ended
millimetres short of the straight chain. With S the same frames reach their lower bound in 10-40
steps (measured on captured zoo bakes, docs/solver-api.md).

Every DOF here is a rotation about an axis w through a pivot o (the bone's head), in the frame
the solver steps in (R <- exp(d_pre) R exp(d_post), re-centred at each iterate). For DOF a acting
upstream of DOF b (a's bone an ancestor of b's, or a pre-rotation of b's own bone) rotating a
turns everything b's derivative is made of, so

    d2p / dq_a dq_b = w_a x (w_b x (p - o_b)),

and for two DOFs of one rotation (the same bone, both pre or both post) the exponential's second
order term gives the symmetric half of both orders.

**No twist.** The step's part along the DOFs that turn a bone about its own length is dropped
(``twist_dofs``: its Y axis after its rotation, on a bone that can also swing). Where the Newton
step runs, the one unmet goal is out of reach and its chain straightens toward it; there each
bone's twist is what the goals cannot see, and with S coupling it to the bending the step turned
it by a different amount in each frame: on captured zoo bakes (seed 3) the joint jumps over 10
degrees between frames of the batched solve rose from 28-45 (LM) to 76-126 (spiders,
quadrupeds); with the twist dropped they were 32-46. Solving the system without the twist DOFs
instead left 39-51. Swinging (about the two axes across the bone) straightens a chain.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from .skeleton import (
    DOWNSTREAM,
    ROT_POST,
    ROT_PRE,
    SAME,
    UPSTREAM,
    Kinematics,
    Skeleton,
    dof_order,
)
from .stops import RAISES

Array = NDArray[np.float64]


def curvature_terms(
    axes: Array,
    pivots: Array,
    points: Array,
    u: Array,
    rel: NDArray[np.int8],
    moves: NDArray[np.bool_],
) -> Array:
    """(F, n, n) S = -sum_e u_e . d2p_e / dq_a dq_b of F frames: ``axes``, ``pivots`` (F, n, 3)
    each DOF's axis and pivot, ``points`` (F, E, 3) the effectors', ``u`` (F, E, 3) their
    weighted position errors (model space; zero for a goal without position rows), ``rel`` the
    DOFs' ``dof_order``, ``moves`` (E, n) which DOFs move which effector."""
    frames, n = axes.shape[0], axes.shape[1]
    out = np.zeros((frames, n, n))
    for e in range(points.shape[1]):
        if not np.any(u[:, e]):
            continue
        lever = np.cross(axes, points[:, e, None, :] - pivots)  # w_b x (p - o_b)
        turn = np.cross(u[:, e, None, :], axes)  # u x w_a: u . (w_a x v) = v . (u x w_a)
        t = np.einsum("fai,fbi->fab", turn, lever)  # t[a, b] = u . (w_a x (w_b x (p - o_b)))
        tt = np.swapaxes(t, 1, 2)
        both = np.where(rel == SAME, 0.5 * (t + tt), 0.0)
        m = np.where(rel == UPSTREAM, t, np.where(rel == DOWNSTREAM, tt, both))
        out -= m * (moves[e][:, None] & moves[e][None, :])
    return out


def curvature(skel: Skeleton, kin: Kinematics, u: Array) -> Array:
    """``curvature_terms`` of every DOF of ``skel`` at the kinematics ``kin``."""
    axes, pivots = skel.dof_axes(kin), kin.head[:, skel.dof_bone]
    return curvature_terms(axes, pivots, kin.points, u, dof_order(skel), skel.dof_moves)


def newton_solve(h: Array, g: Array, lam2: float) -> tuple[Array, NDArray[np.bool_]]:
    """dt = (h + mu I)^-1 g of F frames by Cholesky, mu = lam2 raised tenfold until the matrix
    is positive definite (near a saddle S outweighs J^T J), at most RAISES times. Returns the
    steps and which frames have one (the others keep their method's step)."""
    frames, n = g.shape
    dt = np.zeros((frames, n))
    ok = np.zeros(frames, dtype=bool)
    eye = np.eye(n)
    for f in range(frames):
        mu = lam2
        for _ in range(RAISES + 1):
            try:
                low = np.linalg.cholesky(h[f] + mu * eye)
            except np.linalg.LinAlgError:
                mu *= 10.0
                continue
            dt[f] = np.linalg.solve(low.T, np.linalg.solve(low, g[f]))
            ok[f] = True
            break
    return dt, ok


def twist_dofs(skel: Skeleton) -> NDArray[np.bool_]:
    """(n,) the DOFs that turn a bone about its own length (its Y axis, after its rotation) on
    bones that can also swing: the Newton step leaves them alone (module docstring). Cached."""
    cached = skel.__dict__.get("_twist_dofs")
    if cached is not None:
        return np.asarray(cached)
    rotational = (skel.dof_kind == ROT_PRE) | (skel.dof_kind == ROT_POST)
    twist = (skel.dof_kind == ROT_POST) & (skel.dof_axis == 1)
    swings = np.zeros(skel.n_bones, dtype=bool)
    swings[skel.dof_bone[rotational & ~twist]] = True
    out = twist & swings[skel.dof_bone]
    skel.__dict__["_twist_dofs"] = out
    return out


def newton_step(
    axes: Array,
    pivots: Array,
    points: Array,
    u: Array,
    rel: NDArray[np.int8],
    moves: NDArray[np.bool_],
    twist: NDArray[np.bool_],
    jw: Array,
    ew: Array,
    colw: Array,
    lam2: float,
) -> tuple[Array, NDArray[np.bool_]]:
    """The damped Newton step (J~^T J~ + S~ + mu I) dt = J~^T e~ of F frames (``newton_solve``),
    S~ = ``curvature_terms`` in the weighted coordinates (W_q^1/2 S W_q^1/2, ``colw`` =
    W_q^1/2), its part along the ``twist`` DOFs dropped (``twist_dofs``)."""
    s = curvature_terms(axes, pivots, points, u, rel, moves) * colw[:, :, None] * colw[:, None, :]
    h = np.einsum("fma,fmb->fab", jw, jw) + s
    step, ok = newton_solve(h, np.einsum("fma,fm->fa", jw, ew), lam2)
    step[:, twist] = 0.0
    return step, ok


def second_order_step(
    skel: Skeleton,
    kin: Kinematics,
    jw: Array,
    ew: Array,
    u: Array,
    colw: Array,
    lam2: float,
) -> tuple[Array, NDArray[np.bool_]]:
    """``newton_step`` of every DOF of ``skel`` at the kinematics ``kin``."""
    axes, pivots = skel.dof_axes(kin), kin.head[:, skel.dof_bone]
    rel, moves = dof_order(skel), skel.dof_moves
    return newton_step(
        axes, pivots, kin.points, u, rel, moves, twist_dofs(skel), jw, ew, colw, lam2
    )
