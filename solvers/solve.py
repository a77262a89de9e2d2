"""The one iteration loop every method shares: errors, stops, clamping, limits, null space.

``solve`` runs F frames at once. In "converge" mode every frame iterates from its own start pose
until it stops, independently of the others (stopped frames drop out of the working arrays, so
they stop changing). In "track" mode frame f starts from frame f-1's result and takes a fixed
number of steps (Buss-Kim's tracking experiment).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from numpy.typing import NDArray

from . import kernel, priority
from .aim import aim_rows
from .balance import balance_distance, balance_rows, prepare_balance
from .blas import one_thread
from .curvature import second_order_step
from .errors import SettingsError, SkeletonError
from .goals import Goals, PreparedGoals, prepare_goals
from .kernel import DAMPING
from .methods import Method, StepContext, clamp_max_abs, damped_solve, make_method
from .skeleton import Kinematics, Pose, Skeleton, components
from .so3 import Array, angle_axis, det3, mul, rotate
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
from .straight import straighten

MODES = ("converge", "track")
NULLSPACE = ("none", "exact", "damped")


@dataclass
class Settings:
    """How to solve. Distances are world units, angles radians.

    method, params: the method's name (see ``METHODS``) and its own parameters.
    mode: "converge" or "track"; track_steps: steps per frame in track mode.
    max_iterations, tolerance, rotation_tolerance: a frame has converged when every goal's
        position error is <= tolerance and rotation error <= rotation_tolerance.
    gradient_tolerance: stop at a stationary point of the weighted error: when
        ||J~^T e~|| <= gradient_tolerance ||J~||_F ||e~|| (the error is orthogonal to every
        direction the joints can move the goals in: an unreachable target at its closest, or
        goals of one tree at their compromise); reason "stationary".
    reject_rising_steps: a step that raises the weighted error is undone and retried at half
        the length (for the damped methods much like raising the damping), so the error never
        rises; a frame that finds no step that lowers it stops as "stationary".
    stagnation: stop when the weighted residual changes by less than this fraction of itself
        over one step or two (0 = off: the papers' stop rule, not the default);
        step_tolerance: stop when no DOF moves more than this in a step.
    divergence_count: stop when the residual rose this many times in a row (only when rising
        steps are kept).
    clamp_distance: D_max of Buss-Kim section 3 (ClampMag of each position error), None = off;
        clamp_adaptive: the per-effector D_max,i = d_i + D_max for targets that jump.
    max_step: the largest change of a rotational DOF in one step (ClampMaxAbs), None = off.
    nullspace: "none", "exact" ((I - J^+ J) v) or "damped" ((I - J* J) v, Deo-Walker eq. 24),
        with v pulling toward ``rest_pose`` (weight ``rest_weight``) and away from joint limits
        (``limit_weight``); nullspace_damping is lam^2 of J* for methods without their own and
        the damping of the secondary goals' step. Secondary goals (``Goals.secondary``) always
        act in the null space ("exact" when this is "none").
    jacobian_at_targets: form the position rows at the target points (Buss 2009).
    keep_limits: clamp limited DOFs into their ranges; a DOF a step pushes past a limit is held
        at it (locked) until the error's gradient points back inside (an active set: a stretch
        at its rest length, a knee held straight, is free again once the goals want it to
        move away). The compiled loop clamps stretch DOFs the same way and has no rotation
        limits: a frame it ends outside them runs this loop.
    second_order: the damped least-squares methods (lm, dls, lm_constant, lm_chan_lawrence)
        take the damped Newton step (J~^T J~ + S~ + b I) dt = J~^T e~ on frames with one unmet
        goal, out of reach (``_Problem.lower_bound``, ``lone_unmet``; not right after an undone
        step),
        S~ the residual's curvature and b the method's constant damping, raised tenfold until
        the matrix is positive definite, no bone twisting about its own length
        (solvers/curvature.py). There LM creeps toward the straight chain (J^T J loses the
        bending directions); the Newton step gets to the bound in a few steps. Frames whose
        goals are in conflict keep the method's step (docs/solver-api.md).
    flip_angle: bakes (``solvers.flips.repair``, converge mode) re-solve the frames where a bone
        turns by more than this between frames from their solved neighbours; 0 = off.
    smooth_passes: bakes (converge mode, after the flip repair) smooth the jitter of the solved
        motion in the goals' null space with this many passes (``solvers.smooth``): every goal
        stays as near its target as the solve put it; 0 = off.
    """

    method: str = "lm"
    params: dict[str, Any] = field(default_factory=dict)
    mode: str = "converge"
    max_iterations: int = 500
    tolerance: float = 1e-5
    rotation_tolerance: float = 1e-4
    gradient_tolerance: float = 1e-4
    reject_rising_steps: bool = True
    stagnation: float = 0.0
    step_tolerance: float = 1e-10
    divergence_count: int = 8
    clamp_distance: float | None = None
    clamp_adaptive: bool = False
    max_step: float | None = None
    nullspace: str = "none"
    nullspace_damping: float = 0.01
    rest_weight: float = 0.0
    limit_weight: float = 0.0
    rest_pose: Pose | None = None
    jacobian_at_targets: bool = False
    track_steps: int = 1
    keep_limits: bool = True
    second_order: bool = True
    flip_angle: float = math.radians(10.0)
    smooth_passes: int = 10

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise SettingsError(f"unknown mode {self.mode!r}; expected one of {MODES}")
        if self.nullspace not in NULLSPACE:
            raise SettingsError(
                f"unknown nullspace {self.nullspace!r}; expected one of {NULLSPACE}"
            )
        if self.max_iterations < 0 or self.track_steps < 1 or self.divergence_count < 1:
            raise SettingsError("max_iterations >= 0, track_steps >= 1, divergence_count >= 1")
        if self.smooth_passes < 0:
            raise SettingsError(f"smooth_passes must be >= 0, got {self.smooth_passes}")
        for name in (
            "tolerance",
            "rotation_tolerance",
            "stagnation",
            "gradient_tolerance",
            "step_tolerance",
            "nullspace_damping",
            "rest_weight",
            "limit_weight",
            "flip_angle",
        ):
            v = getattr(self, name)
            if not (math.isfinite(v) and v >= 0):
                raise SettingsError(f"{name} must be finite and >= 0, got {v}")
        for name in ("clamp_distance", "max_step"):
            v = getattr(self, name)
            if v is not None and not (math.isfinite(v) and v > 0):
                raise SettingsError(f"{name} must be None or a finite value > 0, got {v}")
        self.make_method()  # an unknown method or parameter fails here, not mid-solve

    def make_method(self) -> Method:
        return make_method(self.method, self.params)


@dataclass
class SolveResult:
    """The record of one solve over F frames."""

    pose: Pose
    position_error: Array  # (F, E) world units
    rotation_error: Array  # (F, E) radians
    iterations: NDArray[np.intp]  # (F,) steps taken
    reason: NDArray[np.str_]  # (F,) converged | stagnated | diverged | max_iterations | failed
    history: Array  # (K + 1, F) weighted residual norm per iteration (held after a frame stops)
    elapsed: float
    stats: dict[str, list[float]] = field(default_factory=dict)
    resume: dict[str, Any] | None = None  # track mode: the state to continue from
    balance_distance: Array | None = None  # (F,) horizontal COM-support distance (Goals.balance)
    trees: list[NDArray[np.intp]] = field(default_factory=list)  # effector indices per IK tree
    tree_reason: NDArray[np.str_] | None = None  # (T, F) each tree's reason (several trees)
    goal_status: NDArray[np.str_] | None = None  # (F, E) met | out_of_reach | conflict | secondary

    @property
    def success(self) -> NDArray[np.bool_]:
        return np.asarray(self.reason == "converged")


@dataclass
class _Errors:
    e: Array  # (F, E, 6) world position error, model orientation error
    pos: Array  # (F, E)
    rot: Array  # (F, E)
    residual: Array  # (F,) weighted norm


def _problem(skel: Skeleton, goals: PreparedGoals, settings: Settings) -> _Problem:
    """``_Problem(skel, goals, settings)``, kept on the skeleton for the goals' weights and kinds
    and the settings it reads (live posing solves the same problem many times a second)."""
    pulls = settings.nullspace != "none" and (settings.rest_weight > 0 or settings.limit_weight > 0)
    key = (
        goals.w_pos.tobytes(),
        goals.w_rot.tobytes(),
        goals.secondary.tobytes(),
        goals.is_aim.tobytes(),
        goals.balance is not None and goals.balance.weight > 0,
        bool(np.all(goals.lin == np.eye(3))),
        pulls,
    )
    cache: dict[tuple[Any, ...], _Problem] = skel.__dict__.setdefault("_problems", {})
    problem = cache.get(key)
    if problem is None:
        if len(cache) > 64:
            cache.clear()
        problem = cache[key] = _Problem(skel, goals, settings)
    problem.settings = settings
    return problem


W_BAR_SHARE = 0.01
"""Levenberg-Marquardt's constant damping w_bar (Sugihara's 1e-3, for arms about 1 m long) is at
most this share of the squared reach of a tree's position goals (world units): it is added to
J^T W_E J, whose entries grow with the squared lengths, so on short chains it outweighed them and
the steps crept (a 3-bone chain 2.9 cm long took 106 iterations a frame to 1e-5, one 1 cm long
did not get there in 500; capped, 7 and 7, as a 1 m chain does; 7 and 18 on a 9.5 cm finger).
Trees reaching 0.32 m or more keep w_bar: the cap leaves every zoo rig as it was (the shortest
tree there reaches 0.40 m)."""


def lm_w_bar(settings: Settings) -> float:
    """LM's w_bar in ``settings`` (its default when not given)."""
    return float(settings.params.get("w_bar", make_method("lm").params["w_bar"]))


def lm_cap(settings: Settings, reach: float, lin: Array) -> float:
    """LM's w_bar for a tree whose goals reach ``reach`` (model units; 0 or inf: no cap) under
    a base of linear part ``lin`` ((3, 3) or (F, 3, 3), the largest scale counts): at most
    ``W_BAR_SHARE`` of the squared reach in world units. The one formula of the cap, for every
    loop (``tree_settings``, ``frame.FrameSolver``, ``solver.Solver``), so all get one float."""
    w_bar = lm_w_bar(settings)
    if not math.isfinite(reach) or reach <= 0.0:
        return w_bar
    scale = float(np.abs(det3(lin)).max()) ** (1.0 / 3.0)  # world units per model unit
    return min(w_bar, W_BAR_SHARE * (reach * scale) ** 2)


def tree_settings(
    settings: Settings,
    skel: Skeleton,
    g: PreparedGoals,
    effectors: NDArray[np.intp] | None = None,
) -> Settings:
    """``settings`` for the goals ``g`` of one IK tree on ``skel`` (of its ``effectors``, when
    ``skel`` holds other trees too): LM's w_bar capped at ``W_BAR_SHARE`` of the tree's squared
    reach in world units (``settings`` itself when the cap does not bite). Every loop solves a
    tree with these, alone or among others."""
    if settings.method != "lm":
        return settings
    use = (g.w_pos > 0) & ~g.secondary & ~g.is_aim
    if effectors is not None:
        use &= np.isin(np.arange(len(use)), effectors)
    if not np.any(use):
        return settings
    cap = lm_cap(settings, float(skel.chain_reach()[0][use].max()), g.lin)
    if cap >= lm_w_bar(settings):
        return settings
    return replace(settings, params={**settings.params, "w_bar": cap})


class _Problem:
    """What stays fixed over the loop: row selection, weights, masks (``_problem`` caches it)."""

    def __init__(self, skel: Skeleton, goals: PreparedGoals, settings: Settings) -> None:
        self.skel, self.settings = skel, settings
        self.reach, self.reach_base, self.inner = skel.chain_reach()
        e = skel.n_effectors
        use = np.zeros((e, 6), dtype=bool)
        use[:, :3] = (goals.w_pos > 0)[:, None]
        use[:, 3:] = (goals.w_rot > 0)[:, None]
        # an aim goal: two rows (solvers/aim.py) in its position rows' first two slots
        use[goals.is_aim] = False
        use[goals.is_aim, :2] = (goals.w_pos[goals.is_aim] > 0)[:, None]
        sec = np.repeat(goals.secondary, 6).reshape(e, 6)
        self.sec_rows = np.flatnonzero((use & sec).reshape(-1))
        use &= ~sec
        self.rows = np.flatnonzero(use.reshape(-1))
        w = np.concatenate(
            [np.repeat(goals.w_pos[:, None], 3, 1), np.repeat(goals.w_rot[:, None], 3, 1)], axis=1
        )
        self.sqrt_w = np.sqrt(w.reshape(-1)[self.rows])
        self.sec_sqrt_w = np.sqrt(w.reshape(-1)[self.sec_rows])
        self.blocks = self.rows // 3
        _, self.blocks = np.unique(self.blocks, return_inverse=True)
        self.n_blocks = int(self.blocks.max()) + 1 if self.blocks.size else 0
        # secondary goals never decide convergence
        self.aim = np.flatnonzero(goals.is_aim)
        self.use_pos = (goals.w_pos > 0) & ~goals.secondary & ~goals.is_aim
        self.use_rot = ((goals.w_rot > 0) | (goals.is_aim & (goals.w_pos > 0))) & ~goals.secondary
        pulls = settings.nullspace != "none" and (
            settings.rest_weight > 0 or settings.limit_weight > 0
        )
        self.balance = goals.balance is not None and goals.balance.weight > 0
        self.use_nullspace = pulls or self.sec_rows.size > 0 or self.balance
        self.any_rot = bool(np.any((goals.w_rot > 0) & ~goals.is_aim))
        self.identity_base = bool(np.all(goals.lin == np.eye(3)))
        # each goal's error has a lower bound when its target is farther from its chain's base
        # than the chain reaches, or nearer than it folds (``lower_bound``); the bound holds
        # while no DOF of the problem moves that base
        self.moves_base = np.zeros((e, skel.n_dofs), dtype=bool)
        for i, b in enumerate(self.reach_base):
            p = int(skel.parents[b])
            while p >= 0:
                self.moves_base[i] |= skel.dof_bone == p
                p = int(skel.parents[p])
        self.bounded = bool(np.any(self.use_pos & (self.reach > 0))) and not self.balance
        self.base_fixed = ~np.any(self.moves_base & skel.dof_moves.any(axis=0), axis=1)

    def lower_bound(
        self, kin: Kinematics, targets_model: Array, lin_min: Array, g: PreparedGoals
    ) -> Array:
        """(F, E) a lower bound of each goal's position error (world units): the target's
        distance beyond its chain's reach, or inside its inner reach, from the chain's base,
        times the smallest scale of the armature's transform; 0 where the base can move (its
        tree has a DOF above it), the chain is empty, or the effector points away from its
        target (``pointing_away``: a saddle, not a bound). A goal whose error is within the
        tolerance of its bound can do no better."""
        d = np.linalg.norm(targets_model - kin.head[:, self.reach_base], axis=-1)
        gap = np.maximum(np.maximum(d - self.reach, self.inner - d), 0.0) * lin_min[:, None]
        gap = np.where(pointing_away(self, kin, targets_model, d), 0.0, gap)
        fixed = self.base_fixed & (self.reach > 0)
        if g.on is not None:
            in_play = (g.on.astype(float) @ self.skel.dof_moves) > 0  # (F, n) the tree's DOFs
            fixed = fixed & ~((in_play.astype(float) @ self.moves_base.T) > 0)
        return np.asarray(np.where(fixed, gap, 0.0))

    def row_weights(self, g: PreparedGoals) -> Array:
        """(F, rows) square-root weights of the primary rows; 0 for goals of other IK trees."""
        if g.on is None:
            return np.broadcast_to(self.sqrt_w, (g.frames, len(self.rows)))
        return np.asarray(self.sqrt_w * g.on[:, self.rows // 6])

    def secondary_weights(self, g: PreparedGoals) -> Array:
        if g.on is None:
            return np.broadcast_to(self.sec_sqrt_w, (g.frames, len(self.sec_rows)))
        return np.asarray(self.sec_sqrt_w * g.on[:, self.sec_rows // 6])

    def tolerances(self, g: PreparedGoals) -> tuple[Array, Array]:
        """(F, E) position and rotation tolerances (inf: the goal does not decide)."""
        st = self.settings
        pos, rot = self.use_pos[None, :], self.use_rot[None, :]
        if g.on is not None:
            pos, rot = pos & g.on, rot & g.on
        return np.where(pos, st.tolerance, np.inf), np.where(rot, st.rotation_tolerance, np.inf)

    def errors(self, kin: Kinematics, g: PreparedGoals) -> _Errors:
        world = rotate(g.lin[:, None], kin.points) + g.trans[:, None]
        f, e = world.shape[:2]
        err = np.zeros((f, e, 6))
        err[..., :3] = g.position - world
        if self.any_rot:
            # Sugihara eq. 1: a(R_target R^T), in model space (the Jacobian's frame)
            err[..., 3:] = angle_axis(mul(g.rotation_model, np.swapaxes(kin.frames_rot, -1, -2)))
        pos = np.linalg.norm(err[..., :3], axis=-1)
        rot = np.linalg.norm(err[..., 3:], axis=-1)
        if self.aim.size:
            ai = self.aim
            e_aim, theta, _ = aim_rows(
                kin.frames_rot[:, ai], kin.points[:, ai], g.targets_model()[:, ai], g.aim[ai]
            )
            err[:, ai] = 0.0
            err[:, ai, :2] = e_aim
            pos[:, ai], rot[:, ai] = 0.0, theta
        weighted = err.reshape(f, -1)[:, self.rows] * self.row_weights(g)
        return _Errors(err, pos, rot, np.linalg.norm(weighted, axis=1))


@one_thread
def solve(
    skeleton: Skeleton,
    goals: Goals,
    settings: Settings | None = None,
    pose: Pose | None = None,
    resume: dict[str, Any] | None = None,
    *,
    status: bool = True,
) -> SolveResult:
    """Solve the goals for every frame; see ``Settings`` for the options and modes.

    In track mode, ``resume=previous_result.resume`` (with ``pose`` = its last frame) carries
    the method's state and the adaptive clamp on, so a range solved in chunks equals the whole.
    ``status=False`` leaves ``goal_status`` None (the flip repair's candidates: it judges them
    by their errors and sets the status of the frames it changes once, ``goal_status_at``).
    """
    settings = settings or Settings()
    t0 = time.perf_counter()
    g = prepare_goals(goals, skeleton.n_effectors)
    start = (pose or Pose.rest(skeleton.n_bones)).broadcast(g.frames)
    check_start(skeleton, start)
    if settings.keep_limits:
        skeleton.clamp_to_limits(start)  # a start pose outside the limits starts at them
    if goals.balance is not None:
        g.balance = prepare_balance(goals.balance, skeleton, g.frames, g.support_point())
    if settings.mode == "converge":
        start = straighten(skeleton, g, start)  # goals out of reach start at their answer
    trees = ik_trees(skeleton) if g.balance is None else [np.arange(skeleton.n_effectors)]
    problem = _problem(skeleton, g, settings)
    method = settings.make_method()
    # the compiled loop (solvers/kernel.py) covers the problem: each tree on its own skeleton
    compiled = kernel.plan(problem, method, g, start, settings.mode == "track") is not None
    if len(trees) == 1:
        own = tree_settings(settings, skeleton, g)
        if own is not settings:
            problem, method = _problem(skeleton, g, own), own.make_method()
        result = _solve(problem, method, g, start, resume, 1)
        result.trees = trees
    elif (
        settings.mode == "track"
        or g.frames * len(trees) > STACK_LIMIT
        or not method.zero_rows_neutral
        or compiled
        or carries(skeleton)
        or priority.has_levels(skeleton, trees)
        or any(tree_settings(settings, skeleton, g, t) is not settings for t in trees)
    ):
        result = _solve_apart(skeleton, g, settings, start, resume, trees)
    else:
        # few frames (live posing): one batch element per frame and tree (frame-major), each
        # weighing only its tree's goals and moving only its tree's DOFs: the same problem as
        # its tree alone, in one call
        count = len(trees)
        on = np.zeros((count, skeleton.n_effectors), dtype=bool)
        for t, tree in enumerate(trees):
            on[t, tree] = True
        stacked = np.repeat(np.arange(g.frames), count)
        gx = g.take(stacked)
        gx.on = np.tile(on, (g.frames, 1))
        res = _solve(problem, method, gx, start.take(stacked), resume, count)
        result = _unstack(skeleton, start, trees, res)
    if g.balance is not None:
        kin = skeleton.forward_kinematics(result.pose)
        result.balance_distance = balance_distance(kin, g.balance, g.lin, g.trans)
    if status:
        result.goal_status = goal_status(skeleton, g, result, settings)
    result.elapsed = time.perf_counter() - t0
    return result


def check_start(skeleton: Skeleton, start: Pose) -> None:
    """SettingsError unless ``start`` has the skeleton's bones and only finite values."""
    if start.rotations.shape[1] != skeleton.n_bones:
        raise SettingsError(
            f"the start pose has {start.rotations.shape[1]} bones, the skeleton {skeleton.n_bones}"
        )
    if not (
        np.isfinite(start.rotations).all()
        and np.isfinite(start.locations).all()
        and np.isfinite(start.stretch).all()
    ):
        raise SettingsError("the start pose contains NaN or inf")


def _solve_apart(
    skeleton: Skeleton,
    g: PreparedGoals,
    settings: Settings,
    start: Pose,
    resume: dict[str, Any] | None,
    trees: list[NDArray[np.intp]],
) -> SolveResult:
    """Each tree on its own skeleton (the bones from the roots to its goals), all its frames in
    one batch; a tree carried by others (``tree_carriers``) from their result, as Blender
    solves the tree nearer the root first."""
    carried = (resume or {}).get("trees", [None] * len(trees))
    parts = []
    below = start.copy() if carries(skeleton) else start
    for tree, carry in zip(trees, carried, strict=True):
        sub, bones, solved = skeleton.subtree(tree)
        st = tree_settings(settings, sub, g.select(tree))
        if settings.rest_pose is not None:
            st = replace(st, rest_pose=settings.rest_pose.of_bones(bones))
        part_problem = _problem(sub, g.select(tree), st)
        begin = below.of_bones(bones)
        part = _solve(part_problem, st.make_method(), g.select(tree), begin, carry, 1)
        parts.append(part)
        if below is not start:
            below.put_solved(bones, solved, part.pose)
    return _merge(skeleton, start, trees, parts)


def solve_tree(
    skeleton: Skeleton, g: PreparedGoals, settings: Settings, start: Pose
) -> SolveResult:
    """``solve`` of goals already prepared (``prepare_goals``) whose effectors form one IK tree,
    from the start pose of every frame, without the goals' status: for a caller that solves one
    tree many times (the flip repair's rounds), so it prepares the goals once. Gives what
    ``solve`` gives (no balance; the start pose is used in place)."""
    if settings.keep_limits:
        skeleton.clamp_to_limits(start)
    if settings.mode == "converge":
        start = straighten(skeleton, g, start)
    settings = tree_settings(settings, skeleton, g)
    problem = _problem(skeleton, g, settings)
    return _solve(problem, settings.make_method(), g, start, None, 1)


def ik_trees(skeleton: Skeleton) -> list[NDArray[np.intp]]:
    """The effectors grouped into independent problems, as Blender splits an armature into IK
    trees: two effectors are in one tree when their chains share a moving DOF (transitively).

    Each tree is solved on its own (its own damping, clamps, stop rule, iterations, reason), so
    a goal out of reach in one tree never holds back the goals of another.
    """
    cached = skeleton.__dict__.get("_ik_trees")
    if cached is not None:
        return list(cached)
    moves = skeleton.dof_moves.astype(np.int64)  # (E, n)
    label = components((moves @ moves.T) > 0)
    trees = [np.flatnonzero(label == t) for t in np.unique(label)]
    below = tree_carriers(skeleton, trees)
    order: list[int] = []  # carriers first, else in the order of their first effector
    while len(order) < len(trees):
        ready = [i for i in range(len(trees)) if i not in order and set(below[i]) <= set(order)]
        if not ready:
            raise SkeletonError("IK chains that move each other's goals (a cycle of chains)")
        order.append(ready[0])
    trees = [trees[i] for i in order]
    skeleton.__dict__["_ik_trees"] = trees
    return list(trees)


def tree_carriers(skeleton: Skeleton, trees: list[NDArray[np.intp]]) -> list[list[int]]:
    """Per tree, the trees whose DOFs move its effectors (its chains hang below theirs: a hand's
    chain of three below the chest of the head's chain). As Blender does, a tree is solved after
    the trees that carry it, from their result (``solve``)."""
    dofs = [skeleton.dof_moves[t].any(axis=0) for t in trees]
    return [
        [j for j in range(len(trees)) if j != i and np.any(skeleton.dof_affects[t][:, dofs[j]])]
        for i, t in enumerate(trees)
    ]


def carry_groups(skel: Skeleton, trees: list[NDArray[np.intp]]) -> list[NDArray[np.intp]]:
    """The IK trees joined with the trees they carry (``tree_carriers``), transitively: what
    moves a carrier moves the carried chains with it, so the jitter smoothing
    (solvers/smooth.py: the arms follow the chest that the head's chain turns) and the flip
    repair (solvers/flips.py: a carrier's new pose must leave the carried goals as good) treat
    them as one. In the order of ``trees``' first members."""
    if len(trees) < 2:
        return trees
    link = np.zeros((len(trees), len(trees)), dtype=bool)
    for i, below in enumerate(tree_carriers(skel, trees)):
        link[i, below] = link[below, i] = True
    label = components(link)
    return [
        np.sort(np.concatenate([trees[i] for i in np.flatnonzero(label == k)]))
        for k in np.unique(label)
    ]


def carries(skeleton: Skeleton) -> bool:
    """Whether an IK tree of ``skeleton`` moves another tree's effectors."""
    cached = skeleton.__dict__.get("_carries")
    if cached is None:
        cached = any(tree_carriers(skeleton, ik_trees(skeleton)))
        skeleton.__dict__["_carries"] = cached
    return bool(cached)


def _solve(
    problem: _Problem,
    method: Method,
    g: PreparedGoals,
    start: Pose,
    resume: dict[str, Any] | None,
    group: int,
) -> SolveResult:
    if problem.rows.size == 0:  # only zero-weight goals: nothing to do
        res = _iterate(problem, method, g, start, 0, track=True)
        res.reason[:] = "converged"
        return res
    if problem.settings.mode == "converge":
        res = _converge(problem, method, g, start)
        # goals whose chains start deeper win over the others of their tree (solvers/priority.py)
        primary, other = priority.split(problem, g)
        if primary.size:
            st = problem.settings

            def again(sub: Skeleton, gs: PreparedGoals, begin: Pose) -> SolveResult:
                own = tree_settings(st, sub, gs)
                return _solve(_problem(sub, gs, own), own.make_method(), gs, begin, None, 1)

            def weighted(gs: PreparedGoals, begin: Pose) -> SolveResult:
                own = tree_settings(st, problem.skel, gs)
                return _converge(_problem(problem.skel, gs, own), own.make_method(), gs, begin)

            res = priority.prioritize(problem, g, res, primary, other, (again, weighted), start)
        return res
    return _track(problem, method, g, start, resume, group)


def _converge(problem: _Problem, method: Method, g: PreparedGoals, start: Pose) -> SolveResult:
    """The converge-mode loop: compiled where it covers the problem (solvers/kernel.py)."""
    p = kernel.plan(problem, method, g, start, False)
    if p is not None:
        return _iterate_compiled(problem, method, g, start, p)
    return _iterate(problem, method, g, start, problem.settings.max_iterations, False)


def _iterate_compiled(
    problem: _Problem, method: Method, g: PreparedGoals, start: Pose, p: kernel.Plan
) -> SolveResult:
    """``_iterate`` in converge mode by the compiled loop (solvers/kernel.py); the frames it
    hands back (a normal matrix that is not positive definite) run ``_iterate``."""
    try:
        raw = kernel.iterate(problem, p, g, start)
    except kernel.KernelUnavailable:
        return _iterate(problem, method, g, start, problem.settings.max_iterations, False)
    frames = g.frames
    last = raw.last
    hist = raw.history[: int(last.max()) + 1]
    held = np.arange(len(hist))[:, None] > last[None, :]
    hist = np.where(held, hist[last, np.arange(frames)], hist)
    pose = Pose(raw.rotations, start.locations.copy(), raw.stretch)
    reason = raw.reason
    result = SolveResult(
        pose, raw.pos, raw.rot, raw.iterations, REASONS[np.minimum(reason, 6)], hist, 0.0
    )
    back = np.flatnonzero(reason == kernel.FALLBACK)
    if back.size:
        part = _iterate(
            problem,
            method,
            g.take(back),
            start.take(back),
            problem.settings.max_iterations,
            False,
        )
        result.pose.put(back, part.pose)
        result.position_error[back] = part.position_error
        result.rotation_error[back] = part.rotation_error
        result.iterations[back] = part.iterations
        result.reason[back] = part.reason
        length = max(len(result.history), len(part.history))
        result.history = np.pad(result.history, ((0, length - len(result.history)), (0, 0)), "edge")
        result.history[:, back] = np.pad(
            part.history, ((0, length - len(part.history)), (0, 0)), "edge"
        )
    return result


def _merge(
    skeleton: Skeleton, start: Pose, trees: list[NDArray[np.intp]], parts: list[SolveResult]
) -> SolveResult:
    """The frames' result from the trees' results on their own skeletons."""
    pose = start.copy()
    frames = start.frames
    pos = np.zeros((frames, skeleton.n_effectors))
    rot = np.zeros((frames, skeleton.n_effectors))
    for tree, part in zip(trees, parts, strict=True):
        _, bones, solved = skeleton.subtree(tree)
        pose.put_solved(bones, solved, part.pose)
        pos[:, tree], rot[:, tree] = part.position_error, part.rotation_error
    return combine_trees(trees, parts, pose, pos, rot)


def combine_trees(
    trees: list[NDArray[np.intp]], parts: list[SolveResult], pose: Pose, pos: Array, rot: Array
) -> SolveResult:
    """The result record of trees solved apart, given their merged pose and errors
    (``trees_record``)."""
    reasons = np.stack([p.reason for p in parts])  # (T, F)
    reason, iterations, hist = trees_record(
        reasons, np.array([p.iterations for p in parts]), [p.history for p in parts]
    )
    stats: dict[str, list[float]] = {}
    for p in parts:
        for k, v in p.stats.items():
            stats.setdefault(k, []).extend(v)
    resume = None
    if all(p.resume is not None for p in parts):
        resume = {"trees": [p.resume for p in parts]}
    result = SolveResult(pose, pos, rot, iterations, reason, hist, 0.0, stats, resume)
    result.trees, result.tree_reason = trees, reasons
    return result


def trees_record(
    reasons: NDArray[np.str_], iterations: NDArray[np.intp], histories: list[Array]
) -> tuple[NDArray[np.str_], NDArray[np.intp], Array]:
    """The frames' reason, iterations and residual history of trees solved apart, from each
    tree's (``reasons`` and ``iterations`` (T, F), ``histories`` (K_t, F) each): a frame's
    reason is "converged" when every tree converged, else the first tree's that did not; its
    iterations the most any tree took; the history the trees' combined norm, each held at its
    last row."""
    first = np.argmax(reasons != "converged", axis=0)
    length = max(len(h) for h in histories)
    total = np.zeros((length, *histories[0].shape[1:]))
    for h in histories:  # (the squares added tree by tree, in order; a short one held)
        total[: len(h)] += h**2
        total[len(h) :] += h[-1] ** 2
    return reasons[first, np.arange(reasons.shape[1])], iterations.max(axis=0), np.sqrt(total)


def _unstack(
    skeleton: Skeleton, start: Pose, trees: list[NDArray[np.intp]], res: SolveResult
) -> SolveResult:
    """The frames' result from the (frame, tree) elements': each bone and goal from its tree."""
    count, frames = len(trees), start.frames
    pose = start.copy()
    pos = np.zeros((frames, skeleton.n_effectors))
    rot = np.zeros((frames, skeleton.n_effectors))
    for t, tree in enumerate(trees):
        bones = np.unique(skeleton.dof_bone[skeleton.dof_moves[tree].any(axis=0)])
        mine = res.pose.take(np.arange(t, frames * count, count))
        pose.rotations[:, bones] = mine.rotations[:, bones]
        pose.locations[:, bones] = mine.locations[:, bones]
        pose.stretch[:, bones] = mine.stretch[:, bones]
        pos[:, tree] = res.position_error[t::count][:, tree]
        rot[:, tree] = res.rotation_error[t::count][:, tree]
    reasons = res.reason.reshape(frames, count).T  # (T, F)
    # a frame's reason: "converged" when every tree converged, else the first tree's that did not
    first = np.argmax(reasons != "converged", axis=0)
    history = res.history.reshape(len(res.history), frames, count)
    result = SolveResult(
        pose,
        pos,
        rot,
        res.iterations.reshape(frames, count).max(axis=1),
        reasons[first, np.arange(frames)],
        np.sqrt((history**2).sum(axis=2)),
        0.0,
        res.stats,
        res.resume,
    )
    result.trees, result.tree_reason = trees, reasons
    return result


def goal_status(
    skeleton: Skeleton,
    g: PreparedGoals,
    result: SolveResult,
    settings: Settings,
    kin: Kinematics | None = None,
) -> NDArray[np.str_]:
    """(F, E) each goal "met", "out_of_reach" (its target farther from the chain's fixed base than
    the chain is long, or nearer than it can fold) or "conflict" (in reach, not met: other goals
    of its tree, joint limits or locks hold it); "secondary" for poles. ``kin``: the forward
    kinematics of ``result.pose``, when the caller has it."""
    met = (result.position_error <= settings.tolerance) | (g.w_pos <= 0) | g.is_aim
    met &= (result.rotation_error <= settings.rotation_tolerance) | ~(
        (g.w_rot > 0) | (g.is_aim & (g.w_pos > 0))
    )
    if np.all(met) and not np.any(g.secondary):
        return np.full(met.shape, "met")
    reach, base_bone, inner = skeleton.chain_reach()
    kin = skeleton.forward_kinematics(result.pose) if kin is None else kin
    base = rotate(g.lin[:, None], kin.head[:, base_bone]) + g.trans[:, None]  # (F, E, 3)
    scale = np.abs(np.linalg.det(g.lin)) ** (1.0 / 3.0)  # world units per model unit
    d = np.linalg.norm(g.position - base, axis=-1)
    far = (d > reach * scale[:, None] + settings.tolerance) | (
        d < inner * scale[:, None] - settings.tolerance
    )
    status = np.where(
        met, "met", np.where(far & (g.w_pos > 0) & ~g.is_aim, "out_of_reach", "conflict")
    )
    status[:, g.secondary] = "secondary"
    return np.asarray(status)


def goal_status_at(
    skeleton: Skeleton,
    g: PreparedGoals,
    result: SolveResult,
    settings: Settings,
    before: NDArray[np.str_] | None,
    frames: NDArray[np.intp],
) -> NDArray[np.str_]:
    """``goal_status`` of ``result`` whose frames other than ``frames`` are those of a result
    whose status is ``before`` (the flip repair's, which changes some frames): only those
    frames again (their forward kinematics: a frame's status is its own), the same array."""
    if before is None:
        return goal_status(skeleton, g, result, settings)
    status = np.asarray(before).astype("<U12")
    if len(frames):
        part = replace(
            result,
            pose=result.pose.take(frames),
            position_error=result.position_error[frames],
            rotation_error=result.rotation_error[frames],
        )
        status[frames] = goal_status(skeleton, g.take(frames), part, settings)
    if np.all(status == "met"):
        return np.full(status.shape, "met")  # (as goal_status gives it)
    return status


def _track(
    problem: _Problem,
    method: Method,
    g: PreparedGoals,
    start: Pose,
    carry: dict[str, Any] | None,
    group: int = 1,
) -> SolveResult:
    """Track mode: frame after frame; ``group`` batch elements a frame (its IK trees), each
    carrying its own state on (``resume`` holds one per tree when there are several)."""
    steps = problem.settings.track_steps
    frames = g.frames // group
    out = start.copy()
    if carry is None:
        carries = [{"method": method.initial_state(1)} for _ in range(group)]
    else:
        carries = carry["trees"] if group > 1 else [carry]
    pieces = []
    current = start.take(np.arange(group))
    # the bones no DOF moves take each frame's start (an animated parent, a carrier's result)
    held = np.flatnonzero(~np.isin(np.arange(problem.skel.n_bones), problem.skel.dof_bone))
    for f in range(frames):
        for t in range(group):
            i = np.array([f * group + t])
            if held.size:
                current.rotations[t, held] = start.rotations[i[0], held]
                current.locations[t, held] = start.locations[i[0], held]
                current.stretch[t, held] = start.stretch[i[0], held]
            res = _iterate(problem, method, g.take(i), current[t], steps, True, carries[t])
            out.put(i, res.pose)
            current.put(np.array([t]), res.pose)
            pieces.append(res)
    carry = {"trees": carries} if group > 1 else carries[0]
    history = np.concatenate(
        [np.pad(r.history, ((0, steps + 1 - len(r.history)), (0, 0)), mode="edge") for r in pieces],
        axis=1,
    )
    stats: dict[str, list[float]] = {}
    for r in pieces:
        for k, v in r.stats.items():
            stats.setdefault(k, []).extend(v)
    return SolveResult(
        out,
        np.concatenate([r.position_error for r in pieces]),
        np.concatenate([r.rotation_error for r in pieces]),
        np.concatenate([r.iterations for r in pieces]),
        np.concatenate([r.reason for r in pieces]),
        history,
        0.0,
        stats,
        carry,
    )


BALANCE_PROGRESS = 0.01
"""A frame whose goals are met iterates on while its balance error falls by more than this
fraction a step,"""
BALANCE_TOLERANCE = 10.0
"""and is above this many times the goals' tolerance (0.1 mm at the default 1e-5 m): the centre
of mass need not be placed as exactly as a hand."""

STACK_LIMIT = 64
"""In converge mode, up to this many (frame, tree) pairs the trees are batch elements of one
call on the whole skeleton (live posing: the fewest numpy calls); above it, and in track mode,
each tree is solved on its own skeleton (bakes: the least arithmetic). Both solve the same
problems (tested)."""


@dataclass
class _Active:
    """The per-frame working arrays of the frames still iterating."""

    index: NDArray[np.intp]  # their frame numbers
    pose: Pose
    goals: PreparedGoals
    best: Pose
    best_r: Array
    best_pos: Array
    best_rot: Array
    prev_r: Array
    prev2_r: Array
    prev_bal: Array
    sec_on: NDArray[np.bool_]  # secondary goals and balance still act (off once they cost a goal)
    best_met: NDArray[np.bool_]  # the best pose kept meets the goals
    rises: NDArray[np.intp]
    prev_pose: Pose  # the pose before the last step (restored when the step is rejected)
    prev_colw: Array  # the DOF weights before the last step (limits it hit lock DOFs)
    lock: NDArray[np.int8]  # (F, n) -1 / +1: the DOF is held at its min / max, 0: free
    prev_lock: NDArray[np.int8]  # as it was before the last step
    colw0: Array  # the DOF weights a lock gives back
    scale: Array  # the step's length factor: halved when a step is rejected, doubled back after
    kicks: NDArray[np.intp]  # how often the frame was bent out of a saddle point
    colw: Array  # DOF weights; 0 locks a DOF (stiffness, limits)
    dmax: Array  # Buss-Kim's D_max,i per effector
    prev_pos: Array | None
    targets_model: Array | None
    tm: Array | None  # (F, E, 3) targets in model space, for the goals' lower bounds
    lin_min: Array | None  # (F,) smallest singular value of the armature's world matrix
    state: dict[str, Array]
    newton_damping: float | None = None  # the damped Newton step's mu (None: not used)
    newton: NDArray[np.bool_] | None = None  # the frames taking it this iteration

    def keep(self, idx: NDArray[np.intp]) -> None:
        self.index = self.index[idx]
        self.pose, self.best, self.goals, self.prev_pose = (
            self.pose.take(idx),
            self.best.take(idx),
            self.goals.take(idx),
            self.prev_pose.take(idx),
        )
        for name in (
            "best_r",
            "best_pos",
            "best_rot",
            "prev_r",
            "prev2_r",
            "prev_bal",
            "sec_on",
            "best_met",
            "rises",
            "scale",
            "kicks",
            "prev_colw",
            "colw",
            "lock",
            "prev_lock",
            "colw0",
            "dmax",
            "prev_pos",
            "targets_model",
            "tm",
            "lin_min",
        ):
            value = getattr(self, name)
            if value is not None:
                setattr(self, name, value[idx])
        self.state = {key: v[idx] for key, v in self.state.items()}


def _iterate(
    problem: _Problem,
    method: Method,
    goals: PreparedGoals,
    start: Pose,
    max_iter: int,
    track: bool,
    carry: dict[str, Any] | None = None,
) -> SolveResult:
    """Iterate all frames of ``goals`` from ``start``; the core loop.

    Each pass: forward kinematics, errors, stop tests (a stopped frame leaves the working
    arrays with its best pose), then one step of the method on the weighted Jacobian, the
    step cap, the null-space term, the update and the joint limits. In track mode there are
    no stagnation or divergence stops, the last pose (not the best) is kept, and ``carry``
    hands the method's state and the adaptive clamp on to the next frame.
    """
    carry = carry if carry is not None else {}
    bounded = problem.bounded and not track
    out = _Output.start(start, goals.frames, problem.skel.n_effectors)
    stats: dict[str, list[float]] = {}
    a = _start(problem, method, goals, start, carry, bounded)
    reject = problem.settings.reject_rising_steps and not track
    # the damped Newton step's damping (the method's constant term), None: no such step
    damping = DAMPING.get(method.name)
    if problem.settings.second_order and damping is not None and not track:
        a.newton_damping = damping(method.params)[1]
    for k in range(max_iter + 1):
        tol_pos, tol_rot = problem.tolerances(a.goals)
        kin, err, undone = _evaluate(problem, a, tol_pos, tol_rot, reject and k > 0)
        out.history.append((a.index, err.residual))
        met = np.all(err.pos <= tol_pos, axis=1) & np.all(err.rot <= tol_rot, axis=1)
        settling = _keep_best(problem, a, kin, err, met, track, k)
        why, beyond = _stop_tests(
            problem, a, kin, err, (tol_pos, tol_rot), (met, settling, undone), bounded, track, k
        )
        if k == max_iter:
            why = np.where(why != RUNNING, why, np.where(met, CONVERGED, MAX_ITERATIONS))
        stop = why != RUNNING
        if np.any(stop):
            out.finish(a, np.flatnonzero(stop), why[stop], k)
            keep = np.flatnonzero(~stop)
            if len(keep) == 0:
                break
            a.keep(keep)
            kin = kin.take(keep)
            err = _Errors(err.e[keep], err.pos[keep], err.rot[keep], err.residual[keep])
            met, beyond, undone = met[keep], beyond[keep], undone[keep]
            tol_pos = tol_pos[keep] if len(tol_pos) > 1 else tol_pos
        a.prev2_r, a.prev_r = a.prev_r, err.residual
        if a.newton_damping is not None:
            # frames whose one unmet goal is out of reach take the damped Newton step
            # (solvers/curvature.py); after an undone step, the method's own
            a.newton = ~met & ~undone & beyond & lone_unmet(err.pos, tol_pos)
        dq, stationary = _step(problem, method, a, kin, err, met, beyond, track, reject, stats)
        if not _update(problem, a, out, dq, stationary, track, k):
            break
    carry["method"], carry["dmax"], carry["prev_pos"] = a.state, a.dmax, a.prev_pos
    return out.result(stats)


@dataclass
class _Output:
    """``_iterate``'s results, written as frames stop."""

    final: Pose
    iterations: NDArray[np.intp]
    reason: NDArray[np.intp]
    pos: Array
    rot: Array
    history: list[tuple[NDArray[np.intp], Array]]  # (frames still iterating, their residuals)

    @classmethod
    def start(cls, start: Pose, frames: int, n_eff: int) -> _Output:
        return cls(
            start.copy(),
            np.zeros(frames, dtype=np.intp),
            np.full(frames, MAX_ITERATIONS),
            np.zeros((frames, n_eff)),
            np.zeros((frames, n_eff)),
            [],
        )

    def finish(
        self, a: _Active, idx: NDArray[np.intp], why: NDArray[np.intp] | int, k: int
    ) -> None:
        """Frames ``idx`` of the active ones stop after iteration ``k``: their best pose."""
        out = a.index[idx]
        self.final.put(out, a.best.take(idx))
        self.iterations[out], self.reason[out] = k, why
        self.pos[out], self.rot[out] = a.best_pos[idx], a.best_rot[idx]

    def result(self, stats: dict[str, list[float]]) -> SolveResult:
        frames = len(self.iterations)
        hist = np.zeros((len(self.history), frames))
        last = np.zeros(frames, dtype=np.intp)
        for k, (idx, r) in enumerate(self.history):
            hist[k, idx] = r
            last[idx] = k
        held = np.arange(len(self.history))[:, None] > last[None, :]
        hist = np.where(
            held, hist[last, np.arange(frames)], hist
        )  # a stopped frame holds its last value
        return SolveResult(
            self.final, self.pos, self.rot, self.iterations, REASONS[self.reason], hist, 0.0, stats
        )


def _start(
    problem: _Problem,
    method: Method,
    goals: PreparedGoals,
    start: Pose,
    carry: dict[str, Any],
    bounded: bool,
) -> _Active:
    """The working arrays of every frame at the start."""
    skel, st = problem.skel, problem.settings
    frames, n_eff, n = goals.frames, skel.n_effectors, skel.n_dofs
    colw = (
        np.broadcast_to(skel.dof_weight, (frames, n)).copy()
        if goals.on is None
        else skel.dof_weight * ((goals.on.astype(float) @ skel.dof_moves) > 0)
    )
    return _Active(
        index=np.arange(frames),
        pose=start.copy(),
        goals=goals,
        best=start.copy(),
        best_r=np.full(frames, np.inf),
        best_pos=np.zeros((frames, n_eff)),
        best_rot=np.zeros((frames, n_eff)),
        prev_r=np.full(frames, np.inf),
        prev2_r=np.full(frames, np.inf),
        prev_bal=np.full(frames, np.inf),
        sec_on=np.ones(frames, dtype=bool),
        best_met=np.zeros(frames, dtype=bool),
        rises=np.zeros(frames, dtype=np.intp),
        prev_pose=start.copy(),
        prev_colw=np.broadcast_to(skel.dof_weight, (frames, n)).copy(),
        lock=np.zeros((frames, n), dtype=np.int8),
        prev_lock=np.zeros((frames, n), dtype=np.int8),
        colw0=colw.copy(),
        scale=np.ones(frames),
        kicks=np.zeros(frames, dtype=np.intp),
        colw=colw,
        dmax=carry.get("dmax", np.full((frames, n_eff), np.inf)),  # D_max,i starts at infinity
        prev_pos=carry.get("prev_pos"),
        targets_model=goals.targets_model() if st.jacobian_at_targets else None,
        tm=goals.targets_model() if bounded else None,
        lin_min=np.linalg.svd(goals.lin, compute_uv=False)[:, -1] if bounded else None,
        state=carry.get("method", method.initial_state(frames)),
    )


def _evaluate(
    problem: _Problem, a: _Active, tol_pos: Array, tol_rot: Array, reject: bool
) -> tuple[Kinematics, _Errors, NDArray[np.bool_]]:
    """Forward kinematics and errors of the active frames' poses; with ``reject``, a step that
    raised the error (and lost the goals) is undone and retried at half the length first.
    Also which frames' steps were undone."""
    skel = problem.skel
    kin = skel.forward_kinematics(a.pose)
    err = problem.errors(kin, a.goals)
    r = err.residual
    rose = np.zeros(len(r), dtype=bool)
    if reject:
        # within tolerance, null-space tasks (poles, balance) may trade a little
        met = np.all(err.pos <= tol_pos, axis=1) & np.all(err.rot <= tol_rot, axis=1)
        # (with the balance on, once the goals were met the latest met pose is kept
        # anyway, and balance steps may lose the goals for a step: no rejection there)
        rose = (r > a.prev_r) & ~met & ~a.best_met
        a.scale = np.where(rose, 0.5 * a.scale, np.minimum(2.0 * a.scale, 1.0))
        if np.any(rose):
            idx = np.flatnonzero(rose)
            a.pose.put(idx, a.prev_pose.take(idx))
            a.colw[idx] = a.prev_colw[idx]  # and a limit the step hit is free again
            a.lock[idx] = a.prev_lock[idx]
            kin = skel.forward_kinematics(a.pose)
            err = problem.errors(kin, a.goals)
    return kin, err, rose


def _keep_best(
    problem: _Problem,
    a: _Active,
    kin: Kinematics,
    err: _Errors,
    met: NDArray[np.bool_],
    track: bool,
    k: int,
) -> NDArray[np.bool_]:
    """Keep each frame's best pose (in track mode its latest); the frames whose goals are met
    that go on for the balance (``settling``)."""
    st, r = problem.settings, err.residual
    settling = np.zeros(len(r), dtype=bool)
    better = np.ones(len(r), dtype=bool) if track else r < a.best_r
    if problem.balance:
        # a frame whose goals are met goes on while the balance task (in their null space)
        # still gains more than BALANCE_PROGRESS a step, and keeps its latest met pose
        bal = a.goals.balance
        assert bal is not None
        bal_err = balance_distance(kin, bal, a.goals.lin, a.goals.trans)
        settling = (
            met
            & a.sec_on
            & (bal_err > BALANCE_TOLERANCE * st.tolerance)
            & (bal_err < (1 - BALANCE_PROGRESS) * a.prev_bal)
        )
        a.prev_bal = np.where(met, bal_err, a.prev_bal)  # progress from met pose to met pose
        # the latest pose that meets the goals is kept (its balance is the best so far);
        # once one has, a pose that does not never replaces it
        better = met | (better & ~a.best_met)
        a.best_met |= met
    if np.any(better):
        idx = np.flatnonzero(better)
        a.best.put(idx, a.pose.take(idx))
        a.best_r[idx], a.best_pos[idx], a.best_rot[idx] = r[idx], err.pos[idx], err.rot[idx]
    if st.clamp_adaptive and a.prev_pos is not None and k > 0:
        # Buss-Kim section 3: D_max,i = d_i + D_max, d_i how much the last step moved
        # effector i closer to its target
        a.dmax = np.maximum(a.prev_pos - err.pos, 0.0) + (st.clamp_distance or np.inf)
    a.prev_pos = err.pos
    return settling


def _stop_tests(
    problem: _Problem,
    a: _Active,
    kin: Kinematics,
    err: _Errors,
    tols: tuple[Array, Array],
    states: tuple[NDArray[np.bool_], NDArray[np.bool_], NDArray[np.bool_]],
    bounded: bool,
    track: bool,
    k: int,
) -> tuple[NDArray[np.intp], NDArray[np.bool_]]:
    """(why each frame stops, RUNNING if it goes on; whether only goals out of reach are
    unmet); ``states``: which frames meet their goals, settle the balance, had a step undone
    (an undone step repeats the residual exactly: no stagnation test)."""
    st, r = problem.settings, err.residual
    met, settling, undone = states
    tol_pos, tol_rot = tols
    why = np.where(met & ~settling, CONVERGED, RUNNING)
    beyond = np.zeros(len(r), dtype=bool)  # only goals out of reach are unmet
    if bounded:
        # every goal met or within the tolerance of its lower bound (out of reach): no
        # pose is better, stop without creeping on toward the straight chain
        assert a.tm is not None and a.lin_min is not None
        lb = problem.lower_bound(kin, a.tm, a.lin_min, a.goals)
        done = np.all(err.pos <= np.maximum(tol_pos, lb + BOUND_SLACK * st.tolerance), axis=1)
        done &= np.all(err.rot <= tol_rot, axis=1) & ~met & ~settling
        why[done] = STATIONARY
        # these go on to their bounds: the gradient test would stop them short (it is
        # small long before the chain is straight)
        beyond = np.all((err.pos <= tol_pos) | (lb > 0), axis=1)
        beyond &= np.all(err.rot <= tol_rot, axis=1) & ~met
        if k > 0:  # settled beyond reach (stops.SETTLED)
            settled = beyond & ~undone & ~settling & (a.prev2_r - r < SETTLED * st.tolerance)
            why[settled & (why == RUNNING)] = STATIONARY
    if not track and k > 0:
        a.rises = np.where(r > a.prev_r, a.rises + 1, 0)
        # no progress over one step, or over two (a frame caught in a 2-cycle, as DLS and
        # LM can be around an unreachable target)
        floor = st.stagnation * np.maximum(r, 1e-300)
        stagnant = (
            (st.stagnation > 0)
            & ~undone
            & ((np.abs(a.prev_r - r) <= floor) | (np.abs(a.prev2_r - r) <= floor))
        )
        why = np.where(
            (why != RUNNING) | settling,
            why,
            np.where(
                stagnant,
                STAGNATED,
                np.where(a.rises >= st.divergence_count, DIVERGED, RUNNING),
            ),
        )
    if problem.balance or problem.sec_rows.size:
        # secondary goals (poles) and the balance never cost a goal: a frame that stops
        # short of its goals with them on (they can fight: null-space steps are linear, a
        # pole's swivel point is fixed while a free root moves) goes on without them, from
        # where it is
        retry = ((why == STAGNATED) | (why == DIVERGED)) & a.sec_on & ~met
        if np.any(retry):
            why[retry] = RUNNING
            a.sec_on[retry] = False
            a.rises[retry] = 0
            a.prev_r = np.where(retry, np.inf, a.prev_r)
    return why, beyond


def _step(
    problem: _Problem,
    method: Method,
    a: _Active,
    kin: Kinematics,
    err: _Errors,
    met: NDArray[np.bool_],
    beyond: NDArray[np.bool_],
    track: bool,
    reject: bool,
    stats: dict[str, list[float]],
) -> tuple[Array, NDArray[np.bool_]]:
    """(the step dq of every active frame, the frames at a stationary point: dq = 0)."""
    skel, st = problem.skel, problem.settings
    # the step, on the weighted Jacobian J~ = W_E^1/2 J W_q^1/2 (dq = W_q^1/2 dtheta~)
    e6 = err.e.copy()
    if st.clamp_distance is not None:  # ClampMag of each position error (Buss-Kim section 3)
        limit = a.dmax if st.clamp_adaptive else st.clamp_distance
        e6[..., :3] *= np.where(err.pos > limit, limit / np.maximum(err.pos, 1e-300), 1.0)[
            ..., None
        ]
    f_act = len(a.index)
    ew = e6.reshape(f_act, -1)[:, problem.rows] * problem.row_weights(a.goals)
    jac, jw = _weighted_jacobian(problem, a, kin, ew)
    ctx = StepContext(
        0.5 * np.einsum("fm,fm->f", ew, ew),
        problem.blocks,
        problem.n_blocks,
        skel.dof_rotational,
        a.state,
        stats,
    )
    dt = method.step(jw, ew, ctx)
    if a.newton is not None:
        _newton_step(problem, a, kin, e6, jw, ew, dt)
    stationary = np.zeros(f_act, dtype=bool)
    kick = saddles = np.zeros(f_act, dtype=bool)
    if not track and st.gradient_tolerance > 0:
        stationary, saddles, kick = _stationary(problem, a, kin, err, jw, met, beyond)
    if problem.use_nullspace:
        secondary = _secondary_rows(problem, a, kin, jac, e6, met)
        dt = dt + _nullspace_term(problem, method, a.pose, jw, a.colw, ctx, dt, secondary)
    dq = a.colw * dt
    if st.max_step is not None:
        dq = clamp_max_abs(dq, st.max_step, skel.dof_rotational)
    if reject:
        dq = dq * a.scale[:, None]
        a.prev_pose, a.prev_colw, a.prev_lock = a.pose, a.colw.copy(), a.lock.copy()
    dq[stationary] = 0.0
    # the step out of a saddle is kept even where it raises the error
    a.prev_r = np.where(saddles, np.inf, a.prev_r)
    if np.any(kick):
        # a fixed small turn of every free DOF, its sign alternating with the bone's depth
        # and the axis: deterministic, and the same on a tree's own skeleton
        parity = (skel.depth[skel.dof_bone] + skel.dof_axis) % 2 == 0
        dq[kick] = a.colw[kick] * KICK * np.where(parity, 1.0, -1.0)
        a.scale[kick] = 1.0
    a.state = ctx.state
    return dq, stationary


def _newton_step(
    problem: _Problem, a: _Active, kin: Kinematics, e6: Array, jw: Array, ew: Array, dt: Array
) -> None:
    """Replace ``dt`` by the damped Newton step (solvers/curvature.py) on the frames
    ``a.newton``, where that step exists."""
    assert a.newton is not None and a.newton_damping is not None
    idx = np.flatnonzero(a.newton)
    if len(idx) == 0:
        return
    n_eff = problem.skel.n_effectors
    w_pos = np.zeros((len(idx), n_eff * 6))
    w_pos[:, problem.rows] = problem.row_weights(a.goals)[idx] ** 2
    u = w_pos.reshape(-1, n_eff, 6)[..., :3] * e6[idx, :, :3]
    if not problem.identity_base:
        u = np.einsum("fji,fej->fei", a.goals.lin[idx], u)  # to model space
    step, ok = second_order_step(
        problem.skel, kin.take(idx), jw[idx], ew[idx], u, a.colw[idx], a.newton_damping
    )
    dt[idx[ok]] = step[ok]


def _weighted_jacobian(
    problem: _Problem, a: _Active, kin: Kinematics, ew: Array
) -> tuple[Array, Array]:
    """(the Jacobian J, (F, E, 6, n) with world position rows and aim goals' rows; the
    weighted J~ of the rows solved for); first a DOF held at a limit whose gradient
    (J^T W e)_j now points back inside is free again (``Settings.keep_limits``), ``ew`` the
    weighted error e~."""
    skel = problem.skel
    n_eff, n = skel.n_effectors, skel.n_dofs
    jac = skel.jacobian(kin, a.targets_model)
    if problem.aim.size:
        ai = problem.aim
        model_jac = jac[:, ai] if a.targets_model is None else skel.jacobian(kin)[:, ai]
        _, _, aim_jac = aim_rows(
            kin.frames_rot[:, ai],
            kin.points[:, ai],
            a.goals.targets_model()[:, ai],
            a.goals.aim[ai],
            model_jac,
        )
    if not problem.identity_base:
        jac[:, :, :3] = mul(a.goals.lin[:, None], jac[:, :, :3])  # world position rows
    if problem.aim.size:
        jac[:, problem.aim] = 0.0
        jac[:, problem.aim, :2] = aim_jac
    f_act = len(a.index)
    rows = jac.reshape(f_act, n_eff * 6, n)[:, problem.rows]
    rows = rows * problem.row_weights(a.goals)[..., None]
    if np.any(a.lock):
        # descent moves DOF j along +(J~^T e~)_j: a lock at the min (-1) whose gradient is
        # positive, or at the max with a negative one, is released
        free = a.lock * np.einsum("fmn,fm->fn", rows, ew) < 0.0
        a.colw[free], a.lock[free] = a.colw0[free], 0
    return jac, rows * a.colw[:, None, :]


def _stationary(
    problem: _Problem,
    a: _Active,
    kin: Kinematics,
    err: _Errors,
    jw: Array,
    met: NDArray[np.bool_],
    beyond: NDArray[np.bool_],
) -> tuple[NDArray[np.bool_], NDArray[np.bool_], NDArray[np.bool_]]:
    """(at a stationary point of the weighted error, at a saddle, bent out of it by the kick)."""
    st = problem.settings
    f_act = len(a.index)
    # a stationary point of the weighted error: J~^T e~ (the gradient) small against
    # |J~| |e~|, or no step found that lowers the error
    e_raw = err.e.reshape(f_act, -1)[:, problem.rows] * problem.row_weights(a.goals)
    grad = np.linalg.norm(np.einsum("fmn,fm->fn", jw, e_raw), axis=1)
    size = np.linalg.norm(jw.reshape(f_act, -1), axis=1) * np.linalg.norm(e_raw, axis=1)
    stationary = ~met & (
        ((grad <= st.gradient_tolerance * size) & ~beyond) | (a.scale < MIN_STEP_SCALE)
    )
    # a saddle, not a minimum, when a goal that is in reach is not met (a straight
    # chain whose target lies along it: the gradient vanishes there): bend the chain a
    # little, once, and go on
    saddle = stationary & (a.kicks < 1)
    if np.any(saddle):  # each goal's own gradient, at the frames that may kick only
        idx = np.flatnonzero(saddle)
        own = np.zeros((f_act, problem.skel.n_effectors), dtype=bool)
        own[idx] = own_stationary(jw[idx], e_raw[idx], problem.rows // 6, own.shape[1], st)
        saddle &= _in_reach_unmet(problem, kin, a.goals, err, st, own)
    stationary &= ~saddle
    a.kicks[saddle] += 1
    # with poles on, their null-space step bends the chain toward the pole instead
    kick = saddle & ~(a.sec_on & (problem.sec_rows.size > 0))
    return stationary, saddle, kick


def _secondary_rows(
    problem: _Problem,
    a: _Active,
    kin: Kinematics,
    jac: Array,
    e6: Array,
    met: NDArray[np.bool_],
) -> tuple[Array, Array] | None:
    """The secondary tasks' (J2, e2) for the null space (poles, balance), None without."""
    skel = problem.skel
    f_act, n_eff, n = len(a.index), skel.n_effectors, skel.n_dofs
    j2s, e2s = [], []
    if problem.sec_rows.size:
        w_s = problem.secondary_weights(a.goals) * a.sec_on[:, None]
        j2s.append(jac.reshape(f_act, n_eff * 6, n)[:, problem.sec_rows] * w_s[..., None])
        e2s.append(e6.reshape(f_act, -1)[:, problem.sec_rows] * w_s)
    if problem.balance:
        # the centre of mass over the support point (solvers/balance.py)
        bal = a.goals.balance
        assert bal is not None
        e_b, j_b = balance_rows(skel, kin, bal, a.goals.lin, a.goals.trans)
        # only from poses that meet the goals: a step that loses them is followed by
        # one without the balance, so the two never settle into a compromise
        w_b = math.sqrt(bal.weight) * (a.sec_on & met)
        j2s.append(j_b * w_b[:, None, None])
        e2s.append(e_b * w_b[:, None])
    if not j2s:
        return None
    j2 = np.concatenate(j2s, axis=1) * a.colw[:, None, :]
    return j2, np.concatenate(e2s, axis=1)


def _update(
    problem: _Problem,
    a: _Active,
    out: _Output,
    dq: Array,
    stationary: NDArray[np.bool_],
    track: bool,
    k: int,
) -> bool:
    """Apply the step (and the joint limits); stop the frames whose step is NaN (FAILED),
    tiny or zero at a stationary point. False when no frame goes on."""
    skel, st = problem.skel, problem.settings
    a.pose = skel.apply(a.pose, dq)
    if st.keep_limits:
        side = skel.clamp_sides(a.pose)  # lock a DOF that hit its limit at that limit
        hit = side != 0
        a.colw[hit], a.lock[hit] = 0.0, side[hit]
    bad = ~(np.all(np.isfinite(dq), axis=1) & np.all(np.isfinite(a.pose.rotations), axis=(1, 2, 3)))
    # Sugihara's stop (a): every component of the step below step_tolerance
    tiny = ~bad & ~stationary & (np.abs(dq).max(axis=1, initial=0.0) < st.step_tolerance)
    if not track and np.any(bad | tiny | stationary):  # never let NaN into a pose
        out.finish(a, np.flatnonzero(bad), FAILED, k)
        out.finish(a, np.flatnonzero(tiny), STAGNATED, k + 1)
        out.finish(a, np.flatnonzero(stationary & ~bad), STATIONARY, k)
        a.keep(np.flatnonzero(~(bad | tiny | stationary)))
    elif np.any(bad):
        out.finish(a, np.flatnonzero(bad), FAILED, k)
        a.keep(np.flatnonzero(~bad))
    return len(a.index) > 0


def own_stationary(
    jw: Array, e_raw: Array, goal_of_row: NDArray[np.intp], n_goals: int, st: Settings
) -> NDArray[np.bool_]:
    """(F, E) whether each goal is at a stationary point of its own weighted error: the
    gradient J~_e^T e~_e of its rows small against |J~_e| |e~_e| (``gradient_tolerance``), as a
    straight chain along the line to its target or turned away from it is. Where goals of a
    tree pull against each other, the frame is stationary while no goal is on its own."""
    goal_of = np.eye(n_goals)[goal_of_row]  # (m, E)
    grad = np.linalg.norm(np.einsum("fmn,fm,me->fen", jw, e_raw, goal_of), axis=2)
    size2 = np.einsum("fmn,me->fe", jw * jw, goal_of) * ((e_raw * e_raw) @ goal_of)
    return np.asarray(grad <= st.gradient_tolerance * np.sqrt(size2))


def _in_reach_unmet(
    problem: _Problem,
    kin: Kinematics,
    goals: PreparedGoals,
    err: _Errors,
    st: Settings,
    own: NDArray[np.bool_],
) -> NDArray[np.bool_]:
    """(F,) whether some unmet position goal at a stationary point of its own error (``own``,
    (F, E)) has its target within its chain's reach (between the folded and the straight
    length, 1 % margins) from the chain's fixed base, or its effector points away from it
    (``pointing_away``): a saddle of that goal, which the kick bends the chain out of. Not a
    compromise of goals that pull against each other (each off its own stationary point): there
    a kick only turned the compromise by a twist that depended on the path, and the bones
    jittered (zoo seed 2424's humanoid 05: 35 % of its solved samples off their cubic against
    19 % without such kicks, the same errors)."""
    tm = goals.targets_model()  # (F, E, 3)
    d = np.linalg.norm(tm - kin.head[:, problem.reach_base], axis=-1)
    inside = (d < 0.99 * problem.reach) & (d > 1.01 * problem.inner)
    inside |= pointing_away(problem, kin, tm, d)
    unmet = (err.pos > st.tolerance) & problem.use_pos
    if goals.on is not None:
        unmet &= goals.on
    return np.asarray(np.any(inside & unmet & own, axis=1))


def pointing_away(problem: _Problem, kin: Kinematics, tm: Array, d: Array) -> NDArray[np.bool_]:
    """(F, E) effectors farther from their targets ``tm`` than their chains' bases are
    (``d``) plus the chains' inner reach: never a minimum of the goal's error (at its best a
    chain is max(d - reach, inner - d, 0) off, less than d + inner), but where a straight chain
    stands turned away from its target, or overshooting one near its base, the gradient
    vanishes, and the lower bound of a goal out of reach let the loop stop there (the race's
    10-link chain: a target behind it ended |t| + L off instead of |t| - L). There it is a
    saddle: the kick bends the chain, and it goes on to its best."""
    tip = np.linalg.norm(tm - kin.points, axis=-1)
    return np.asarray(tip > d + problem.inner)


def lone_unmet(pos: Array, tol_pos: Array) -> NDArray[np.bool_]:
    """(F,) one position goal unmet: where the damped Newton step runs (with ``beyond``: it is
    out of reach). Where two or more goals of a tree are out of reach they pull the chains apart
    and the Newton step without the twist (solvers/curvature.py) crept to the iteration cap
    (zoo humanoids with both hands through the spine: 125 iterations a frame against 65 with
    LM alone, and a higher rms)."""
    return np.asarray(np.sum(pos > tol_pos, axis=1) == 1)


def _nullspace_term(
    problem: _Problem,
    method: Method,
    pose: Pose,
    jw: Array,
    colw: Array,
    ctx: StepContext,
    dt: Array,
    secondary: tuple[Array, Array] | None,
) -> Array:
    """Motion in the null space of the primary goals' weighted Jacobian J, added to step dt.

    The projector P is I - J^+ J ("exact", from the SVD of J) or I - J* J with
    J* = J^T (J J^T + lam2 I)^-1 ("damped", Deo-Walker eq. 24). Two things use it:

    - a gradient v = -rest_weight (q - q_rest) - limit_weight (q - q_mid) / half_range^2 (a
      pull toward the rest pose and toward the middle of each limited range): P v;
    - secondary goals (J2, e2), e.g. a knee pulled toward its pole, as a task of lower priority
      (Nakamura's task-priority scheme, damped as in Chiaverini 1997):
      P J2^T (J2 P J2^T + lam2 I)^-1 (e2 - J2 dt), so they move only what the primary goals
      leave free.
    """
    skel, st = problem.skel, problem.settings
    frames, n = colw.shape
    if st.nullspace == "damped":
        lam2 = method.nullspace_damping(ctx)
        lam2 = np.maximum(np.full(frames, st.nullspace_damping) if lam2 is None else lam2, 1e-12)

        def project(x: Array) -> Array:
            return np.asarray(x - damped_solve(jw, np.einsum("fmn,fn->fm", jw, x), lam2))
    else:
        _, s, vt = np.linalg.svd(jw, full_matrices=True)
        rank = (s > 1e-8 * np.maximum(s[:, :1], 1e-300)).sum(axis=1)
        basis = vt * (np.arange(n)[None, :] < rank[:, None])[:, :, None]  # rows: V_r^T

        def project(x: Array) -> Array:
            return np.asarray(x - np.einsum("fin,fi->fn", basis, np.einsum("fin,fn->fi", basis, x)))

    out = np.zeros_like(colw)
    v = np.zeros_like(colw)
    if st.rest_weight > 0:
        v -= st.rest_weight * skel.rest_offsets(pose, st.rest_pose)
    if st.limit_weight > 0 and np.any(skel.dof_limited):
        ranged = (
            np.isfinite(skel.dof_min) & np.isfinite(skel.dof_max) & (skel.dof_max > skel.dof_min)
        )
        mid = np.where(ranged, 0.5 * (skel.dof_min + skel.dof_max), 0.0)
        half = np.where(ranged, 0.5 * (skel.dof_max - skel.dof_min), 1.0)
        coords = skel.coordinates(pose)
        v -= st.limit_weight * np.where(ranged, (coords - mid) / half**2, 0.0)
    if st.rest_weight > 0 or st.limit_weight > 0:
        out += project(v * colw)
    if secondary is not None:
        j2, e2 = secondary
        r2 = e2 - np.einsum("fmn,fn->fm", j2, dt)
        # P J2^T, one column per secondary row (P is symmetric)
        pj2t = np.stack([project(j2[:, i]) for i in range(j2.shape[1])], axis=2)
        gram = np.einsum("fmn,fnk->fmk", j2, pj2t) + st.nullspace_damping * np.eye(j2.shape[1])
        out += np.einsum("fnm,fm->fn", pj2t, np.linalg.solve(gram, r2[..., None])[..., 0])
    return out
