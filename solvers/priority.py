"""Goal priority inside an IK tree, in Blender's order: the chain that starts deeper wins.

Blender splits an armature into IK trees by the root bone of each constraint's chain and solves
them one after the other, parents first: where a head's chain (chest, neck, head) shares the
chest with the hands' chains through the spine, the head's tree is solved last, from the hands'
result, and turns the chest again. The head is met where its chain reaches; the hands lose what
the chest took from them. Our IK tree holds every goal whose chains share a moving bone, and
one weighted solve of it ends at a compromise: a lower rms error than Blender's, but neither the
head nor the hands met (zoo seed 505, humanoids: the head within 1e-3 on 1-39 % of its reachable
samples against Blender's 27-96 %).

So a tree whose goals' chains start at different depths is solved in two levels:

- *Primary* goals: those whose chain root has no other goal's root below it (the head's chest
  below the hands' spine). Their roots do not nest, so primaries share bones only with
  primaries of the same root. A goal without a chain (``Effector.chain`` None: every bone to
  the armature's root) starts above every chain.
- After the tree's solve (the compromise), at the frames where a primary goal is not met:
  (A0) the tree is solved again from the compromise by the same loop with the primaries
  weighing ``PRIMARY_WEIGHT`` (1000) times their own weights: the compromise that comes
  nearest them, where every bone of the tree gives way (the spine under a head's chain of
  three too), so the others lose no more than the primaries need; where that meets them, it
  is the frame's pose. Measured on 80 zoo humanoids (``python -m benchmarks.zoo --seed S
  --count 20 --kinds humanoid``, seeds 6262, 6363, 6464 and 6565), against (A) from the
  compromise: the reachable share within 1e-3 79.6 % on average against 78.5 % (Blender's
  74.5-75.4 % over four runs), the rms error 0.118 against 0.121, joint jumps 3,547 against
  3,868; every target of the zoo met on 61 and 63 rigs in two runs against 60 (Blender's own
  bake of a rig whose chains overlap differs from one process to the next), on 71 in both
  against 66 where Blender's bake is taken with the bones it pulls off put back; 4 of the 80
  (6262's 05, 06 and 15, 6565's 09: hands through the spine with orientation goals and a
  head) had an rms error 0.22-0.25 against Blender's 0.16-0.20, where (A) turned the chest
  to reach the head and threw the hands 0.8 m off, 0.12-0.15 with (A0);
  (A) the primary goals are solved alone on their own chains (``Skeleton.subtree``), from
  (A0)'s pose, by the same loop: as Blender solves the head's tree from the pose below it, but
  from a pose that nearly meets them rather than from the hands' own solution, so the chest
  turns less;
  (A2) at the frames where (A) leaves a primary unmet, Blender's order from the frame's start
  pose: the other goals alone on their chains, then the primaries from there; taken where it
  meets more primaries than (A). A chest goal pulls at the head chain's root: the
  compromise's spine can leave the head beyond its chain's reach where the chest goal's own
  solve does not (zoo seed 4747's 05, a chest goal, head and hands on chains of 3: the head
  within 1e-3 on 31 % of the frames with (A) alone, 70 % with (A2));
  (B) the other goals are then brought back as near as they can get with the primaries held
  where (A) or (A2) left them. Each step is the damped least-squares step of the others' rows
  through the null space of the primaries' rows, dq = N (J_o N)^T (J_o N N^T J_o^T +
  lambda^2 I)^-1 e_o with N = I - J_p^+ J_p (the null-space projection of Deo-Walker eq. 20,
  the secondary task's step of Nakamura, Hanafusa and Yoshikawa 1987, their reference 29),
  with Sugihara's damping lambda^2 = E + ``DAMPING`` (E the others' weighted squared error:
  their errors stay large where they conflict with the primaries), no DOF turning by more
  than ``MAX_TURN``, followed by ``HOLD_STEPS`` minimum-norm steps that put the primaries
  back. A step is kept only when it lowers E and leaves every primary as near its target as
  (A) did (plus a tenth of the tolerance), else it is retried at half the length; a frame
  stops when each other goal is as good as (A0) left it, a kept step gains less than
  ``MIN_GAIN`` of E, the step length falls under ``MIN_SCALE``, or after ``STEPS`` steps.

A frame where every primary goal is met keeps the compromise (or (A0)'s pose, where that meets
them). Each frame is treated on its own, so a range still equals its frames solved one by one.
Deterministic. The steps (B) run in the compiled loop (solvers/kernel.py ``hold``) where it
covers the problem, else in numpy, with the same results to rounding: on four captured zoo
bakes of shared-chest humanoids the steps took 0.03-0.22 s per 250 frames against 0.26-1.06 s
in numpy.

Measured on zoo seed 505's 20 humanoids (``python -m benchmarks.zoo --seed 505 --count 20
--kinds humanoid``): every target of the zoo met on 16 of 20 rigs against 12 of 20 with the
compromise alone; the reachable share at least Blender's on 18 (13); rms no worse than
Blender's on 20 (20); joint jumps no more than Blender's on 17 (17). Tried and left out: (A)
with every DOF of the tree (spine too) where the own chain falls short met the head more
often (0.98 against 0.75 of the frames on seed 404's rig 00) but threw the hands off and
added joint jumps in the spine (jumps no more than Blender's on 14 of 20). Two changes to (B),
measured on captured zoo bakes of humanoids (seeds 6262 and 6363 with ``--kinds humanoid``, and
9090's 00, 05 and 15; each rig's solve, flip repair and smoothing, side by side), left out: a
frame stopping once a kept step gains less than 1e-5 (1e-4) of E rather than ``MIN_GAIN``: 21 %
(34 %) less time, but 64.80 % (64.53 %) of the samples within 1e-3 against 64.97 % (up to 1.7
(4.1) points fewer on a rig: 6363's 03 (18)) for jumps 1,450 (1,457) against 1,449 (43 rigs); a
damping that shrinks after each kept step (lambda^2 = mu E + ``DAMPING``, mu quartered down to
1e-3, quadrupled up to 1 after an undone step): 0.09 points more samples within 1e-3 and about
10 % less time, but 1,358 jumps against 1,309 (41 rigs): the slow steps near (A)'s pose keep
neighbouring frames near each other.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

from . import kernel
from .goals import no_worse
from .methods import damped_solve
from .skeleton import Kinematics, Pose, Skeleton
from .so3 import angle_axis, mul
from .stops import CONVERGED, REASONS

if TYPE_CHECKING:
    from .goals import PreparedGoals
    from .solve import SolveResult, _Problem

Array = NDArray[np.float64]

STEPS = 40
"""Most null-space steps (B) per frame."""
HOLD_STEPS = 2
"""Minimum-norm steps that put the primary goals back after each null-space step."""
DAMPING = 1e-6
"""The constant part of the null-space step's damping (lambda^2 = E + DAMPING)."""
MIN_GAIN = 1e-6
"""A frame stops once a kept step lowers E by less than this fraction of it."""
MIN_SCALE = 1e-3
"""A frame stops once its step has been halved below this fraction."""
MAX_TURN = 0.2
"""The largest change of a DOF (radians, weighted) in one null-space step."""
HOLD_DAMPING = 1e-12
"""Regularisation of the primaries' rows (J_p J_p^T + HOLD_DAMPING I)."""
PRIMARY_WEIGHT = 1e3
"""How many times their own weights the primaries weigh in the tree's second solve (A0). On four
captured zoo humanoids (seeds 5757, 6060, 6262) 100 and 10,000 gave rms errors within 2 % of
1,000's and shares of samples within 1e-3 within 0.023 of its."""


def chain_roots(skel: Skeleton) -> NDArray[np.intp]:
    """(E,) the root bone of each effector's chain (its shallowest bone; -1: no chain, every
    bone up to the armature's root)."""
    roots = np.full(skel.n_effectors, -1, dtype=np.intp)
    for e, eff in enumerate(skel.effectors):
        if eff.chain:
            roots[e] = min(eff.chain, key=lambda b: (int(skel.depth[b]), b))
    return roots


def _below(skel: Skeleton, a: int, b: int) -> bool:
    """Whether bone ``a`` lies strictly below bone ``b`` (-1: above every bone)."""
    if a < 0:
        return False
    if b < 0:
        return True
    p = int(skel.parents[a])
    while p >= 0:
        if p == b:
            return True
        p = int(skel.parents[p])
    return False


def levels(skel: Skeleton, effectors: NDArray[np.intp]) -> NDArray[np.bool_]:
    """(len(effectors),) which of ``effectors`` (one IK tree's weighted goals) are primary: no
    other one's chain root lies below theirs. All True when the roots do not nest."""
    roots = chain_roots(skel)[effectors]
    return np.array(
        [not any(_below(skel, int(o), int(r)) for o in roots) for r in roots], dtype=bool
    )


def has_levels(skel: Skeleton, trees: list[NDArray[np.intp]]) -> bool:
    """Whether an IK tree of ``skel`` (``trees``, every effector weighted) has goals of two
    levels: then its solve runs ``prioritize`` (the batched loop; the one-frame paths step
    aside)."""
    cache: dict[tuple[tuple[int, ...], ...], bool] = skel.__dict__.setdefault("_has_levels", {})
    key = tuple(tuple(int(e) for e in t) for t in trees)
    if key not in cache:
        cache[key] = any(not levels(skel, t).all() for t in trees if len(t) > 1)
    return cache[key]


def split(problem: _Problem, g: PreparedGoals) -> tuple[NDArray[np.intp], NDArray[np.intp]]:
    """(primary, other) effectors of the problem's weighted goals (poles and aim goals aside),
    or two empty arrays when there is one level only."""
    empty = np.zeros(0, dtype=np.intp)
    if g.on is not None or problem.balance or problem.aim.size:
        return empty, empty
    goals = np.flatnonzero((problem.use_pos | problem.use_rot) & ~g.secondary)
    if len(goals) < 2:
        return empty, empty
    primary = levels(problem.skel, goals)
    if primary.all():
        return empty, empty
    return goals[primary], goals[~primary]


def prioritize(
    problem: _Problem,
    g: PreparedGoals,
    result: SolveResult,
    primary: NDArray[np.intp],
    other: NDArray[np.intp],
    loops: tuple[
        Callable[[Skeleton, PreparedGoals, Pose], SolveResult],
        Callable[[PreparedGoals, Pose], SolveResult],
    ],
    start: Pose,
) -> SolveResult:
    """``result`` (the tree's converge-mode solve from ``start``) with, at the frames where a
    primary goal is not met, the tree solved again with the primaries weighing more
    (``loops[1](goals, start)``: the tree's loop alone), then the primary goals solved on their
    own chains (``loops[0](skeleton, goals, start)``: the tree's loop on another skeleton) and
    the others brought back in their null space; see the module docstring."""
    skel, st = problem.skel, problem.settings
    solve_tree, weighted = loops
    shape = result.position_error.shape
    tol_pos, tol_rot = (np.broadcast_to(t, shape) for t in problem.tolerances(g))
    frames = _unmet(result, primary, tol_pos, tol_rot)
    if frames.size == 0:
        return result
    # (A0) the tree again from the compromise, its primaries weighing PRIMARY_WEIGHT times more
    result = _weigh(
        result, frames, weighted(_heavier(g.take(frames), primary), result.pose.take(frames))
    )
    frames = _unmet(result, primary, tol_pos, tol_rot)
    if frames.size == 0:
        return result
    # (A) the primaries alone on their own chains (as Blender solves them), from (A0)'s pose
    sub, bones, solved = skel.subtree(primary)
    gf = g.take(frames)
    gs = gf.select(primary)
    pose = result.pose.take(frames)
    own = solve_tree(sub, gs, pose.of_bones(bones))
    pose.put_solved(bones, solved, own.pose)
    iterations_a = np.array(own.iterations, copy=True)
    # (A2) where a primary is still unmet: Blender's order from the frame's start
    tp, tr = tol_pos[frames][:, primary], tol_rot[frames][:, primary]
    met_a = _met(own.position_error, own.rotation_error, tp, tr)
    again = np.flatnonzero(~met_a.all(axis=1))
    if again.size:
        alt = start.take(frames[again])
        below, below_bones, below_solved = skel.subtree(other)
        part = solve_tree(below, gf.take(again).select(other), alt.of_bones(below_bones))
        alt.put_solved(below_bones, below_solved, part.pose)
        second = solve_tree(sub, gs.take(again), alt.of_bones(bones))
        alt.put_solved(bones, solved, second.pose)
        met_a2 = _met(second.position_error, second.rotation_error, tp[again], tr[again])
        better = met_a2.sum(axis=1) > met_a[again].sum(axis=1)
        pose.put(again[better], alt.take(np.flatnonzero(better)))
        iterations_a[again] += np.asarray(part.iterations) + np.asarray(second.iterations)
    # (B) the others in the null space of the primaries, held where (A) or (A2) left them,
    # until each is as good as (A0) left it (the flip repair's admissibility)
    bound = (
        no_worse(result.position_error[frames], st.tolerance),
        no_worse(result.rotation_error[frames], st.rotation_tolerance),
    )
    steps, err_pos, err_rot = _null_space_steps(problem, gf, pose, primary, other, bound)
    whole = result.pose.copy()
    whole.put(frames, pose)
    pos, rot = result.position_error.copy(), result.rotation_error.copy()
    pos[frames], rot[frames] = err_pos, err_rot
    iterations = np.array(result.iterations, copy=True)
    iterations[frames] += iterations_a + steps
    met = _met(err_pos, err_rot, tol_pos[frames], tol_rot[frames]).all(axis=1)
    reason = np.array(result.reason, copy=True)
    reason[frames[met]] = REASONS[CONVERGED]
    return replace(
        result,
        pose=whole,
        position_error=pos,
        rotation_error=rot,
        iterations=iterations,
        reason=reason,
    )


def _unmet(
    result: SolveResult, primary: NDArray[np.intp], tol_pos: Array, tol_rot: Array
) -> NDArray[np.intp]:
    """The frames where a primary goal is not within its tolerance."""
    far = (result.position_error[:, primary] > tol_pos[:, primary]) | (
        result.rotation_error[:, primary] > tol_rot[:, primary]
    )
    return np.flatnonzero(far.any(axis=1))


def _heavier(g: PreparedGoals, primary: NDArray[np.intp]) -> PreparedGoals:
    """``g`` with the primaries' position and rotation weights ``PRIMARY_WEIGHT`` times theirs."""
    w_pos, w_rot = g.w_pos.copy(), g.w_rot.copy()
    w_pos[primary] *= PRIMARY_WEIGHT
    w_rot[primary] *= PRIMARY_WEIGHT
    return replace(g, w_pos=w_pos, w_rot=w_rot)


def _weigh(result: SolveResult, frames: NDArray[np.intp], heavy: SolveResult) -> SolveResult:
    """``result`` with the frames ``frames`` from ``heavy`` (their solve again, which started
    from them: the iterations add up)."""
    pose = result.pose.copy()
    pose.put(frames, heavy.pose)
    pos, rot = result.position_error.copy(), result.rotation_error.copy()
    pos[frames], rot[frames] = heavy.position_error, heavy.rotation_error
    iterations = np.array(result.iterations, copy=True)
    iterations[frames] += np.asarray(heavy.iterations)
    reason = np.array(result.reason, copy=True)
    reason[frames] = heavy.reason
    return replace(
        result,
        pose=pose,
        position_error=pos,
        rotation_error=rot,
        iterations=iterations,
        reason=reason,
    )


def _met(pos: Array, rot: Array, tol_pos: Array, tol_rot: Array) -> NDArray[np.bool_]:
    """(F, E) which goals are within their tolerances, from their position and rotation
    errors."""
    return (pos <= tol_pos) & (rot <= tol_rot)


class _Rows:
    """The rows of the primaries (held) and of the other goals (weighted), and the DOFs."""

    def __init__(
        self, problem: _Problem, primary: NDArray[np.intp], other: NDArray[np.intp]
    ) -> None:
        skel = problem.skel
        eff = problem.rows // 6
        self.primary = problem.rows[np.isin(eff, primary)]
        mine = np.isin(eff, other)
        self.other = problem.rows[mine]
        self.other_w = problem.sqrt_w[mine]
        self.cols = np.flatnonzero(skel.dof_moves.any(axis=0))
        self.colw = skel.dof_weight[self.cols]
        self.identity = problem.identity_base  # the armature's transform: identity


def _null_space_steps(
    problem: _Problem,
    g: PreparedGoals,
    pose: Pose,
    primary: NDArray[np.intp],
    other: NDArray[np.intp],
    bound: tuple[Array, Array],
) -> tuple[NDArray[np.intp], Array, Array]:
    """Step ``pose`` (in place) toward the other goals in the null space of the primaries,
    at most until each of them is within ``bound`` (position and rotation errors, (F, E));
    returns the steps taken per frame and the goals' position and rotation errors at the pose
    it leaves. The compiled loop (solvers/kernel.py ``hold``) where it covers the problem, the
    same steps in numpy elsewhere and for the frames it hands back."""
    rows = _Rows(problem, primary, other)
    if not kernel.covers_hold(problem, g):
        return _steps(problem, g, pose, rows, primary, other, bound)
    st = problem.settings
    held = kernel.Held(
        rows.primary.astype(np.intp),
        rows.other.astype(np.intp),
        np.ascontiguousarray(rows.other_w, dtype=np.float64),
        primary.astype(np.intp),
        other.astype(np.intp),
        rows.cols.astype(np.intp),
        np.ascontiguousarray(rows.colw, dtype=np.float64),
        STEPS,
        HOLD_STEPS,
        DAMPING,
        MIN_GAIN,
        MIN_SCALE,
        MAX_TURN,
        HOLD_DAMPING,
        float(st.tolerance),
        float(st.rotation_tolerance),
    )
    try:
        out = kernel.hold(problem, g, pose, held, bound)
    except kernel.KernelUnavailable:
        return _steps(problem, g, pose, rows, primary, other, bound)
    pose.rotations[:] = out.rotations
    taken, pos, rot = out.taken, out.pos, out.rot
    back = np.flatnonzero(out.status == kernel.FALLBACK)
    if back.size:
        part = pose.take(back)
        bounds = (bound[0][back], bound[1][back])
        taken[back], pos[back], rot[back] = _steps(
            problem, g.take(back), part, rows, primary, other, bounds
        )
        pose.put(back, part)
    return taken, pos, rot


def _steps(
    problem: _Problem,
    g: PreparedGoals,
    pose: Pose,
    rows: _Rows,
    primary: NDArray[np.intp],
    other: NDArray[np.intp],
    bound: tuple[Array, Array],
) -> tuple[NDArray[np.intp], Array, Array]:
    """``_null_space_steps`` in numpy."""
    skel, st = problem.skel, problem.settings
    frames = pose.frames
    kin = skel.forward_kinematics(pose)
    held_pos, held_rot = kin.points[:, primary].copy(), kin.frames_rot[:, primary].copy()
    err = problem.errors(kin, g)  # at ``pose``: the kept steps' frames are written in
    # a primary may end no farther off than (A) left it (+ a tenth of the tolerance)
    tol, rtol = st.tolerance, st.rotation_tolerance
    max_pos = np.maximum(err.pos[:, primary], tol) + 0.1 * tol
    max_rot = np.maximum(err.rot[:, primary], rtol) + 0.1 * rtol
    energy = _energy(problem, rows, err.e)
    scale = np.ones(frames)

    def far(pos: Array, rot: Array, at: NDArray[np.intp]) -> NDArray[np.bool_]:
        """Frames ``at`` where another goal is not yet within its bound."""
        out_pos = pos[:, other] > bound[0][np.ix_(at, other)]
        out_rot = rot[:, other] > bound[1][np.ix_(at, other)]
        return np.asarray(np.any(out_pos | out_rot, axis=1))

    active = far(err.pos, err.rot, np.arange(frames)) & (energy > 0.0)
    taken = np.zeros(frames, dtype=np.intp)
    for _ in range(STEPS):
        idx = np.flatnonzero(active)
        if idx.size == 0:
            break
        ks = kin.take(idx)
        gi = g.take(idx)
        jac = _jacobian(skel, ks, gi, rows)
        jp = jac[:, : len(rows.primary)]
        js = jac[:, len(rows.primary) :] * rows.other_w[:, None]
        proj = _projector(jp)
        e_other = err.e.reshape(frames, -1)[np.ix_(idx, rows.other)] * rows.other_w
        jsn = js - js @ proj
        step = damped_solve(jsn, e_other, energy[idx] + DAMPING)
        step = step - np.einsum("fnk,fk->fn", proj, step)
        # a trust region: no DOF turns by more than MAX_TURN in one step
        peak = np.abs(step).max(axis=1, initial=0.0)
        step = step * np.minimum(1.0, MAX_TURN / np.maximum(peak, 1e-300))[:, None]
        new = _apply(skel, rows, pose.take(idx), step * scale[idx, None])
        for _ in range(HOLD_STEPS):
            kn = skel.forward_kinematics(new)
            back = _hold_error(kn, held_pos[idx], held_rot[idx], primary, gi, rows, problem)
            jpn = _jacobian(skel, kn, gi, rows)[:, : len(rows.primary)]
            new = _apply(skel, rows, new, damped_solve(jpn, back, np.full(len(idx), HOLD_DAMPING)))
        if st.keep_limits:
            skel.clamp_to_limits(new)
        kn = skel.forward_kinematics(new)
        en = problem.errors(kn, gi)
        e_new = _energy(problem, rows, en.e)
        keep = (
            (e_new < energy[idx])
            & np.all(en.pos[:, primary] <= max_pos[idx], axis=1)
            & np.all(en.rot[:, primary] <= max_rot[idx], axis=1)
            & np.all(np.isfinite(new.rotations), axis=(1, 2, 3))
        )
        k = idx[keep]
        pose.put(k, new.take(np.flatnonzero(keep)))
        kin.put(k, kn.take(np.flatnonzero(keep)))
        for name in ("e", "pos", "rot"):
            getattr(err, name)[k] = getattr(en, name)[keep]
        gain = (energy[k] - e_new[keep]) / energy[k]
        energy[k] = e_new[keep]
        taken[k] += 1
        scale[k] = np.minimum(2.0 * scale[k], 1.0)
        scale[idx[~keep]] *= 0.5
        active[k[gain < MIN_GAIN]] = False
        active[k[~far(en.pos[keep], en.rot[keep], k)]] = False
        active &= scale >= MIN_SCALE
    return taken, err.pos, err.rot


def _energy(problem: _Problem, rows: _Rows, e: Array) -> Array:
    """(F,) the other goals' weighted squared error."""
    w = e.reshape(len(e), -1)[:, rows.other] * rows.other_w
    return np.asarray(np.einsum("fm,fm->f", w, w))


def _jacobian(skel: Skeleton, kin: Kinematics, g: PreparedGoals, rows: _Rows) -> Array:
    """(F, primary rows + other rows, DOFs) the rows' Jacobian (world position rows) over the
    tree's DOFs, times the DOFs' weights; every DOF that moves a goal counts (a carried hand
    follows the chest)."""
    jac = skel.jacobian(kin, every=True)
    if not rows.identity:
        jac[:, :, :3] = mul(g.lin[:, None], jac[:, :, :3])
    flat = jac.reshape(len(jac), -1, skel.n_dofs)
    pick = np.concatenate([rows.primary, rows.other])
    return np.asarray(flat[:, pick][:, :, rows.cols] * rows.colw)


def _projector(jp: Array) -> Array:
    """(F, n, n) J_p^+ J_p, the projector onto the row space of the primaries' rows."""
    if jp.shape[1] == 0:
        return np.zeros((len(jp), jp.shape[2], jp.shape[2]))
    normal = jp @ np.swapaxes(jp, -1, -2) + HOLD_DAMPING * np.eye(jp.shape[1])
    return np.asarray(np.swapaxes(jp, -1, -2) @ np.linalg.solve(normal, jp))


def _hold_error(
    kin: Kinematics,
    held_pos: Array,
    held_rot: Array,
    primary: NDArray[np.intp],
    g: PreparedGoals,
    rows: _Rows,
    problem: _Problem,
) -> Array:
    """(F, primary rows) where the primaries should be (as (A) left them) minus where they
    are: world positions, model orientations."""
    frames, n_eff = len(kin.points), problem.skel.n_effectors
    e = np.zeros((frames, n_eff, 6))
    d = held_pos - kin.points[:, primary]
    if not rows.identity:
        d = np.einsum("fij,fej->fei", g.lin, d)
    e[:, primary, :3] = d
    e[:, primary, 3:] = angle_axis(mul(held_rot, np.swapaxes(kin.frames_rot[:, primary], -1, -2)))
    return np.asarray(e.reshape(frames, -1)[:, rows.primary])


def _apply(skel: Skeleton, rows: _Rows, pose: Pose, step: Array) -> Pose:
    """``pose`` after ``step`` over the tree's DOFs (weighted coordinates)."""
    full = np.zeros((pose.frames, skel.n_dofs))
    full[:, rows.cols] = step * rows.colw
    return skel.apply(pose, full)
