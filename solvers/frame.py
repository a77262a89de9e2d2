"""One frame of one IK tree with everything that does not depend on the targets prepared once.

``Solver`` (solvers/solver.py) uses this for a single frame in "converge" mode (live posing,
``api.solve_pose``); it was solvers/single.py before the one ``Solver`` replaced it.

Interactive posing solves one frame at a time, many times a second, each time from the previous
result. ``solve`` is built for F frames at once: on a single frame its cost is numpy call
overhead (goal validation and preparation, kinematics over every bone in batched layouts).
``FrameSolver`` runs the same iteration as ``solve`` in "converge" mode (the same stopping
rules, the same method steps, ClampMag and ClampMaxAbs, the best pose seen is returned) but
prepares the weights, the Jacobian's row layout and the method once, computes the bones the
solve cannot move once per solve and, per iteration, only the bones below a free DOF. The
damped least-squares steps (``DAMPED_METHODS``) are solved by ``damped_step`` (one symmetric
eigendecomposition, no LAPACK call that waits on OpenBLAS's thread pool); every other method's
own ``step`` is called. Results match ``solve`` to rounding (tests/solvers/test_one_frame.py).

It covers rotational DOFs (ball joints, hinges, two-axis joints) with stiffness. For joint limits
(with ``keep_limits``), location and stretch DOFs, null-space terms, Jacobians at the targets,
adaptive clamping and "track" mode use ``solve``: ``unsupported`` says
which applies, and the constructor raises ``SettingsError`` with it.
"""

from __future__ import annotations

import time

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .curvature import newton_step, twist_dofs
from .errors import GoalError, SettingsError
from .goals import check_weights
from .kernel import DAMPING
from .methods import StepContext, clamp_max_abs, make_method
from .skeleton import ROT_POST, ROT_PRE, Pose, Skeleton, dof_order
from .so3 import Array, angle_axis, exp_so3, orthonormalize
from .solve import Settings, SolveResult, lm_cap, own_stationary
from .stops import (
    BOUND_SLACK,
    CONVERGED,
    DIVERGED,
    FAILED,
    KICK,
    MAX_ITERATIONS,
    MIN_STEP_SCALE,
    REASONS,
    RUNNING,
    SETTLED,
    STAGNATED,
    STATIONARY,
)

# Methods whose step is exactly damped_solve(J, e, lam2) with lam2 = nullspace_damping(ctx): for
# one frame their step is solved with one 2-D numpy call instead of batched Cholesky solves.
DAMPED_METHODS = frozenset(DAMPING)  # the damped least-squares family (kernel.DAMPING)


def unsupported(skeleton: Skeleton, settings: Settings) -> str | None:
    """Why ``FrameSolver`` cannot run this problem (None when it can)."""
    if settings.mode != "converge":
        return f"mode {settings.mode!r}"
    if not np.all((skeleton.dof_kind == ROT_PRE) | (skeleton.dof_kind == ROT_POST)):
        return "location or stretch DOFs"
    if settings.keep_limits and np.any(skeleton.dof_limited):
        return "joint limits"
    if settings.nullspace != "none" and (settings.rest_weight > 0 or settings.limit_weight > 0):
        return "null-space terms"
    if settings.jacobian_at_targets:
        return "Jacobians at the targets"
    if settings.clamp_adaptive:
        return "adaptive clamping"
    return None


def _levels(parents: NDArray[np.intp], bones: NDArray[np.intp]) -> list[tuple[Array, Array]]:
    """(bones, their parents) of ``bones`` grouped by their depth inside ``bones`` (a bone whose
    parent is not in ``bones`` is at depth 0), parents first; parent -1 becomes B."""
    inside = np.zeros(len(parents), dtype=bool)
    inside[bones] = True
    depth = np.zeros(len(parents), dtype=np.intp)
    for b, p in enumerate(parents):
        depth[b] = depth[p] + 1 if p >= 0 and inside[p] else 0
    ext = np.where(parents >= 0, parents, len(parents))
    out = []
    for d in range(int(depth.max()) + 1):
        idx = bones[depth[bones] == d]
        if len(idx):
            out.append((idx, ext[idx]))
    return out


_L_PLUS, _L_MINUS, _DIAG = [7, 2, 3], [5, 6, 1], [0, 4, 8]
_YZX, _ZXY = [1, 2, 0], [2, 0, 1]
_IDENTITY = [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]


def _angle_axis(r: Array) -> Array:
    """``so3.angle_axis`` of (k, 3, 3) rotations with fewer numpy calls below 90 degrees (eq. 22
    of Sugihara 2011, the same arithmetic); wider angles go to ``angle_axis``."""
    flat = r.reshape(-1, 9)
    trace = flat[:, 0] + flat[:, 4] + flat[:, 8]
    if trace.min() < 1.0:
        return angle_axis(r)
    l_vec = flat[:, _L_PLUS] - flat[:, _L_MINUS]
    l_norm = np.sqrt(np.einsum("ki,ki->k", l_vec, l_vec))
    angle = np.arctan2(l_norm, trace - 1.0)
    if l_norm.min() >= 1e-300:
        return np.asarray((angle / l_norm)[:, None] * l_vec)
    small = l_norm < 1e-300
    scale = np.where(small, 0.0, angle / np.where(small, 1.0, l_norm))
    return np.asarray(scale[:, None] * l_vec, dtype=np.float64)


def _exp(v: Array) -> Array:
    """``so3.exp_so3`` of (k, 3) vectors (Rodrigues) with fewer numpy calls when no angle is
    tiny; otherwise ``exp_so3`` (its Taylor series)."""
    theta2 = np.einsum("ki,ki->k", v, v)
    if theta2.min() < 1e-12:
        return exp_so3(v)
    theta = np.sqrt(theta2)
    cos = np.cos(theta)
    coef = np.stack([cos, np.sin(theta) / theta, (1.0 - cos) / theta2], axis=1)
    outer = (v[:, :, None] * v[:, None, :]).reshape(-1, 9)
    parts = np.concatenate([np.ones((len(v), 1)), v, outer], axis=1)  # 1, v, v v^T
    # R = cos I + (sin t / t) [v]x + ((1 - cos t) / t^2) v v^T
    return np.asarray(((parts * coef[:, _EXP_COEF]) @ _EXP_BASIS).reshape(-1, 3, 3))


# rows of _EXP_BASIS: the identity, the hat map of x, y, z, then the nine entries of v v^T
_EXP_BASIS = np.zeros((13, 9))
_EXP_BASIS[0] = np.eye(3).reshape(9)
_EXP_BASIS[1, [7, 5]] = 1.0, -1.0
_EXP_BASIS[2, [2, 6]] = 1.0, -1.0
_EXP_BASIS[3, [3, 1]] = 1.0, -1.0
_EXP_BASIS[4:] = np.eye(9)
_EXP_COEF = np.array([0, 1, 1, 1, *([2] * 9)])


def _det3(m: Array) -> float:
    (a, b, c), (d, e, f), (g, h, i) = m.tolist()
    return float(a * (e * i - f * h) - b * (d * i - f * g) + c * (d * h - e * g))


def _inv3(m: Array) -> Array:
    """The inverse of a 3x3 matrix by its adjugate (no LAPACK call)."""
    (a, b, c), (d, e, f), (g, h, i) = m.tolist()
    adj = np.array(
        [
            [e * i - f * h, c * h - b * i, b * f - c * e],
            [f * g - d * i, a * i - c * g, c * d - a * f],
            [d * h - e * g, b * g - a * h, a * e - b * d],
        ]
    )
    return np.asarray(adj / (a * adj[0, 0] + b * adj[1, 0] + c * adj[2, 0]))


def _model_rotations(m: Array) -> Array:
    """The proper rotation nearest to each (k, 3, 3) ``m`` (as ``prepare_goals``: the polar
    factor, negated when it is a reflection). A rotation times a uniform scale, the usual case,
    is only rescaled; anything else goes through the SVD."""
    gram = np.swapaxes(m, 1, 2) @ m
    scale2 = np.einsum("kii->k", gram) / 3.0
    off = np.abs(gram - scale2[:, None, None] * np.eye(3)).max()
    if scale2.min() > 0.0 and off <= 1e-9 * scale2.max():
        out = m / np.sqrt(scale2)[:, None, None]
        det = np.array([_det3(x) for x in out])
    else:
        out = orthonormalize(m + 1e-300)
        det = np.linalg.det(out)
    return np.asarray(np.where(det[:, None, None] < 0, -out, out))


def damped_step(jac: Array, e: Array, lam2: float) -> Array:
    """J^T (J J^T + lam2 I)^-1 e for one (m, n) J: ``damped_solve`` of one frame.

    By the eigendecomposition of the smaller normal matrix (J J^T or J^T J, eqs. 3-4 of
    Deo-Walker) instead of Cholesky and ``np.linalg.solve``: OpenBLAS runs LAPACK's gesv
    (what ``solve`` calls) on its thread pool whatever the size, and on a busy machine one call
    can wait a millisecond for a worker; the symmetric eigensolver stays on the calling thread
    for small matrices. Directions whose eigenvalue plus lam2 vanishes are dropped, as
    ``damped_solve``'s SVD fallback drops them.
    """
    m, n = jac.shape
    if m <= n:
        w, v = np.linalg.eigh(jac @ jac.T)
        rhs = v.T @ e
    else:
        w, v = np.linalg.eigh(jac.T @ jac)
        rhs = v.T @ (jac.T @ e)
    den = w + lam2
    floor = 1e-12 * max(abs(float(w[0])), abs(float(w[-1])), 1e-300)  # w is sorted
    if den[0] > floor:
        coef = rhs / den
    else:
        keep = den > floor
        coef = np.where(keep, rhs / np.where(keep, den, 1.0), 0.0)
    out = v @ coef
    return np.asarray(jac.T @ out if m <= n else out)


class FrameSolver:
    """``solve(skeleton, goals, settings, pose)`` for one frame, prepared for repeated calls.

    position_weight, rotation_weight: (E,) as in ``Goals`` (rotation weight 0: position only).
    dofs: (n,) bools, the DOFs this solve may move (one IK tree's), None = all.
    measure_rotation: report every goal's rotation error (as ``solve`` does when any goal of
        the armature has a rotation weight); default: when a goal here has one.
    ``solve(position, rotation, base, pose)`` takes the targets of one frame and returns the
    same ``SolveResult`` (one frame) as ``solve`` would, up to rounding.
    """

    def __init__(
        self,
        skeleton: Skeleton,
        settings: Settings | None = None,
        position_weight: ArrayLike | None = None,
        rotation_weight: ArrayLike | None = None,
        dofs: NDArray[np.bool_] | None = None,
        measure_rotation: bool | None = None,
    ) -> None:
        settings = settings or Settings()
        why = unsupported(skeleton, settings)
        if why is not None:
            raise SettingsError(f"the single-frame solver does not support {why}: use solve()")
        self.skeleton, self.settings = skeleton, settings
        self.method = settings.make_method()
        self._w_bar: float | None = None  # LM's w_bar as capped for the last base (``_cap``)
        self.newton: float | None = None  # the damped Newton step's damping (``_dofs``)
        self.damped = settings.method in DAMPED_METHODS
        n_eff = skeleton.n_effectors
        w_pos = check_weights(position_weight, 1.0, n_eff, "position_weight")
        w_rot = check_weights(rotation_weight, 0.0, n_eff, "rotation_weight")
        if not np.any(w_pos > 0) and not np.any(w_rot > 0):
            raise GoalError("every goal has zero weight: nothing to solve")
        self.w_pos, self.w_rot = w_pos, w_rot
        self._rows(w_pos, w_rot, measure_rotation)
        cols = np.arange(skeleton.n_dofs) if dofs is None else np.flatnonzero(dofs)
        self._dofs(cols)
        self._bones()
        self._jacobian_layout(cols)
        self._bounds(cols)

    def _cap(self, lin: Array) -> None:
        """LM's w_bar capped by this tree's reach in world units, as ``solve.tree_settings``
        caps it (``lin``: the base's linear part); the method and the Newton step's damping
        follow it."""
        st = self.settings
        if st.method != "lm":
            return
        reach = self.skeleton.chain_reach()[0][self.w_pos > 0]
        w_bar = lm_cap(st, float(reach.max(initial=0.0)), lin)
        if w_bar == self._w_bar:
            return
        self._w_bar = w_bar
        self.method = make_method("lm", {**st.params, "w_bar": w_bar})
        if self.newton is not None:
            self.newton = w_bar

    def _rows(self, w_pos: Array, w_rot: Array, measure_rotation: bool | None) -> None:
        """The weighted system's rows, weights and tolerances."""
        settings, n_eff = self.settings, self.skeleton.n_effectors
        # rows of the (E, 6) error kept in the weighted system, as in solve()'s _Problem
        use = np.zeros((n_eff, 6), dtype=bool)
        use[:, :3] = (w_pos > 0)[:, None]
        use[:, 3:] = (w_rot > 0)[:, None]
        self.rows = np.flatnonzero(use.reshape(-1))
        w = np.concatenate([np.repeat(w_pos[:, None], 3, 1), np.repeat(w_rot[:, None], 3, 1)], 1)
        self.sqrt_w = np.sqrt(w.reshape(-1)[self.rows])
        _, blocks = np.unique(self.rows // 3, return_inverse=True)
        self.blocks = blocks.reshape(-1)
        self.n_blocks = int(self.blocks.max()) + 1
        self.rot_goals = np.flatnonzero(w_rot > 0)
        self.measure_rotation = (
            len(self.rot_goals) > 0 if measure_rotation is None else measure_rotation
        )
        self.tol_pos = np.where(w_pos > 0, settings.tolerance, np.inf)
        self.tol_rot = np.where(w_rot > 0, settings.rotation_tolerance, np.inf)
        self.tol = np.stack([self.tol_pos, self.tol_rot], axis=1)  # (E, 2)

    def _dofs(self, cols: NDArray[np.intp]) -> None:
        """The DOFs this solve moves (columns ``cols`` of the skeleton's)."""
        skeleton = self.skeleton
        # DOFs: every one rotates its bone after (post) or before (pre) its rotation
        kind, self.dof_bone, self.dof_axis = (
            skeleton.dof_kind[cols],
            skeleton.dof_bone[cols],
            skeleton.dof_axis[cols],
        )
        self.n_dofs = len(cols)
        self.is_pre = kind == ROT_PRE
        self.any_pre = bool(np.any(self.is_pre))
        self.post_bones = np.unique(self.dof_bone[~self.is_pre])
        self.pre_bones = np.unique(self.dof_bone[self.is_pre])
        self.moving = np.unique(self.dof_bone)
        self.ball_only = bool(
            not self.any_pre
            and np.array_equal(self.dof_bone, np.repeat(self.moving, 3))
            and np.array_equal(self.dof_axis, np.tile([0, 1, 2], len(self.moving)))
        )
        self.colw = skeleton.dof_weight[cols].copy()
        self.rotational = skeleton.dof_rotational[cols]
        # the damped Newton step's damping and the DOFs' order (solvers/curvature.py)
        st = self.settings
        damping = DAMPING.get(st.method) if st.second_order else None
        self.newton = None if damping is None else float(damping(self.method.params)[1])
        self.rel = dof_order(skeleton)[cols][:, cols]
        self.moves = skeleton.dof_moves[:, cols]
        self.twist = twist_dofs(skeleton)[cols]

    def _bones(self) -> None:
        """Which bones' frames change and the order they are updated in."""
        skeleton, n_bones = self.skeleton, self.skeleton.n_bones
        # bones whose frames change during the solve: the moving ones and everything below
        parents = skeleton.parents
        dirty = np.zeros(n_bones, dtype=bool)
        dirty[self.moving] = True
        for b, p in enumerate(parents):
            dirty[b] |= p >= 0 and dirty[p]
        self.parent_ext = np.where(parents >= 0, parents, n_bones)
        self.levels_all = _levels(parents, np.arange(n_bones))
        self.levels_dirty = _levels(parents, np.flatnonzero(dirty))
        # the ball-joint fast path keeps the dirty bones' local transforms in one array ordered
        # level by level, so each level is a slice of it (no fancy indexing of 4x4 stacks)
        self.dirty_order = np.concatenate([idx for idx, _ in self.levels_dirty])
        bounds = np.cumsum([0] + [len(idx) for idx, _ in self.levels_dirty])
        self.dirty_levels = [
            (idx, par, slice(int(a), int(b)))
            for (idx, par), a, b in zip(self.levels_dirty, bounds[:-1], bounds[1:], strict=True)
        ]
        position = {int(b): i for i, b in enumerate(self.dirty_order)}
        self.moving_in_dirty = np.array([position[int(b)] for b in self.moving], dtype=np.intp)
        self.all_moving = len(self.dirty_order) == len(self.moving)  # no fixed bone below
        self.ball_perm = np.searchsorted(self.moving, self.dirty_order)
        self.rest_rot, self.rest_pos = skeleton.rest_rot, skeleton.rest_pos
        self.rest_rot_t = np.swapaxes(self.rest_rot, 1, 2).copy()
        self.eff_bone, self.eff_offset = skeleton.eff_bone, skeleton.eff_offset
        self.eff_offset_h = np.concatenate(
            [self.eff_offset, np.ones((len(self.eff_bone), 1))], axis=1
        )[:, :, None]  # homogeneous (E, 4, 1)
        self._rot_cache: tuple[Array, Array] | None = None  # (rotations in, model rotations)

    def _jacobian_layout(self, cols: NDArray[np.intp]) -> None:
        """Where the Jacobian's entries land in the weighted system."""
        skeleton, n_eff, w_pos, w_rot = (
            self.skeleton,
            self.skeleton.n_effectors,
            self.w_pos,
            self.w_rot,
        )
        # Jacobian layout: the (effector, DOF) pairs where the DOF moves the effector, and the
        # rows of the weighted system their position and orientation entries land in
        row_of = np.full(n_eff * 6, -1)
        row_of[self.rows] = np.arange(len(self.rows))
        pe, pd = np.nonzero(skeleton.dof_moves[:, cols])
        comp = np.arange(3)
        pos_pairs = w_pos[pe] > 0
        rot_pairs = w_rot[pe] > 0
        self.pos_pair = np.flatnonzero(pos_pairs)
        self.pos_rows = row_of[pe[pos_pairs, None] * 6 + comp]
        self.pos_cols = pd[pos_pairs, None]
        self.rot_pair = np.flatnonzero(rot_pairs)
        self.rot_rows = row_of[pe[rot_pairs, None] * 6 + 3 + comp]
        self.rot_cols = pd[rot_pairs, None]
        self.pair_eff, self.pair_dof = pe, pd
        self.pair_bone = self.dof_bone[pd]
        self.scale = self.sqrt_w[:, None] * self.colw[None, :]

    def _bounds(self, cols: NDArray[np.intp]) -> None:
        """The saddle kick's signs and the goals' lower bounds (solve.py's)."""
        skeleton, n_eff, parents = self.skeleton, self.skeleton.n_effectors, self.skeleton.parents
        # solve.py's saddle kick: the sign alternates with the bone's depth and the axis
        parity = (skeleton.depth[skeleton.dof_bone[cols]] + skeleton.dof_axis[cols]) % 2 == 0
        self.kick_sign = np.where(parity, 1.0, -1.0)
        self.reach, self.reach_base, self.inner = skeleton.chain_reach()
        # solve.py's lower bounds: the goals whose chain base no DOF of this solve moves
        above = np.zeros((n_eff, self.n_dofs), dtype=bool)
        for i, b in enumerate(self.reach_base):
            p = int(parents[b])
            while p >= 0:
                above[i] |= self.dof_bone == p
                p = int(parents[p])
        self.bound_goals = ~above.any(axis=1) & (self.reach > 0)
        self.bounded = bool(np.any(self.bound_goals & (self.w_pos > 0)))

    def solve(
        self,
        position: ArrayLike,
        rotation: ArrayLike | None,
        base: ArrayLike | None,
        pose: Pose,
        frames: ArrayLike | None = None,
    ) -> SolveResult:
        """Solve one frame: targets ``position`` (E, 3) and ``rotation`` (E, 3, 3) in world
        space (rotation may be None when no goal has a rotation weight), ``base`` the (4, 4)
        model-to-world matrix (None: identity), ``pose`` the start pose (one frame).

        frames: optionally the (B, 4, 4) model-space frames of the start pose as known already
            (e.g. Blender's evaluated pose). The bones no DOF moves (none of their ancestors
            is free either) then take these frames instead of forward kinematics of ``pose``,
            whose entries for them are not used.
        """
        t0 = time.perf_counter()
        n_eff, n_bones = self.skeleton.n_effectors, self.skeleton.n_bones
        target = np.asarray(position, dtype=float).reshape(n_eff, 3)
        if not np.all(np.isfinite(target)):
            raise GoalError("target positions are NaN or infinite")
        base_m = np.eye(4) if base is None else np.asarray(base, dtype=float)
        if base_m.shape != (4, 4) or not np.all(np.isfinite(base_m)):
            raise GoalError("base must be a finite (4, 4) matrix")
        lin, trans = base_m[:3, :3], base_m[:3, 3]
        identity = lin.tolist() == _IDENTITY
        if abs(_det3(lin)) <= 1e-12 * max(float(np.abs(lin).max()), 1e-300) ** 3:
            raise GoalError("the armature's world matrix is singular (a scale of zero on an axis)")
        rot_model = self._rotation_targets(rotation, lin, identity)
        self._cap(lin)
        if pose.rotations.shape[:2] != (1, n_bones):
            raise SettingsError(f"the start pose must be one frame of {n_bones} bones")
        run = _Run(self, pose, frames, target, (lin, trans, identity), rot_model)
        k, why = run.iterate()
        # the best pose seen (without pre-rotation DOFs, ``best`` holds the local rotations)
        rot = run.rot
        rot[self.moving] = run.best if self.any_pre else self.rest_rot_t[self.moving] @ run.best
        out = Pose(rot[None], pose.locations[:1].copy(), pose.stretch[:1].copy())
        return SolveResult(
            out,
            run.best_pos[None].copy(),
            run.best_rot[None].copy(),
            np.array([k], dtype=np.intp),
            REASONS[[why]],
            np.array(run.history)[:, None],
            time.perf_counter() - t0,
            run.stats,
        )

    def _rotation_targets(
        self, rotation: ArrayLike | None, lin: Array, identity: bool
    ) -> Array | None:
        """The target rotations in model space (proper rotations), None when no orientation
        error is measured."""
        if not (self.measure_rotation and (rotation is not None or len(self.rot_goals))):
            return None
        if rotation is None:
            raise GoalError("rotation weights are set but no target rotations were given")
        # every effector's orientation error is reported (as solve() does), only the
        # weighted ones are solved for
        r = np.asarray(rotation, dtype=float).reshape(self.skeleton.n_effectors, 3, 3)
        finite = np.isfinite(r)
        if not finite.all():
            if not finite[self.rot_goals].all():
                raise GoalError("target rotations are NaN or infinite")
            r = np.where(finite, r, 0.0)
        m = r if identity else _inv3(lin) @ r
        cache = self._rot_cache
        if cache is not None and cache[0].shape == m.shape and (cache[0] == m).all():
            return cache[1]  # the targets did not turn (dragging moves one at a time)
        rot_model = _model_rotations(m)
        self._rot_cache = (m, rot_model)
        return rot_model


class _Run:
    """One ``FrameSolver.solve``: the pose's transforms, the targets and the loop's state."""

    def __init__(
        self,
        fs: FrameSolver,
        pose: Pose,
        frames: ArrayLike | None,
        target: Array,
        base: tuple[Array, Array, bool],
        rot_model: Array | None,
    ) -> None:
        skel, n_bones = fs.skeleton, fs.skeleton.n_bones
        self.fs, self.st, self.target, self.rot_model = fs, fs.settings, target, rot_model
        self.lin, self.trans, self.identity = base
        self.rot = rot = pose.rotations[0].copy()
        # 4x4 local transforms relative to the parent frame: rest T(location) R (stretch moves
        # the children along the parent's Y axis); slot B of the model frames is the identity
        self.local = local = np.zeros((n_bones, 4, 4))
        local[:, 3, 3] = 1.0
        local[:, :3, :3] = fs.rest_rot @ rot
        local[:, :3, 3] = fs.rest_pos + (fs.rest_rot @ pose.locations[0][:, :, None])[:, :, 0]
        stretch = pose.stretch[0]
        has_parent = skel.parents >= 0
        local[has_parent, 1, 3] += stretch[skel.parents[has_parent]]
        self.any_shift = bool(stretch.any())
        self.eff_shift = np.where(skel.eff_stretches, stretch[fs.eff_bone], 0.0)
        self.model = np.empty((n_bones + 1, 4, 4))
        self.model[n_bones] = np.eye(4)
        self.m_rot, self.m_pos = self.model[:, :3, :3], self.model[:, :3, 3]  # views
        self.pos_dof, self.pos_eff, self.pos_bone = (
            fs.pair_dof[fs.pos_pair],
            fs.pair_eff[fs.pos_pair],
            fs.pair_bone[fs.pos_pair],
        )
        self.rot_dof = fs.pair_dof[fs.rot_pair]
        self.dof_index = (np.arange(fs.n_dofs), slice(None), fs.dof_axis)
        self.err_buf = np.zeros((skel.n_effectors, 2, 3))  # position and orientation errors
        if frames is None:
            self.forward(fs.levels_all)
        else:
            self.model[:n_bones] = np.asarray(frames, dtype=float).reshape(n_bones, 4, 4)
            self.forward(fs.levels_dirty)
        if fs.ball_only:
            self.dl = local[fs.dirty_order]  # moving bones' local transforms, level by level
            self.dl_rot = self.dl[:, :3, :3]  # a view
        self.target_model = target if self.identity else (target - self.trans) @ _inv3(self.lin).T
        self.lin_min = 1.0
        if fs.bounded and not self.identity:
            self.lin_min = float(np.linalg.svd(self.lin, compute_uv=False)[-1])
        self.best = self.current().copy()
        self.best_pos, self.best_rot = np.zeros(skel.n_effectors), np.zeros(skel.n_effectors)
        self.prev_r, self.prev2_r, self.rises = np.inf, np.inf, 0
        self.scale, self.kicks, self.undone = 1.0, 0, False
        self.snap: tuple[Array, ...] = ()
        self.state = fs.method.initial_state(1)
        self.stats: dict[str, list[float]] = {}
        self.history: list[float] = []

    def iterate(self) -> tuple[int, int]:
        """The loop of ``solve._iterate`` for this frame: (iterations, stop reason)."""
        st = self.st
        reject, best_r = st.reject_rising_steps, np.inf
        why, k = MAX_ITERATIONS, 0
        for k in range(st.max_iterations + 1):
            e6, pts, norms, ew, energy2, r, met = self.evaluate()
            self.undone = False  # the step was undone (it rose): the pose is the last one again
            if reject and k > 0:
                # a step that raised the error is undone and retried at half the length
                rose = r > self.prev_r and not met
                self.scale = 0.5 * self.scale if rose else min(2.0 * self.scale, 1.0)
                if rose:
                    self.undone = True
                    self.restore(self.snap)
                    e6, pts, norms, ew, energy2, r, met = self.evaluate()
            pos_err, rot_err = norms[:, 0], norms[:, 1]
            self.history.append(r)
            if r < best_r:
                best_r, self.best_pos, self.best_rot = r, pos_err.copy(), rot_err.copy()
                self.best[:] = self.current()
            why, beyond = self.stop_tests(k, r, met, pos_err, rot_err)
            if why != RUNNING:
                break
            self.prev2_r, self.prev_r = self.prev_r, r
            dt, jw, e_raw, ctx = self.direction(e6, ew, energy2, pts, pos_err, beyond)
            stationary, saddle = self.stationary(jw, e_raw, beyond, pos_err)
            dq = self.joint_step(dt, stationary, saddle)
            if stationary:
                why = STATIONARY
                break
            self.state = ctx.state
            if not np.isfinite(dq).all():
                why = FAILED
                break
            if np.abs(dq).max(initial=0.0) < st.step_tolerance:  # Sugihara's stop (a)
                why, k = STAGNATED, k + 1
                break
            self.apply(dq)
        return k, why

    def evaluate(self) -> tuple[Array, Array, Array, Array, float, float, bool]:
        """(e (E, 6), effector points, error norms (E, 2), e~, |e~|^2, |e~|, every goal met)."""
        fs = self.fs
        e6, pts, norms = self.errors()
        ew = e6.reshape(-1)[fs.rows] * fs.sqrt_w
        energy2 = float(ew @ ew)
        return e6, pts, norms, ew, energy2, energy2**0.5, bool((norms <= fs.tol).all())

    def stop_tests(
        self, k: int, r: float, met: bool, pos_err: Array, rot_err: Array
    ) -> tuple[int, bool]:
        """(why the frame stops or RUNNING, whether only goals out of reach are unmet)."""
        st, fs = self.st, self.fs
        if met:
            return CONVERGED, False
        beyond = False  # only goals out of reach are unmet: no gradient stop (solve.py)
        if fs.bounded:
            # every goal met or within the tolerance of its lower bound (solve.py)
            dist = np.sqrt(((self.target_model - self.m_pos[fs.reach_base]) ** 2).sum(axis=1))
            gap = np.maximum(np.maximum(dist - fs.reach, fs.inner - dist), 0.0) * self.lin_min
            lb = np.where(fs.bound_goals & ~self.pointing_away(dist), gap, 0.0)
            if (pos_err <= np.maximum(fs.tol_pos, lb + BOUND_SLACK * st.tolerance)).all() and (
                rot_err <= fs.tol_rot
            ).all():
                return STATIONARY, beyond
            beyond = bool(
                ((pos_err <= fs.tol_pos) | (lb > 0)).all() and (rot_err <= fs.tol_rot).all()
            )
            if beyond and k > 0 and not self.undone and self.prev2_r - r < SETTLED * st.tolerance:
                return STATIONARY, beyond  # settled beyond reach (stops.SETTLED)
        if k > 0:
            self.rises = self.rises + 1 if r > self.prev_r else 0
            # no progress over one step or over two (a 2-cycle), when stagnation > 0
            floor = st.stagnation * max(r, 1e-300)
            stuck = abs(self.prev_r - r) <= floor or abs(self.prev2_r - r) <= floor
            if st.stagnation > 0 and stuck and not self.undone:
                return STAGNATED, beyond
            if self.rises >= st.divergence_count:
                return DIVERGED, beyond
        if k == st.max_iterations:
            return MAX_ITERATIONS, beyond
        return RUNNING, beyond

    def direction(
        self, e6: Array, ew: Array, energy2: float, pts: Array, pos_err: Array, beyond: bool
    ) -> tuple[Array, Array, Array, StepContext]:
        """(the method's step dt on J~ (ClampMag first), or the damped Newton step where every
        unmet goal is out of reach (solve.py), J~, the unclamped e~, its context)."""
        st, fs = self.st, self.fs
        e_raw = ew
        if st.clamp_distance is not None:  # ClampMag (Buss-Kim section 3)
            over = pos_err > st.clamp_distance
            if over.any():
                e6 = e6.copy()
                e6[over, :3] *= (st.clamp_distance / pos_err[over])[:, None]
                ew = e6.reshape(-1)[fs.rows] * fs.sqrt_w
                energy2 = float(ew @ ew)
        ctx = StepContext(
            np.array([0.5 * energy2]),
            fs.blocks,
            fs.n_blocks,
            fs.rotational,
            self.state,
            self.stats,
        )
        jw = self.jacobian(pts)
        dt = None
        if fs.damped:
            lam2 = fs.method.nullspace_damping(ctx)
            dt = None if lam2 is None else damped_step(jw, ew, float(lam2[0]))
        if dt is None:
            dt = fs.method.step(jw[None], ew[None], ctx)[0]
        if fs.newton is not None and beyond and not self.undone and self.lone(pos_err):
            dt = self.newton_step(e6, ew, pts, jw, dt)
        return dt, jw, e_raw, ctx

    def lone(self, pos_err: Array) -> bool:
        """One position goal unmet (``solve.lone_unmet``)."""
        return int(np.count_nonzero(pos_err > self.fs.tol_pos)) == 1

    def newton_step(self, e6: Array, ew: Array, pts: Array, jw: Array, dt: Array) -> Array:
        """(J~^T J~ + S~ + mu I) dt = J~^T e~ (solve._newton_step), or ``dt`` where that matrix
        never becomes positive definite."""
        fs = self.fs
        n_eff = fs.skeleton.n_effectors
        u = np.zeros(n_eff * 6)
        u[fs.rows] = fs.sqrt_w**2 * e6.reshape(-1)[fs.rows]
        u3 = u.reshape(n_eff, 6)[:, :3]
        if not self.identity:
            u3 = u3 @ self.lin  # lin^T u: to model space
        assert fs.newton is not None
        step, ok = newton_step(
            self.dof_axes()[None],
            self.m_pos[fs.dof_bone][None],
            pts[None],
            u3[None],
            fs.rel,
            fs.moves,
            fs.twist,
            jw[None],
            ew[None],
            fs.colw[None],
            fs.newton,
        )
        return np.asarray(step[0]) if ok[0] else dt

    def stationary(
        self, jw: Array, e_raw: Array, beyond: bool, pos_err: Array
    ) -> tuple[bool, bool]:
        """(at a stationary point of the weighted error (solve.py): the gradient small against
        |J~| |e~|, or no step found that lowers the error; at a saddle instead)."""
        st = self.st
        stationary = saddle = False
        if st.gradient_tolerance > 0:
            grad = float(np.sqrt(((jw.T @ e_raw) ** 2).sum()))
            size = float(np.sqrt((jw * jw).sum() * (e_raw @ e_raw)))
            stationary = (
                grad <= st.gradient_tolerance * size and not beyond
            ) or self.scale < MIN_STEP_SCALE
            if stationary and self.kicks < 1 and self.in_reach_unmet(pos_err, jw, e_raw):
                stationary, saddle, self.kicks = False, True, self.kicks + 1
        return stationary, saddle

    def joint_step(self, dt: Array, stationary: bool, saddle: bool) -> Array:
        """The step dq: W_q^1/2 dt, capped, at the current length; at a saddle a fixed small
        turn of every free DOF (solve.py)."""
        st, fs = self.st, self.fs
        dq = fs.colw * dt
        if st.max_step is not None:
            dq = clamp_max_abs(dq[None], st.max_step, fs.rotational)[0]
        if st.reject_rising_steps:
            dq = dq * self.scale
            self.snap = self.snapshot()
        if saddle:  # bend the chain out of the saddle
            self.prev_r = np.inf
            dq = fs.colw * KICK * fs.kick_sign
            self.scale = 1.0
        return np.asarray(dq)

    def apply(self, dq: Array) -> None:
        """The update R <- R exp(d_post), R <- exp(d_pre) R and the frames below."""
        fs, model = self.fs, self.model
        if fs.ball_only:  # the DOFs are x, y, z of each moving bone in turn
            if fs.all_moving:
                self.dl_rot[:] = self.dl_rot @ _exp(dq.reshape(-1, 3)[fs.ball_perm])
            else:
                mov = fs.moving_in_dirty
                self.dl_rot[mov] = self.dl_rot[mov] @ _exp(dq.reshape(-1, 3))
            for idx, par, part in fs.dirty_levels:
                model[idx] = model[par] @ self.dl[part]
            return
        rot, local = self.rot, self.local
        d = np.zeros((2, fs.skeleton.n_bones, 3))
        d[fs.is_pre.astype(np.intp), fs.dof_bone, fs.dof_axis] = dq
        if fs.any_pre:
            if len(fs.post_bones):
                rot[fs.post_bones] = rot[fs.post_bones] @ _exp(d[0, fs.post_bones])
            rot[fs.pre_bones] = _exp(d[1, fs.pre_bones]) @ rot[fs.pre_bones]
            local[fs.moving, :3, :3] = fs.rest_rot[fs.moving] @ rot[fs.moving]
        else:  # rest R exp(d): the local rotation takes the increment directly
            post = fs.post_bones
            local[post, :3, :3] = local[post, :3, :3] @ _exp(d[0, post])
        self.forward(fs.levels_dirty)

    def forward(self, levels: list[tuple[Array, Array]]) -> None:
        for idx, par in levels:
            self.model[idx] = self.model[par] @ self.local[idx]

    def errors(self) -> tuple[Array, Array, Array]:
        """(e (E, 6), the effector points, the error norms (E, 2))."""
        fs, err_buf = self.fs, self.err_buf
        eff_frames = self.model[fs.eff_bone]
        pts = (eff_frames @ fs.eff_offset_h)[:, :3, 0]
        if self.any_shift:
            pts += self.eff_shift[:, None] * eff_frames[:, :3, 1]
        self.points = pts  # (model space: ``pointing_away``)
        err_buf[:, 0] = self.target - (pts if self.identity else pts @ self.lin.T + self.trans)
        if self.rot_model is not None:
            # Sugihara eq. 1: a(R_target R^T) in model space
            frames_t = np.swapaxes(eff_frames[:, :3, :3], 1, 2)
            err_buf[:, 1] = _angle_axis(self.rot_model @ frames_t)
        norms = np.sqrt(np.einsum("ebi,ebi->eb", err_buf, err_buf))
        return err_buf.reshape(len(err_buf), 6), pts, norms

    def dof_axes(self) -> Array:
        """(n, 3) each DOF's axis in model space."""
        fs, m_rot = self.fs, self.m_rot
        if fs.any_pre:
            dof_frames = m_rot[fs.dof_bone]
            pre = m_rot[fs.parent_ext[fs.dof_bone]] @ fs.rest_rot[fs.dof_bone]
            dof_frames = np.where(fs.is_pre[:, None, None], pre, dof_frames)
            return np.asarray(dof_frames[self.dof_index])  # column dof_axis
        return np.asarray(m_rot[fs.dof_bone, :, fs.dof_axis])

    def jacobian(self, pts: Array) -> Array:
        """J~ of the weighted system (world position rows)."""
        fs = self.fs
        axes = self.dof_axes()
        jw = np.zeros((len(fs.rows), fs.n_dofs))
        if len(self.pos_dof):
            ax = axes[self.pos_dof]
            lever = pts[self.pos_eff] - self.m_pos[self.pos_bone]
            # ax x lever, without np.cross's axis handling
            col = ax[:, _YZX] * lever[:, _ZXY] - ax[:, _ZXY] * lever[:, _YZX]
            jw[fs.pos_rows, fs.pos_cols] = col if self.identity else col @ self.lin.T
        if len(self.rot_dof):
            jw[fs.rot_rows, fs.rot_cols] = axes[self.rot_dof]
        jw *= fs.scale
        return jw

    def current(self) -> Array:
        """What ``best`` keeps: the rotations (pre DOFs) or the local rotations."""
        fs = self.fs
        if fs.ball_only:
            return np.asarray(self.dl_rot[fs.moving_in_dirty])
        return self.rot[fs.moving] if fs.any_pre else self.local[fs.moving, :3, :3]

    def snapshot(self) -> tuple[Array, ...]:
        """What a step changes (restored when the step is rejected)."""
        if self.fs.ball_only:
            return (self.dl_rot.copy(),)
        return self.rot.copy(), self.local.copy()

    def restore(self, snap: tuple[Array, ...]) -> None:
        fs = self.fs
        if fs.ball_only:
            self.dl_rot[:] = snap[0]
            for idx, par, part in fs.dirty_levels:
                self.model[idx] = self.model[par] @ self.dl[part]
            return
        self.rot[:], self.local[:] = snap
        self.forward(fs.levels_dirty)

    def in_reach_unmet(self, pos_err: Array, jw: Array, e_raw: Array) -> bool:
        """Some unmet position goal at a stationary point of its own error with its target
        within its chain's reach (solve.py's ``_in_reach_unmet``): a saddle, not a minimum."""
        fs = self.fs
        d = np.sqrt(((self.target_model - self.m_pos[fs.reach_base]) ** 2).sum(axis=1))
        inside = (d < 0.99 * fs.reach) & (d > 1.01 * fs.inner) | self.pointing_away(d)
        inside &= (pos_err > self.st.tolerance) & (fs.w_pos > 0)
        if not inside.any():
            return False
        own = own_stationary(jw[None], e_raw[None], fs.rows // 6, len(inside), self.st)[0]
        return bool(np.any(inside & own))

    def pointing_away(self, d: Array) -> NDArray[np.bool_]:
        """solve.py's ``pointing_away``; ``d``: the targets' distances from the chains' bases."""
        tip = np.sqrt(((self.target_model - self.points) ** 2).sum(axis=1))
        return np.asarray(tip > d + self.fs.inner)
