"""Goals: where the effectors should be, in world space, with their weights."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .balance import Balance, PreparedBalance
from .errors import GoalError
from .so3 import Array, det3, inv3, orthonormalize, unmirror


@dataclass
class Goals:
    """Targets for the E effectors of a skeleton over F frames.

    position: (F, E, 3) world-space target points (or (E, 3) for one frame).
    rotation: None, or (F, E, 3, 3) world-space target orientations.
    position_weight, rotation_weight: (E,) weights; 0 switches that part of a goal off
        (the default rotation weight is 0: position-only goals). Weights are W_E of
        Sugihara's E = 1/2 e^T W_E e; the orientation error is in radians.
    base: the model-to-world affine transform (4, 4) or (F, 4, 4): the armature object's world
        matrix; non-uniform and negative scale are allowed. Errors are in world units.
    secondary: (E,) bools; a secondary goal (a pole: the knee pulled toward a point in front)
        acts only in the null space of the primary goals and never decides convergence.
    aim: None, or (E, 3) axes in the effector bones' frames; a non-zero axis makes that goal an
        aim goal (solvers/aim.py): the axis, from the effector point, points at the target
        (2 rows, weight ``position_weight``; its angle is the goal's rotation error).
    support: (E,) bools, the goals the body stands on (their targets' midpoint is the support
        point of ``balance``).
    balance: None, or a ``Balance``: the centre of mass kept over the support point, a task in
        the null space of the goals (solvers/balance.py).
    """

    position: ArrayLike
    rotation: ArrayLike | None = None
    position_weight: ArrayLike | None = None
    rotation_weight: ArrayLike | None = None
    base: ArrayLike | None = None
    secondary: ArrayLike | None = None
    aim: ArrayLike | None = None
    support: ArrayLike | None = None
    balance: Balance | None = None


@dataclass
class PreparedGoals:
    """Goals checked against a skeleton and converted for the solver loop."""

    position: Array  # (F, E, 3) world
    rotation_model: Array  # (F, E, 3, 3) target orientations in model space
    w_pos: Array  # (E,)
    w_rot: Array  # (E,)
    lin: Array  # (F, 3, 3) base linear part
    trans: Array  # (F, 3) base translation
    lin_inv: Array  # (F, 3, 3)
    secondary: NDArray[np.bool_]  # (E,)
    aim: Array  # (E, 3) unit local aim axes, zero for the other goals
    is_aim: NDArray[np.bool_]  # (E,)
    support: NDArray[np.bool_]  # (E,)
    balance: PreparedBalance | None = None  # set by solve() (it needs the skeleton)
    on: NDArray[np.bool_] | None = None  # (F, E) the goals each frame solves (its IK tree's)

    @property
    def frames(self) -> int:
        return int(self.position.shape[0])

    def take(self, index: ArrayLike) -> PreparedGoals:
        i = np.asarray(index)
        return PreparedGoals(
            self.position[i],
            self.rotation_model[i],
            self.w_pos,
            self.w_rot,
            self.lin[i],
            self.trans[i],
            self.lin_inv[i],
            self.secondary,
            self.aim,
            self.is_aim,
            self.support,
            None if self.balance is None else self.balance.take(i),
            None if self.on is None else self.on[i],
        )

    def select(self, effectors: NDArray[np.intp]) -> PreparedGoals:
        """The goals of ``effectors`` only (one IK tree's, for its own skeleton)."""
        i = np.asarray(effectors)
        return PreparedGoals(
            self.position[:, i],
            self.rotation_model[:, i],
            self.w_pos[i],
            self.w_rot[i],
            self.lin,
            self.trans,
            self.lin_inv,
            self.secondary[i],
            self.aim[i],
            self.is_aim[i],
            self.support[i],
            None,
        )

    def support_point(self) -> Array:
        """(F, 3) the world midpoint of the support goals' targets."""
        return np.asarray(self.position[:, self.support].mean(axis=1))

    def targets_model(self) -> Array:
        """(F, E, 3) the target points in model space."""
        return np.einsum("fij,fej->fei", self.lin_inv, self.position - self.trans[:, None])


def check_weights(value: ArrayLike | None, default: float, count: int, name: str) -> Array:
    if value is None:
        return np.full(count, default)
    w = np.broadcast_to(np.asarray(value, dtype=float), (count,)).copy()
    if not np.all(np.isfinite(w)) or np.any(w < 0):
        raise GoalError(f"{name} must be finite and non-negative, got {w}")
    return w


@functools.lru_cache(maxsize=64)
def _identities(frames: int, n_effectors: int) -> Array:
    """(F, E, 3, 3) identity orientations, a read-only view of one (``np.broadcast_to`` checks
    its arguments in Python: most of a live update's ``prepare_goals``)."""
    return np.broadcast_to(np.eye(3), (frames, n_effectors, 3, 3))


MEMO_SIZE = 16
"""The most value sets ``prepare_goals``' memo keeps (each armature transform is one)."""


def prepare_goals(
    goals: Goals, n_effectors: int, memo: dict[tuple[Any, ...], _Static] | None = None
) -> PreparedGoals:
    """The goals checked and laid out for the loops. ``memo``: where the parts that do not
    change from call to call (weights, flags, the armature's transform) are kept, keyed by
    their values, for a caller that prepares goals of the same rig many times (``Solver``'s
    one-frame path: live posing); the result is the same array for array."""
    pos = np.asarray(goals.position, dtype=float)
    if pos.ndim == 2:
        pos = pos[None]
    if pos.ndim != 3 or pos.shape[1:] != (n_effectors, 3):
        raise GoalError(f"position must have shape (F, {n_effectors}, 3), got {pos.shape}")
    f = pos.shape[0]
    if f == 0:
        raise GoalError("no frames to solve")
    if not np.all(np.isfinite(pos)):
        bad = sorted({int(e) for e in np.nonzero(~np.isfinite(pos))[1]})
        raise GoalError(f"target positions of effectors {bad} are NaN or infinite")
    if memo is None or goals.balance is not None:
        static = _static(goals, n_effectors, f)
    else:
        fields = (
            goals.position_weight,
            goals.rotation_weight,
            goals.base,
            goals.secondary,
            goals.aim,
            goals.support,
        )
        key = (f, goals.rotation is None, *(_value(v) for v in fields))
        static = memo.get(key)  # type: ignore[assignment]
        if static is None:
            static = _static(goals, n_effectors, f)
            for a in static:
                a.flags.writeable = False  # (shared by every call with these values)
            if len(memo) >= MEMO_SIZE:  # an armature moving every frame: keep only the newest
                memo.clear()
            memo[key] = static
    w_pos, w_rot, lin, trans, lin_inv, secondary, aim, is_aim, support = static
    if goals.rotation is None:
        rot_model = _identities(f, n_effectors)
    else:
        rot = np.asarray(goals.rotation, dtype=float)
        if rot.ndim == 3:
            rot = rot[None]
        if rot.shape != (f, n_effectors, 3, 3):
            raise GoalError(f"rotation must have shape ({f}, {n_effectors}, 3, 3), got {rot.shape}")
        used = w_rot > 0
        if not np.all(np.isfinite(rot[:, used])):
            raise GoalError("target rotations are NaN or infinite")
        rot = np.where(np.isfinite(rot), rot, 0.0)
        # orientations in model space: the nearest rotation to lin^-1 R. A mirrored armature
        # (negative scale) flips handedness: M is then a reflection, and its X axis is turned
        # around, so the bone's Y (along it) and Z follow the target's in the world and its X
        # mirrors (-M turned all three around: the bone pointed away from the target's Y)
        rot_model = unmirror(orthonormalize(np.einsum("fij,fejk->feik", lin_inv, rot) + 1e-300))
    return PreparedGoals(
        pos,
        np.asarray(rot_model),
        w_pos,
        np.where(is_aim, 0.0, w_rot),  # an aim goal's rows replace its rotation's
        lin,
        trans,
        lin_inv,
        secondary,
        aim,
        is_aim,
        support,
    )


class _Static(NamedTuple):
    """What ``prepare_goals`` makes of the goals besides their targets."""

    w_pos: Array
    w_rot: Array
    lin: Array
    trans: Array
    lin_inv: Array
    secondary: NDArray[np.bool_]
    aim: Array
    is_aim: NDArray[np.bool_]
    support: NDArray[np.bool_]


def _static(goals: Goals, n_effectors: int, f: int) -> _Static:
    """The weights, flags and the armature's transform of ``f`` frames, checked."""
    w_pos = check_weights(goals.position_weight, 1.0, n_effectors, "position_weight")
    w_rot = check_weights(goals.rotation_weight, 0.0, n_effectors, "rotation_weight")
    secondary = np.zeros(n_effectors, dtype=bool)
    if goals.secondary is not None:
        secondary = np.broadcast_to(np.asarray(goals.secondary, dtype=bool), (n_effectors,)).copy()
    aim = np.zeros((n_effectors, 3))
    if goals.aim is not None:
        aim = np.broadcast_to(np.asarray(goals.aim, dtype=float), (n_effectors, 3)).copy()
        if not np.all(np.isfinite(aim)):
            raise GoalError("aim axes must be finite")
    norm = np.linalg.norm(aim, axis=1)
    is_aim = norm > 1e-12
    aim[is_aim] /= norm[is_aim, None]
    support = np.zeros(n_effectors, dtype=bool)
    if goals.support is not None:
        support = np.broadcast_to(np.asarray(goals.support, dtype=bool), (n_effectors,)).copy()
    if goals.balance is not None and not np.any(support):
        raise GoalError("balance needs at least one support goal (e.g. the feet)")
    primary = ~secondary
    if not np.any(w_pos[primary] > 0) and not np.any(w_rot[primary] > 0):
        raise GoalError("every goal has zero weight: nothing to solve")

    base = np.eye(4) if goals.base is None else np.asarray(goals.base, dtype=float)
    if base.shape == (4, 4):
        base = np.broadcast_to(base, (f, 4, 4))
    if base.shape != (f, 4, 4):
        raise GoalError(f"base must have shape (4, 4) or ({f}, 4, 4), got {base.shape}")
    if not np.all(np.isfinite(base)):
        raise GoalError("the armature's world matrix contains NaN or inf")
    lin = np.ascontiguousarray(base[:, :3, :3])
    det = det3(lin)
    scale = np.abs(lin).max(axis=(1, 2))
    if np.any(np.abs(det) <= 1e-12 * np.maximum(scale, 1e-300) ** 3) or np.any(scale == 0):
        raise GoalError("the armature's world matrix is singular (a scale of zero on an axis)")
    lin_inv = inv3(lin)

    if goals.rotation is None and np.any(w_rot > 0):
        raise GoalError("rotation weights are set but no target rotations were given")
    trans = base[:, :3, 3].copy()
    return _Static(w_pos, w_rot, lin, trans, lin_inv, secondary, aim, is_aim, support)


def _value(v: ArrayLike | None) -> tuple[Any, ...] | None:
    """A hashable stand-in for the value of an array-like (``prepare_goals``' memo key)."""
    if v is None:
        return None
    a = np.asarray(v)
    return (a.dtype.str, a.shape, a.tobytes())


def no_worse(error: Array, tolerance: float, share: float = 0.0) -> Array:
    """The largest error a goal may end with and still be as good as ``error`` (a reference
    solve's): within ``tolerance`` where that met it, else no farther off than ``error`` plus a
    tenth of the tolerance, or plus ``share`` of ``error`` where that is more. The flip
    repair's admissibility (solvers/flips.py), the jitter smoothing's bound (solvers/smooth.py)
    and goal priority's (solvers/priority.py)."""
    slack = np.maximum(0.1 * tolerance, share * error)
    return np.asarray(np.where(error <= tolerance, tolerance, error + slack))


def no_worse_together(
    own: tuple[Array, Array],
    found: tuple[Array, Array],
    weight: tuple[Array, Array],
    free: tuple[NDArray[np.bool_], NDArray[np.bool_]],
    tolerance: tuple[float, float],
    share: float = 0.0,
) -> NDArray[np.bool_]:
    """Per row of ``found`` (N, E) position and rotation errors: as good as ``own`` (N, E, a
    reference solve's) for the goals as a whole. Each goal ``own`` met (within ``tolerance``;
    ``free`` ones always count as met) stays met, and the ones it did not meet are judged
    together by the solve's own measure, the root of sum w e^2 over their rows' ``weight``
    (position errors in world units, rotation errors in radians): no larger than own's plus a
    tenth of the tolerance a goal (root-sum-squared) or plus ``share`` of it, where that is
    more (``no_worse``'s slack, for the goals together). The flip repair's path
    (solvers/flips.py ``_Tree.as_good``) and the smoothing along a valley (solvers/smooth.py
    ``settle``)."""
    total_own = total_found = wanted = 0.0
    ok = np.ones(len(found[0]), dtype=bool)
    for err, mine, t, loose, w_row in zip(found, own, tolerance, free, weight, strict=True):
        met = loose | (mine <= t)
        ok &= np.all(~met | loose | (err <= t), axis=1)
        w = np.where(met, 0.0, w_row)  # (N, goals): the unmet ones' weights
        total_own = total_own + np.sum(w * mine**2, axis=1)
        total_found = total_found + np.sum(w * err**2, axis=1)
        wanted = wanted + np.sum(w * (0.1 * t) ** 2, axis=1)
    total_own, total_found = np.sqrt(total_own), np.sqrt(total_found)
    ok &= total_found <= total_own + np.maximum(np.sqrt(wanted), share * total_own)
    return ok
