"""Jitter-free bakes: the solved motion smoothed in the null space of the goals, and along the
valleys of goals in conflict.

Where a tree is redundant (more DOFs than goal rows) its goals leave a set of poses with the same
errors: a finger chain straight toward a target out of reach turns freely about the line to it,
conflicting goals share a trunk along a shallow valley of the summed error. Every frame is
solved from its own start, and where the loop stops in such a set depends on the path it took
(how many steps, which were undone), so neighbouring frames land a little apart: the bones
jitter by 0.1-3 degrees from frame to frame while the goals' errors move smoothly. Blender's
own IK bakes the same jitter on such rigs. A lean bake has to key it.

``smooth`` takes it out after the solve (and the flip repair), in every IK tree (a tree and the
trees it carries, ``solve.tree_carriers``, count as one: the step that puts the effectors back
moves the carried chains with their carrier; ``SINGLE``: the trees of one goal too), at every
frame of a tree of two goals or more and at the frames where a tree of one goal has it unmet
(``MET_FRAMES``; elsewhere the tree keeps the solve's pose). Each pass moves those frames, even
ones first, then odd ones (so a frame moves while its neighbours hold still), toward the cubic
through their two neighbours on either side (the stencil of the roughness measure,
benchmarks/common.py ``rough``), projected onto the null space of the goals' Jacobian, then puts
the effectors back where they were with one minimum-norm step (the move changes them only to
second order). Every tree of the armature is in one batch; each keeps the pass or not on its
own. A tree keeps a pass at a frame only when its goals stay admissible as the flip repair's
candidates must be (a goal the solve met stays within the tolerance, one it did not ends no
farther off than the solve's error plus a tenth of the tolerance: both against the solve, not
the last pass, so the passes cannot add up) and none of its bones turns by more than
``Settings.flip_angle`` to a neighbour where it did not. A bone that turns by more than
``WINDOW`` (15 degrees) between two frames of its stencil is not moved there (a jump is the
flip repair's business; smoothing across it would spread it over its neighbours); a step of
10-15 degrees among slower ones is taken out where that adds no jump.

**Along a valley** (``settle``, after those passes). Where an IK tree's goals conflict (two
hands through one spine pulling apart, the four fingers of a double-Y tree out of reach
together), moving along the valley of compromises trades one goal's error for another's, so the
passes above, which keep every goal where the solve put it, cannot take that jitter out: the
loop stops where the error's gradient is small against the error
(``Settings.gradient_tolerance``), which along a shallow valley is anywhere within a few
hundredths of a degree to tenths of its floor, and a lean bake keys every other frame of such a
tree. ``settle`` re-solves those frames: each pass (``SETTLE_PASSES``) takes the frames where
the solve left a goal of the tree unmet, even ones then odd ones, moves each pose ``ALPHA`` of
the way toward the cubic through its two neighbours on either side, and solves the frame from
there (``solve_tree``, or ``solve`` for a tree with the trees it carries), which started near
the floor it had left stops within a few steps. A frame takes the re-solve when the tree stays
as good as the solve left it, judged for the tree as a whole by the flip repair's rule for its
path without the path's 1 % share (``goals.no_worse_together``): every goal the solve met stays
within the tolerance, and the root of the weighted squared errors of the others grows by no more
than a tenth of the tolerance a goal (one of them may end a little nearer, another a little
farther: up to 1.4 mm on the captured trees, whose unmet goals are 0.1-0.4 m off); and no bone of
the tree turns by more than ``Settings.flip_angle`` to a neighbour where it did not. Only where
an IK tree has two goals or more (one goal has no valley: out of reach its chain lies straight,
turning about the line to its target, which the passes above take out; nor have trees of one
goal each that ride on one another, solved one after the other: a head's chain carrying the
hands' chains, re-solved so, took 30 ms more and changed nothing), without a pole (the compiled
loop does not cover secondary goals: a double-Y tree of 150 frames with a pole among its goals
took 14.5 s in numpy's re-solves and settled one frame), whose solve is one level (a solve in
two levels, ``priority.has_levels``, moves a solved pose again when started from it: 0.1-1.6
degrees at the median on captured creatures and humanoids with a chest goal, where re-solving
made them rougher). A settled frame is the solve of that frame alone from the start it was
given.

The goals' errors stay within those bounds, the reasons and iterations are the solve's; the
poses of the frames the passes moved are no longer a solve of that frame alone (they differ
from it in the goals' null space only). Deterministic (fixed passes, no randomness). The
null-space passes run in the compiled loop where it covers the rig (solvers/kernel.py
``smooth_passes``: the same stencil, move and tests per frame with the converge-mode loop's
forward kinematics, Jacobian and Cholesky; a frame whose matrix is not positive definite is
refused there, the numpy passes would take the SVD), in numpy elsewhere, with the same
results to rounding (tests).
On six captured zoo bakes (humanoids with a shared chest, a double-Y tree, two spiders; seeds
606 and 707) the smoothing takes 0.02-0.07 s against 0.17-0.88 s in numpy (once 3 s while
a test run shared the machine: numpy's batched solves of 20-40 rows per frame).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
from numpy.typing import NDArray

from . import kernel, priority
from .blas import one_thread
from .flips import take_frames, tree_goals, turn_angles
from .goals import Goals, PreparedGoals, no_worse, no_worse_together, prepare_goals
from .methods import damped_solve
from .rotations import matrix_from_quaternion, quaternion_from_matrix
from .skeleton import ROT_POST, ROT_PRE, Kinematics, Pose, Skeleton
from .so3 import angle_axis, mul
from .solve import (
    Settings,
    SolveResult,
    _problem,
    carry_groups,
    goal_status,
    ik_trees,
    solve,
    solve_tree,
)

Array = NDArray[np.float64]

ALPHA = 0.375
"""Step of a pass. The stencil S maps the alternating mode (-1)^f to -5/3 of itself, so
1 + ALPHA (S - 1) takes it to 0 at ALPHA = 3/8; with every frame moving at once 1.0 oscillated;
0.6 and 0.75 (even and odd frames apart) smoothed no better in 10 or 20 passes."""
WINDOW = np.radians(15.0)
"""A bone that turns by more than this between two frames of its stencil is not moved. Above
``Settings.flip_angle`` (10 degrees) on purpose: a bone that steps 12 degrees between frames
moving 2-4 degrees is what the passes smooth best, and the no-new-jump test keeps them from
adding one. On 39 captured zoo bakes (seeds 5757, 5858, 5959, 7272: 21; 7373 and 7474, never
tuned on: 18, trees, humanoids and limbs) against 5 degrees: joint jumps over 10 degrees 690 ->
636 and 650 -> 603, up on none; samples off their cubic 2.966 -> 2.937 and 2.930 -> 2.843
summed (rougher on five humanoids by up to 2.4 points, smoother on most trees); the share within
1e-3 within 0.005 and the rms error the same on each; the same time. On the held-out 18 at 10,
20 and 30 degrees: 636, 601 and 606 jumps, 2.806, 2.865 and 2.899 summed off their cubic."""
DEVIATION = np.radians(0.05)
"""Frames whose bones all lie within this of their cubic are left alone (and cost nothing): half
the jitter measure's 0.1 degree. Against 0.005 degree, the captured zoo bakes smooth to the same
share off their cubic (within 0.1 point) in 13 % less time, the carried humanoids in 35-40 %."""
SINGLE = True
"""Trees of one goal (poles do not count) are smoothed too. What a single chain leaves free is
its turn about the line to a target out of reach, and there half of its samples lay off their
cubic (two spiders of zoo seed 606: 52-55 % of the samples at unmet frames, 1-4 % at met ones):
4.7-10.5 % of all their samples against Blender's 1.9-4.7 %. Smoothed, the limbs and tentacles
of seed 606 go from 6.6, 4.7, 10.5, 2.1 and 5.1 % to 4.9, 2.2, 5.5, 1.6 and 4.6 % (Blender's
4.5, 1.9, 4.7, 1.9, 5.7 %) for 0.02-0.05 s of a 0.1-0.3 s bake with the compiled passes; in
numpy it took 0.15-0.46 s, and they were left out."""
MET_FRAMES = True
"""Trees of two goals or more are smoothed at every frame, their goals met or not. Their null space
is large (a trunk under four fingers, a spine under two hands): where every goal is met, the
trunk still stops wherever each frame's start led it (the flip repair starts frames from a
neighbour's pose, a bridge from a turned one), so those frames landed as far apart as the unmet
ones: on zoo seed 7272's tree 14, 43 % of the samples of frames with every goal met lay more
than 0.1 degree off their cubic, 24 % of the others. On 21 captured zoo bakes (seeds 5757, 5858,
5959: humanoids and trees; 7272: both and limbs; with ``WINDOW`` at 5 degrees then) the samples
off their cubic fell on every tree and on the humanoids whose hands share the spine (7272's
trees 13.6 -> 11.0, 18.7 -> 16.1 and 31.5 -> 27.4 %, 5757's 18.1 -> 14.3 and 27.1 -> 22.5 %,
7272's humanoids 19.0 -> 16.7 and 19.3 -> 16.4 %), the share of samples within 1e-3 and the rms
error the same to 5 digits, the joint jumps 696 -> 690 in all, the smoothing 0.94 -> 1.02 s in
all. Trees of one goal keep the solve's pose where it is met: every frame of those too took the
limbs' smoothing 2-3 times as long (a spider's 15 -> 43 ms) for 0.2-0.8 points less off their
cubic (6.1 -> 5.3 %, 4.6 -> 4.4 %). Measured again on 18 captured zoo bakes whose trees have
one goal each (humanoids of four goals, quadrupeds, spiders, two tentacles; seeds 5757-7777,
``WINDOW`` at 15 degrees): off their cubic 0.896 -> 0.811 summed, jumps 264 -> 252, the
smoothing 0.24 -> 0.71 s in all (seed 7777's spider 07: 27 -> 101 ms of a 0.18 s bake); two of
seed 7777's six limbs would then jitter less than Blender's bake (00, 15), four still more."""
DAMPING = 1e-9
"""Regularisation of J J^T in the projection and the correction (m x m systems, m <= 6 E)."""
SETTLE_PASSES = 5
"""Most passes of ``settle`` (fewer when ``smooth`` is given fewer). On 7 captured zoo bakes
that it re-solves (5 double-Y trees, 2 humanoids with hands through the spine; seeds 5757
and 5858) the samples more than 0.01 degree off their cubic went from 0.27-0.62 of them to
0.24-0.49 with 5 passes (0.22-0.47 with 10), the joint jumps over 10 degrees from 253 to 233
in all (232), the share of samples within 1e-3 up on the 5 trees and the same on the
humanoids, the rms error the same to 5 digits; the smoothing took 30-83 ms against 11-25 for
the null-space passes alone (45-140 with 10 passes)."""


@dataclass
class Smoothing:
    """What ``smooth`` did: passes run, the frames it changed, and of them the frames where a
    tree in conflict was re-solved (``settled``, ``settle``)."""

    passes: int
    changed: NDArray[np.bool_]  # (F,)
    settled: NDArray[np.bool_]  # (F,)


@one_thread
def smooth(
    skeleton: Skeleton, goals: Goals, settings: Settings, result: SolveResult, passes: int
) -> tuple[SolveResult, Smoothing]:
    """``result`` (a converge-mode solve of consecutive frames) with its jitter smoothed in the
    goals' null space by ``passes`` passes; see the module docstring. Solves with aim goals or
    a balance goal are left as solved."""
    frames = result.pose.frames
    report = Smoothing(passes, np.zeros(frames, dtype=bool), np.zeros(frames, dtype=bool))
    if passes <= 0 or frames < 5 or goals.balance is not None:
        return result, report
    g = prepare_goals(goals, skeleton.n_effectors)
    if np.any(g.is_aim):
        return result, report
    run = _Run(skeleton, g, settings, result)
    if run.loose is None:
        return result, report
    pose = result.pose.copy()
    if not (run.compiled and run.passes_compiled(pose, passes, report)):
        run.passes(pose, passes, report)
    settle(skeleton, goals, g, settings, result, pose, min(passes, SETTLE_PASSES), report)
    if not report.changed.any():
        return result, report
    kin = skeleton.forward_kinematics(pose)
    err = run.problem.errors(kin, g)
    out = replace(result, pose=pose, position_error=err.pos, rotation_error=err.rot)
    out.goal_status = goal_status(skeleton, g, out, settings, kin)
    return out, report


class _Run:
    """The goal rows, the bound each goal must keep to, which tree moves which bone, and the
    (frame, tree) pairs that may still move."""

    def __init__(
        self, skel: Skeleton, g: PreparedGoals, settings: Settings, result: SolveResult
    ) -> None:
        self.skel, self.g, self.settings = skel, g, settings
        self.problem = _problem(skel, g, settings)
        self.rows = np.sort(np.concatenate([self.problem.rows, self.problem.sec_rows]))
        pos, rot = result.position_error, result.rotation_error
        tol, rtol = settings.tolerance, settings.rotation_tolerance
        # admissible as the flip repair's candidates (solvers/flips.py, item 3)
        self.max_pos = no_worse(pos, tol)
        self.max_rot = no_worse(rot, rtol)
        self.max_pos[:, g.w_pos <= 0] = np.inf
        self.max_rot[:, g.w_rot <= 0] = np.inf
        trees = carry_groups(skel, result.trees or ik_trees(skel))
        self.tree_of = np.zeros(skel.n_effectors, dtype=np.intp)
        self.bone_tree = np.full(skel.n_bones, -1, dtype=np.intp)  # -1: no tree moves it
        for t, tree in enumerate(trees):
            self.tree_of[tree] = t
            self.bone_tree[skel.dof_bone[skel.dof_moves[tree].any(axis=0)]] = t
        # (E, T) and (B, T) one-hot: which tree a goal, a bone belongs to
        self.goal_in = np.eye(len(trees))[self.tree_of]
        self.bone_in = np.where(
            (self.bone_tree >= 0)[:, None], np.eye(len(trees))[self.bone_tree], 0
        )
        # a tree of two goals or more at every frame (``MET_FRAMES``), one of one goal where
        # the solve did not meet it: elsewhere it keeps the solve's pose
        unmet = ((pos > tol) & (g.w_pos > 0)) | ((rot > rtol) & (g.w_rot > 0))
        unmet &= ~g.secondary  # a pole is a preference, never met exactly
        several = self.goal_in[~g.secondary].sum(axis=0) >= 2
        loose = unmet.astype(float) @ self.goal_in > 0
        if MET_FRAMES:
            loose |= several[None, :]
        if not SINGLE:
            loose &= several
        loose[:2] = loose[-2:] = False
        self.loose: NDArray[np.bool_] | None = loose if loose.any() else None
        self.refused = np.zeros(loose.shape, dtype=np.intp)
        self.compiled = kernel.covers_smooth(self.problem, g) and np.array_equal(
            self.rows, self.problem.rows
        )
        self.post = skel.dof_kind == ROT_POST
        self.pre = skel.dof_kind == ROT_PRE

    def passes(self, pose: Pose, passes: int, report: Smoothing) -> None:
        """The passes on ``pose`` in place (numpy)."""
        assert self.loose is not None
        parity = np.arange(pose.frames) % 2
        for _ in range(passes):
            moved = False
            # even frames, then odd ones: a frame moves while its neighbours hold still, so the
            # test against new jumps (``step``) is exact
            for half in (0, 1):
                active = np.flatnonzero(self.loose.any(axis=1) & (parity == half))
                at, toward = self.targets(pose, active)
                if at.size == 0:
                    continue
                keep, new = self.step(pose, toward, at)  # (F', B) the bones that take the pass
                f, b = np.nonzero(keep)
                pose.rotations[at[f], b] = new.rotations[f, b]
                pose.locations[at[f], b] = new.locations[f, b]  # the correction moves every DOF
                pose.stretch[at[f], b] = new.stretch[f, b]
                report.changed[at[f]] = True
                moved |= bool(f.size)
            if not moved:
                break

    def passes_compiled(self, pose: Pose, passes: int, report: Smoothing) -> bool:
        """The passes by the compiled loop (solvers/kernel.py ``smooth_passes``; rotations only,
        which is what it covers); False when the kernel does not run here (then nothing has
        changed)."""
        assert self.loose is not None
        fixed = kernel.SmoothFixed(
            self.tree_of[self.rows // 6],
            self.tree_of,
            self.bone_tree,
            np.ascontiguousarray(self.max_pos, dtype=np.float64),
            np.ascontiguousarray(self.max_rot, dtype=np.float64),
            int(passes),
            ALPHA,
            DAMPING,
            float(np.cos(WINDOW / 2)),
            float(DEVIATION),
            float(self.settings.flip_angle or np.inf),
        )
        state = kernel.SmoothState(
            np.array(pose.rotations, dtype=np.float64, order="C"),
            self.loose.copy(),
            self.refused.copy(),
            np.zeros(pose.frames, dtype=np.bool_),
        )
        try:
            kernel.smooth_passes(self.problem, self.g, pose, fixed, state)
        except kernel.KernelUnavailable:
            return False
        pose.rotations[:] = state.rotations
        report.changed[:] = state.changed
        return True

    def targets(self, pose: Pose, frames: NDArray[np.intp]) -> tuple[NDArray[np.intp], Array]:
        """Of ``frames``, the ones off their cubic, and each one's DOF step toward it (F', n)."""
        skel = self.skel
        assert self.loose is not None
        # only the bones of loose trees (the (frame, bone) pairs); a bone that jumps within its
        # stencil stays; frames already on their cubic are left alone
        fi, bi = np.nonzero(self.loose[frames].astype(float) @ self.bone_in.T > 0)
        q = quaternion_from_matrix(pose.rotations[frames[fi, None] + np.arange(-2, 3), bi[:, None]])
        q = np.where((q * q[:, 2:3]).sum(-1, keepdims=True) < 0, -q, q)  # (pairs, 5, 4)
        mid = (-q[:, 0] + 4 * q[:, 1] + 4 * q[:, 3] - q[:, 4]) / 6.0
        turn = _turn(q[:, 2], mid / np.linalg.norm(mid, axis=-1, keepdims=True))  # R exp(d)
        dots = np.abs((q[:, 1:] * q[:, :-1]).sum(-1)).min(axis=1)
        post = np.zeros((len(frames), skel.n_bones, 3))
        post[fi, bi] = turn * (dots > np.cos(WINDOW / 2))[:, None]
        moving = np.linalg.norm(post, axis=-1).max(axis=1) > DEVIATION
        frames, post = frames[moving], post[moving]
        v = np.zeros((len(frames), skel.n_dofs))
        v[:, self.post] = post[:, skel.dof_bone[self.post], skel.dof_axis[self.post]]
        if np.any(self.pre):  # exp(d) R: the same turn in the parent's frame
            pre = np.einsum("fbij,fbj->fbi", pose.rotations[frames], post)
            v[:, self.pre] = pre[:, skel.dof_bone[self.pre], skel.dof_axis[self.pre]]
        return frames, v * skel.dof_weight

    def step(
        self, whole: Pose, v: Array, frames: NDArray[np.intp]
    ) -> tuple[NDArray[np.bool_], Pose]:
        """One pass on ``frames`` of ``whole``: ((F', B) the bones that take it, the new poses).
        A tree's bones take it where every goal of the tree stays admissible and none of its
        bones jumps where it did not."""
        assert self.loose is not None
        pose = whole.take(frames)
        tried = self.loose[frames]
        new, err_pos, err_rot = self._move(pose, v, self.g.take(frames))
        bad = (err_pos > self.max_pos[frames]) | (err_rot > self.max_rot[frames])
        tree_bad = bad.astype(float) @ self.goal_in > 0
        # no new jump: a bone's turn to a neighbour over flip_angle only where it was before
        # (over the bones of the trees tried: only their verdicts are used)
        fi, bi = np.nonzero(tried.astype(float) @ self.bone_in.T > 0)
        now = new.rotations[fi, bi]
        jump = ~np.all(np.isfinite(now), axis=(1, 2))
        jump |= turns_anew(whole.rotations, frames[fi], bi, now, self.settings.flip_angle)
        jumps = np.zeros((len(frames), self.skel.n_bones), dtype=bool)
        jumps[fi, bi] = jump
        tree_bad |= jumps.astype(float) @ self.bone_in > 0
        # a tree refused twice in a row at a frame stays as it is there
        self.refused[frames] = np.where(tried & tree_bad, self.refused[frames] + 1, 0)
        self.loose[frames] &= self.refused[frames] < 2
        take = tried & ~tree_bad
        return take.astype(float) @ self.bone_in.T > 0, new

    def _move(self, pose: Pose, v: Array, g: PreparedGoals) -> tuple[Pose, Array, Array]:
        """The pass's move of ``pose``: ``ALPHA`` times ``v`` in the goals' null space, then the
        effectors put back; (the new poses, the goals' position and rotation errors there)."""
        skel = self.skel
        kin = skel.forward_kinematics(pose)
        new = skel.apply(pose, ALPHA * _null(self._jacobian(kin), v))
        # the effectors back where they were (the move changed them to second order): one
        # minimum-norm step on the goal rows
        after = skel.forward_kinematics(new)
        back = np.zeros((pose.frames, skel.n_effectors, 6))
        back[..., :3] = kin.points - after.points
        back[..., 3:] = angle_axis(mul(kin.frames_rot, np.swapaxes(after.frames_rot, -1, -2)))
        e = back.reshape(pose.frames, -1)[:, self.rows]
        new = skel.apply(new, _min_norm(self._jacobian(after), e))
        if self.settings.keep_limits:
            skel.clamp_to_limits(new)
        err = self.problem.errors(skel.forward_kinematics(new), g)
        return new, err.pos, err.rot

    def _jacobian(self, kin: Kinematics) -> Array:
        """(F', m, n) the goal rows of the Jacobian."""
        # every DOF that moves a goal: a pass keeps the effectors where they are, whichever
        # tree's bones move them (a carried hand's arm makes up for the chest)
        return self.skel.jacobian(kin, every=True)[:, self.rows // 6, self.rows % 6]


def _null(jac: Array, v: Array) -> Array:
    """v projected onto the null space of jac (F, m, n): v - J^T (J J^T)^-1 J v."""
    return v - _min_norm(jac, np.einsum("fmn,fn->fm", jac, v))


def _min_norm(jac: Array, e: Array) -> Array:
    """The minimum-norm dq with J dq = e (F, m): J^T (J J^T + DAMPING I)^-1 e."""
    return damped_solve(jac, e, np.full(len(jac), DAMPING))


def _turn(a: Array, b: Array) -> Array:
    """The rotation vectors d with R_a exp(d) = R_b, of unit quaternions (..., 4) (w, x, y, z)
    on one hemisphere: the vector part of conj(a) b scaled to its angle."""
    w = (a * b).sum(-1)
    v = a[..., :1] * b[..., 1:] - b[..., :1] * a[..., 1:] - np.cross(a[..., 1:], b[..., 1:])
    s = np.linalg.norm(v, axis=-1, keepdims=True)
    angle = 2.0 * np.arctan2(s, w[..., None])
    return np.asarray(np.where(s > 1e-300, v * angle / np.maximum(s, 1e-300), 2.0 * v))


def settle(
    skel: Skeleton,
    goals: Goals,
    g: PreparedGoals,
    settings: Settings,
    reference: SolveResult,
    pose: Pose,
    passes: int,
    report: Smoothing,
) -> None:
    """The jitter along the valleys of goals in conflict, taken out of ``pose`` in place (the
    poses ``reference``, the solve, left after the null-space passes): in every tree (with the
    trees it carries) of two goals or more whose solve is one level, each pass re-solves the
    frames where the solve left a goal of it unmet (even frames, then odd ones) from their
    pose moved ``ALPHA`` of the way toward the cubic through their two neighbours on either
    side, and keeps each re-solve that leaves the tree as good; see the module docstring."""
    if passes <= 0:
        return
    parity = np.arange(pose.frames) % 2
    for unit in carry_groups(skel, reference.trees or ik_trees(skel)):
        if np.any(g.secondary[unit]):
            continue  # poles: see the module docstring
        sub = skel.subtree(unit)[0]  # (cached)
        inner = ik_trees(sub)
        if all(len(t) < 2 for t in inner):
            continue  # trees of one goal each (solved one after the other): no valley
        if priority.has_levels(sub, inner):
            continue  # a solve in two levels moves a solved pose again: not settled by one
        valley = _Valley(skel, goals, g, settings, reference, unit, len(inner) == 1)
        if not valley.loose.any():
            continue
        quat = quaternion_from_matrix(pose.rotations[:, valley.bones])  # (F, B, 4)
        for _ in range(passes):
            moved = False
            for half in (0, 1):
                moved |= valley.step(pose, quat, np.flatnonzero(valley.loose & (parity == half)))
            if not moved:
                break
        report.settled |= valley.settled
    report.changed |= report.settled


class _Valley:
    """One tree (with the trees it carries) that ``settle`` re-solves: its frames to settle
    (``loose``), the solve's errors its goals are judged against, its skeleton and goals."""

    def __init__(
        self,
        skel: Skeleton,
        goals: Goals,
        g: PreparedGoals,
        settings: Settings,
        reference: SolveResult,
        unit: NDArray[np.intp],
        one_tree: bool,
    ) -> None:
        self.settings = settings
        frames = reference.pose.frames
        tol, rtol = settings.tolerance, settings.rotation_tolerance
        self.own = reference.position_error[:, unit], reference.rotation_error[:, unit]
        self.weight = g.w_pos[unit], g.w_rot[unit]
        self.free = self.weight[0] <= 0, self.weight[1] <= 0
        met_pos = (self.own[0] <= tol) | self.free[0]
        met_rot = (self.own[1] <= rtol) | self.free[1]
        self.loose = ~(met_pos.all(axis=1) & met_rot.all(axis=1))
        self.loose[:2] = self.loose[-2:] = False
        self.sub, self.keep, _ = skel.subtree(unit)
        self.bones = np.unique(skel.dof_bone[skel.dof_moves[unit].any(axis=0)])
        self.at = np.searchsorted(self.keep, self.bones)  # the unit's bones in the subtree
        self.goals = tree_goals(goals, np.arange(frames), unit, skel.n_effectors)
        self.ready = prepare_goals(self.goals, self.sub.n_effectors) if one_tree else None
        self.settled = np.zeros(frames, dtype=bool)

    def step(self, pose: Pose, quat: Array, fr: NDArray[np.intp]) -> bool:
        """Re-solve the frames ``fr`` of ``pose`` from their poses moved toward their cubics
        and keep the re-solves that leave the tree as good (``pose`` and ``quat``, its bones'
        quaternions, in place); whether any was kept."""
        if fr.size == 0:
            return False
        q = quat[fr[:, None] + np.arange(-2, 3)]  # (F', 5, B, 4), on the middle frame's side
        q = np.where(np.sum(q * q[:, 2:3], axis=-1, keepdims=True) < 0, -q, q)
        mid = (-q[:, 0] + 4 * q[:, 1] + 4 * q[:, 3] - q[:, 4]) / 6.0
        toward = q[:, 2] + ALPHA * (mid / np.linalg.norm(mid, axis=-1, keepdims=True) - q[:, 2])
        begin = pose.take(fr).of_bones(self.keep)
        begin.rotations[:, self.at] = matrix_from_quaternion(
            toward / np.linalg.norm(toward, axis=-1, keepdims=True)
        )
        if self.ready is not None:
            res = solve_tree(self.sub, self.ready.take(fr), self.settings, begin)
        else:
            res = solve(self.sub, take_frames(self.goals, fr), self.settings, begin, status=False)
        new = res.pose.rotations[:, self.at]
        # the tree as good as the solve left it, judged as a whole (the repair path's rule
        # without its share), and no bone turning over flip_angle to a neighbour anew
        st = self.settings
        ok = no_worse_together(
            (self.own[0][fr], self.own[1][fr]),
            (res.position_error, res.rotation_error),
            self.weight,
            self.free,
            (st.tolerance, st.rotation_tolerance),
        )
        ok &= np.all(np.isfinite(new), axis=(1, 2, 3))
        jumps = turns_anew(pose.rotations, fr[:, None], self.bones, new, st.flip_angle)
        take = np.flatnonzero(ok & ~np.any(jumps, axis=1))
        if take.size == 0:
            return False
        f = fr[take]
        into, out = np.ix_(f, self.bones), np.ix_(take, self.at)
        pose.rotations[into] = new[take]
        pose.locations[into] = res.pose.locations[out]
        pose.stretch[into] = res.pose.stretch[out]
        quat[f] = quaternion_from_matrix(new[take])
        self.settled[f] = True
        return True


def turns_anew(
    rotations: Array,
    frames: NDArray[np.intp],
    bones: NDArray[np.intp],
    now: Array,
    flip_angle: float,
) -> NDArray[np.bool_]:
    """Whether bones ``bones`` at ``frames`` (broadcast together) of ``rotations`` (F, B, 3, 3),
    turned to ``now``, turn by more than ``flip_angle`` (0: never) to a neighbouring frame
    where they did not: the jumps a smoothing pass may not add."""
    angle = flip_angle or np.inf
    before = rotations[frames, bones]
    out = np.zeros(np.broadcast_shapes(np.shape(frames), np.shape(bones)), dtype=bool)
    for side in (-1, 1):
        near = rotations[frames + side, bones]
        out |= (turn_angles(near, now) > angle) & ~(turn_angles(near, before) > angle)
    return out
