"""Jitter-free bakes: the solved motion smoothed in the null space of the goals.

Where a tree is redundant (more DOFs than goal rows) its goals leave a set of poses with the same
errors: a finger chain straight toward a target out of reach turns freely about the line to it,
conflicting goals share a trunk along a shallow valley of the summed error. Every frame is
solved from its own start, and where the loop stops in such a set depends on the path it took
(how many steps, which were undone), so neighbouring frames land a little apart: the bones
jitter by 0.1-3 degrees from frame to frame while the goals' errors move smoothly. Blender's
own IK bakes the same jitter on such rigs. A lean bake has to key it.

``smooth`` takes it out after the solve (and the flip repair). Each pass moves every frame toward
the cubic through its two neighbours on either side (the same stencil as the roughness measure
of benchmarks/lean_bake.py), projected onto the null space of its goals' Jacobian, then puts the
effectors back where they were with one minimum-norm step (the move changes them only to second
order). Passes are Jacobi steps of size ``ALPHA`` on the stencil. A frame keeps a pass's pose
only when it is admissible as the flip repair's candidates are: a goal the solve met stays within
the tolerance, one it did not ends no farther off than the solve's error plus a tenth of the
tolerance (both against the solve, not the last pass, so the passes cannot add up). A bone
that turns by more than ``WINDOW`` between two frames of the stencil is left where it is there
(a jump is the flip repair's business; smoothing across it would spread it over its neighbours).

The goals' errors, the reasons and iterations stay the solve's; the poses of the smoothed frames
are no longer a solve of that frame alone (they differ from it in the null space only). Pure
numpy, deterministic (fixed passes, no randomness).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
from numpy.typing import NDArray

from .goals import Goals, PreparedGoals, prepare_goals
from .rotations import quaternion_from_matrix
from .skeleton import ROT_POST, ROT_PRE, Kinematics, Pose, Skeleton
from .so3 import angle_axis, mul
from .solve import Settings, SolveResult, _problem, goal_status, ik_trees

Array = NDArray[np.float64]

ALPHA = 0.375
"""Step of a pass. The stencil S maps the alternating mode (-1)^f to -5/3 of itself, so
1 + ALPHA (S - 1) takes it to 0 at ALPHA = 3/8; larger steps make it grow back (measured: 1.0
oscillates), smaller ones need more passes."""
WINDOW = np.radians(5.0)
"""A bone that turns by more than this between two frames of its stencil is not moved."""
DEVIATION = np.radians(0.005)
"""Frames whose bones all lie within this of their cubic are left alone (and cost nothing)."""
ONE_GOAL = False
"""Whether trees of one goal are smoothed. They are not: what a single chain leaves free is its
turn about the line to a target out of reach, and it jitters little (measured on the captured
zoo bakes: 1-13 % of samples off their cubic, against 27-64 % in trees of several goals), while
the passes over many small trees cost 3-5 times their solve (spiders, quadrupeds)."""
DAMPING = 1e-9
"""Regularisation of J J^T in the projection and the correction (m x m systems, m <= 6 E)."""


@dataclass
class Smoothing:
    """What ``smooth`` did: passes run and the frames it changed."""

    passes: int
    changed: NDArray[np.bool_]  # (F,)


def smooth(
    skeleton: Skeleton, goals: Goals, settings: Settings, result: SolveResult, passes: int
) -> tuple[SolveResult, Smoothing]:
    """``result`` (a converge-mode solve of consecutive frames) with its jitter smoothed in the
    goals' null space by ``passes`` passes; see the module docstring. Solves with aim goals or
    a balance goal are left as solved."""
    frames = result.pose.frames
    report = Smoothing(passes, np.zeros(frames, dtype=bool))
    if passes <= 0 or frames < 5 or goals.balance is not None:
        return result, report
    g = prepare_goals(goals, skeleton.n_effectors)
    if np.any(g.is_aim):
        return result, report
    pose = result.pose.copy()
    for tree in result.trees or ik_trees(skeleton):
        if np.count_nonzero(~g.secondary[tree]) < 2 and not ONE_GOAL:  # poles do not count
            continue
        sub, keep, mask = skeleton.subtree(tree)
        part = _Part(sub, g.select(tree), settings, result, tree)
        if not part.loose.any():
            continue
        own = Pose(pose.rotations[:, keep], pose.locations[:, keep], pose.stretch[:, keep])
        report.changed |= part.run(own, passes)
        solved = keep[mask]  # the correction step may move locations and stretch too
        pose.rotations[:, solved] = own.rotations[:, mask]
        pose.locations[:, solved] = own.locations[:, mask]
        pose.stretch[:, solved] = own.stretch[:, mask]
    if not report.changed.any():
        return result, report
    err = _problem(skeleton, g, settings).errors(skeleton.forward_kinematics(pose), g)
    out = replace(result, pose=pose, position_error=err.pos, rotation_error=err.rot)
    out.goal_status = goal_status(skeleton, g, out, settings)
    return out, report


class _Part:
    """One IK tree on its own skeleton: its goal rows, the bounds a pass must keep to and the
    frames it may move."""

    def __init__(
        self,
        skel: Skeleton,
        g: PreparedGoals,
        settings: Settings,
        result: SolveResult,
        tree: NDArray[np.intp],
    ) -> None:
        self.skel, self.g, self.settings = skel, g, settings
        self.problem = _problem(skel, g, settings)
        self.rows = np.sort(np.concatenate([self.problem.rows, self.problem.sec_rows]))
        pos, rot = result.position_error[:, tree], result.rotation_error[:, tree]
        tol, rtol = settings.tolerance, settings.rotation_tolerance
        # admissible as the flip repair's candidates (solvers/flips.py, item 3)
        self.max_pos = np.where(pos <= tol, tol, pos + 0.1 * tol)
        self.max_rot = np.where(rot <= rtol, rtol, rot + 0.1 * rtol)
        self.max_pos[:, g.w_pos <= 0] = np.inf
        self.max_rot[:, g.w_rot <= 0] = np.inf
        # only frames with a goal the solve did not meet: a met tree keeps the solve's poses
        unmet = ((pos > tol) & (g.w_pos > 0)) | ((rot > rtol) & (g.w_rot > 0))
        unmet &= ~g.secondary  # a pole is a preference, never met exactly
        self.loose = unmet.any(axis=1)
        self.post = skel.dof_kind == ROT_POST
        self.pre = skel.dof_kind == ROT_PRE
        self.rotating = np.isin(np.arange(skel.n_bones), skel.dof_bone[self.post | self.pre])

    def run(self, pose: Pose, passes: int) -> NDArray[np.bool_]:
        """Smooth ``pose`` (the tree's bones, every frame) in place; the frames it changed."""
        changed = np.zeros(pose.frames, dtype=bool)
        active = self.loose.copy()
        active[:2] = active[-2:] = False
        refused = np.zeros(pose.frames, dtype=np.intp)
        parity = np.arange(pose.frames) % 2
        for _ in range(passes):
            moved = False
            # even frames, then odd ones: a frame moves while its neighbours hold still, so
            # the test against new jumps (``_pass``) is exact
            for half in (0, 1):
                frames, toward = self._targets(pose, np.flatnonzero(active & (parity == half)))
                if frames.size == 0:
                    continue
                ok, new = self._pass(pose, toward, frames)
                pose.put(frames[ok], new.take(np.flatnonzero(ok)))
                changed[frames[ok]] = True
                moved |= bool(ok.any())
                # a frame refused twice in a row stays as it is
                refused[frames] = np.where(ok, 0, refused[frames] + 1)
            active &= refused < 2
            if not moved:
                break
        return changed

    def _targets(self, pose: Pose, frames: NDArray[np.intp]) -> tuple[NDArray[np.intp], Array]:
        """Of ``frames``, the ones off their cubic, and each one's DOF step toward it (F', n)."""
        skel = self.skel
        near, index = np.unique(frames[:, None] + np.arange(-2, 3), return_inverse=True)
        q = quaternion_from_matrix(pose.rotations[near])[index.reshape(len(frames), 5)]
        q = np.where((q * q[:, 2:3]).sum(-1, keepdims=True) < 0, -q, q)  # (F', 5, B, 4)
        mid = (-q[:, 0] + 4 * q[:, 1] + 4 * q[:, 3] - q[:, 4]) / 6.0
        post = _turn(q[:, 2], mid / np.linalg.norm(mid, axis=-1, keepdims=True))  # R exp(d)
        # a bone that jumps within its stencil stays; so do frames already on their cubic
        dots = np.abs((q[:, 1:] * q[:, :-1]).sum(-1)).min(axis=1)  # (F', B)
        post *= ((dots > np.cos(WINDOW / 2)) & self.rotating)[..., None]
        moving = np.linalg.norm(post, axis=-1).max(axis=1) > DEVIATION
        frames, post = frames[moving], post[moving]
        v = np.zeros((len(frames), skel.n_dofs))
        v[:, self.post] = post[:, skel.dof_bone[self.post], skel.dof_axis[self.post]]
        if np.any(self.pre):  # exp(d) R: the same turn in the parent's frame
            pre = np.einsum("fbij,fbj->fbi", pose.rotations[frames], post)
            v[:, self.pre] = pre[:, skel.dof_bone[self.pre], skel.dof_axis[self.pre]]
        return frames, v * skel.dof_weight

    def _pass(
        self, whole: Pose, v: Array, frames: NDArray[np.intp]
    ) -> tuple[NDArray[np.bool_], Pose]:
        """One pass on ``frames`` of ``whole``: (which keep it, their new poses)."""
        skel, pose = self.skel, whole.take(frames)
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
        err = self.problem.errors(skel.forward_kinematics(new), self.g.take(frames))
        ok = np.all(err.pos <= self.max_pos[frames], axis=1)
        ok &= np.all(err.rot <= self.max_rot[frames], axis=1)
        ok &= np.all(np.isfinite(new.rotations), axis=(1, 2, 3))
        # no new jump: a bone's turn to a neighbour over flip_angle only where it was before
        angle = self.settings.flip_angle or np.inf
        for side in (-1, 1):
            rot = whole.rotations[frames + side]
            was = _angles(rot, pose.rotations) > angle
            ok &= np.all(was | (_angles(rot, new.rotations) <= angle), axis=1)
        return ok, new

    def _jacobian(self, kin: Kinematics) -> Array:
        f = kin.points.shape[0]
        return self.skel.jacobian(kin).reshape(f, -1, self.skel.n_dofs)[:, self.rows]


def _null(jac: Array, v: Array) -> Array:
    """v projected onto the null space of jac (F, m, n): v - J^T (J J^T)^-1 J v."""
    return v - _min_norm(jac, np.einsum("fmn,fn->fm", jac, v))


def _min_norm(jac: Array, e: Array) -> Array:
    """The minimum-norm dq with J dq = e (F, m): J^T (J J^T + DAMPING I)^-1 e."""
    gram = jac @ np.swapaxes(jac, 1, 2) + DAMPING * np.eye(jac.shape[1])
    return np.asarray(np.einsum("fmn,fm->fn", jac, np.linalg.solve(gram, e[..., None])[..., 0]))


def _angles(a: Array, b: Array) -> Array:
    """The angles of R_a^T R_b (..., 3, 3)."""
    cos = (np.einsum("...ij,...ij->...", a, b) - 1.0) / 2.0
    return np.asarray(np.arccos(np.clip(cos, -1.0, 1.0)))


def _turn(a: Array, b: Array) -> Array:
    """The rotation vectors d with R_a exp(d) = R_b, of unit quaternions (..., 4) (w, x, y, z)
    on one hemisphere: the vector part of conj(a) b scaled to its angle."""
    w = (a * b).sum(-1)
    v = a[..., :1] * b[..., 1:] - b[..., :1] * a[..., 1:] - np.cross(a[..., 1:], b[..., 1:])
    s = np.linalg.norm(v, axis=-1, keepdims=True)
    angle = 2.0 * np.arctan2(s, w[..., None])
    return np.asarray(np.where(s > 1e-300, v * angle / np.maximum(s, 1e-300), 2.0 * v))
