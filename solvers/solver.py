"""``Solver``: one skeleton and settings prepared once for bakes, live posing and the API.

``solve()`` is its thin wrapper. The IK trees, the per-tree loop and the stop rules are in
solvers/solve.py; the one-frame path in solvers/frame.py.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import NDArray

from . import kernel
from .blas import one_thread
from .errors import SettingsError
from .frame import FrameSolver, unsupported
from .goals import Goals, PreparedGoals, check_weights, prepare_goals
from .priority import has_levels
from .skeleton import Pose, Skeleton
from .solve import (
    REASONS,
    Settings,
    SolveResult,
    _problem,
    carries,
    check_start,
    combine_trees,
    goal_status,
    ik_trees,
    lm_cap,
    lm_w_bar,
    tree_settings,
)
from .solve import solve as solve_batched  # the batched loop (many frames, every option)
from .straight import straighten

Array = NDArray[np.float64]

SINGULAR_VALUE_METHODS = frozenset(
    {"dls_nakamura_hanafusa", "dls_kelmar", "dls_maciejewski_klein", "dls_chiaverini"}
)
"""Methods whose damping follows J's singular values or manipulability. ``solve`` solves their
IK trees on each tree's own skeleton (``Method.zero_rows_neutral``); the one-frame path has not
been tested equal to it for them, so they run batched."""


class Solver:
    """One skeleton and settings prepared once, solved many times: bakes (many frames,
    batched), live posing and ``api.solve_pose`` (one frame, warm start from the last pose).

    ``Solver(skeleton, settings).solve(goals, pose=None, resume=None)`` gives what
    ``solve(skeleton, goals, settings, pose, resume)`` gives. The IK trees, each tree's own
    skeleton, rows, weights and DOF map are prepared on the first solve with a given set of goal
    weights (position, rotation, secondary, aim, balance on/off, identity base or not) and
    reused while it stays the same.

    One converge-mode frame runs ``frame.FrameSolver`` per tree when it covers the problem
    (``frame.unsupported``; no poles, aim goals or balance): the same iteration, stops, step
    rejection and saddle kick as the batched loop, with its set-up done once and one frame's
    numpy calls; equal to the batched loop to rounding (tests/solvers/test_one_frame.py).
    ``one_frame_path=False`` always runs the batched loop, as ``solve()`` does, so that a range
    equals its frames solved one by one to 1e-9, not only to rounding.
    """

    def __init__(
        self, skeleton: Skeleton, settings: Settings | None = None, one_frame_path: bool = True
    ) -> None:
        self.skeleton = skeleton
        self.settings = settings or Settings()
        self.settings.make_method()  # an unknown method fails here
        self.one_frame_path = one_frame_path
        self.trees_all = ik_trees(skeleton)
        self._fast: dict[bytes, list[FrameSolver] | None] = {}
        self._compiled: dict[bytes, _Compiled | None] = {}
        self._goal_memo: dict[tuple[Any, ...], Any] = {}  # prepare_goals' unchanging parts
        self._shortest: float | None = None  # the shortest goal's reach (``_caps``)
        self._uncapped: bytes | None = None  # a base (its linear part) no cap bites under
        self._lock = threading.Lock()  # (``_one_frame_compiled``)
        self._lin_seen: tuple[Any, bool] = (None, False)  # the last goals' lin: identity?
        # trees solved one after the other, goal priority: the batched loop, never one frame
        self._trees_in_order = carries(skeleton) or has_levels(skeleton, self.trees_all)

    def trees(self, goals: Goals) -> list[NDArray[np.intp]]:
        """The IK trees (effector indices) ``solve`` splits these goals into."""
        if goals.balance is not None:
            return [np.arange(self.skeleton.n_effectors)]
        return self.trees_all

    @one_thread
    def solve(
        self,
        goals: Goals,
        pose: Pose | None = None,
        resume: dict[str, Any] | None = None,
    ) -> SolveResult:
        """Solve the goals for every frame from ``pose`` (F frames, or one broadcast; default
        rest); see ``Settings`` for the options and modes.

        In track mode, ``resume=previous_result.resume`` (with ``pose`` = its last frame)
        carries the method's state and the adaptive clamp on, so a range solved in chunks
        equals the whole.
        """
        skeleton, settings = self.skeleton, self.settings
        t0 = time.perf_counter()
        if self.one_frame_path:
            fast = self._one_frame(goals, pose)
            if fast is not None:
                fast.elapsed = time.perf_counter() - t0
                return fast
        result = solve_batched(skeleton, goals, settings, pose, resume)
        result.elapsed = time.perf_counter() - t0
        return result

    def _one_frame(self, goals: Goals, pose: Pose | None) -> SolveResult | None:
        """The one-frame path (None when it does not apply)."""
        st, skel = self.settings, self.skeleton
        position = np.asarray(goals.position, dtype=float)
        if st.mode != "converge" or position.ndim != 3 or position.shape[0] != 1:
            return None
        if st.method in SINGULAR_VALUE_METHODS or self._trees_in_order:
            return None
        if goals.balance is not None or goals.support is not None:
            return None
        if goals.secondary is not None and np.any(goals.secondary):
            return None
        if goals.aim is not None and np.any(np.asarray(goals.aim)):
            return None
        if pose is not None and pose.rotations.shape[0] != 1:
            return None
        if kernel.covers(skel, st, limits=True, stretch=True):
            return self._one_frame_compiled(goals, pose)
        e = skel.n_effectors
        w_pos = check_weights(goals.position_weight, 1.0, e, "position_weight")
        w_rot = check_weights(goals.rotation_weight, 0.0, e, "rotation_weight")
        key = w_pos.tobytes() + w_rot.tobytes()
        if key not in self._fast:
            fast: list[FrameSolver] | None = None
            if unsupported(skel, st) is None:
                weighted = (w_pos > 0) | (w_rot > 0)
                found: list[FrameSolver] = []
                for tree in self.trees_all:
                    if not np.any(weighted[tree]):
                        break  # a tree of zero-weight goals: the batched loop
                    if len(self.trees_all) == 1:
                        found.append(FrameSolver(skel, st, w_pos, w_rot))
                        continue
                    keep = np.zeros(e, dtype=bool)
                    keep[tree] = True
                    dofs = skel.dof_moves[tree].any(axis=0)
                    wp, wr = np.where(keep, w_pos, 0.0), np.where(keep, w_rot, 0.0)
                    found.append(FrameSolver(skel, st, wp, wr, dofs, bool(np.any(w_rot > 0))))
                else:
                    fast = found
            self._fast[key] = fast
        solvers = self._fast[key]
        if solvers is None:
            return None
        start = pose if pose is not None else Pose.rest(skel.n_bones)
        if start.rotations.shape[1] != skel.n_bones:
            raise SettingsError(
                f"the start pose has {start.rotations.shape[1]} bones, the skeleton {skel.n_bones}"
            )
        start = straighten(skel, prepare_goals(goals, e, self._goal_memo), start)  # as ``solve``
        rotation = None if goals.rotation is None else np.asarray(goals.rotation, dtype=float)[0]
        base = None if goals.base is None else np.asarray(goals.base, dtype=float)
        if base is not None and base.ndim == 3:
            base = base[0]
        trees = self.trees_all
        if len(solvers) == 1:
            result = solvers[0].solve(position[0], rotation, base, start)
            result.trees = trees
        else:
            result = _one_frame_merge(
                skel, start, trees, [fs.solve(position[0], rotation, base, start) for fs in solvers]
            )
        return self._with_status(
            result, w_pos, w_rot, lambda: prepare_goals(goals, e, self._goal_memo)
        )

    def _with_status(
        self, result: SolveResult, w_pos: Array, w_rot: Array, g: Callable[[], PreparedGoals]
    ) -> SolveResult:
        """``result`` with each goal's status (``solve.goal_status``; ``g`` gives the prepared
        goals it needs when a goal is not met)."""
        st, e = self.settings, self.skeleton.n_effectors
        met = (result.position_error[0] <= st.tolerance) | (w_pos <= 0)
        met &= (result.rotation_error[0] <= st.rotation_tolerance) | (w_rot <= 0)
        if met.all():
            result.goal_status = np.full((1, e), "met")
        else:
            result.goal_status = goal_status(self.skeleton, g(), result, st)
        return result

    def _one_frame_compiled(self, goals: Goals, pose: Pose | None) -> SolveResult | None:
        """One frame by the compiled loop, each IK tree's problem and plan prepared once and
        the trees' loops run on buffers kept from call to call (``kernel.OneFrame``): the same
        loop calls on the same arrays as ``solve`` makes, so the same result bit for bit,
        without ``solve``'s set-up per call (most of a live update's solve: docs/solver-api.md).
        None when the compiled loop does not cover the goals (``solve`` then runs), or hands
        the frame back to the numpy loop."""
        skel = self.skeleton
        g = prepare_goals(goals, skel.n_effectors, self._goal_memo)
        start = pose if pose is not None else Pose.rest(skel.n_bones)
        check_start(skel, start)
        if self.settings.keep_limits and np.any(skel.dof_limited):
            start = start.copy()
            skel.clamp_to_limits(start)  # as ``solve`` starts: at the limits
        start = straighten(skel, g, start)  # as ``solve`` starts: goals out of reach straight
        seen = self._lin_seen  # (read once: another thread may replace it)
        if g.lin is not seen[0]:  # (the memo's array while the transform holds)
            seen = self._lin_seen = (g.lin, bool((g.lin == np.eye(3)).all()))
        identity = seen[1]
        key = g.w_pos.tobytes() + g.w_rot.tobytes() + bytes([identity]) + self._caps(g)
        if key not in self._compiled:
            self._compiled[key] = self._kernel_trees(g, start)
        compiled = self._compiled[key]
        if compiled is None:
            return None
        # one thread at a time in the trees' buffers (a render solves its frames from its own
        # thread while live posing solves in Blender's)
        with self._lock:
            for t in compiled.trees:
                t.problem.settings = t.settings  # (as ``_problem`` sets it: the cache is shared)
            try:
                if not compiled.batch.run(g, start):
                    return None
            except kernel.KernelUnavailable:
                return None
            result = _one_frame_result(compiled, self.trees_all, start, skel.n_effectors)
        return self._with_status(result, g.w_pos, g.w_rot, lambda: g)

    def _caps(self, g: PreparedGoals) -> bytes:
        """The trees' capped LM damping (``solve.tree_settings``) where the cap bites: part of
        the compiled trees' cache key (their plans hold it), empty when none does (at once when
        even the shortest goal's reach is long enough: live posing calls this every update)."""
        st = self.settings
        if st.method != "lm":
            return b""
        if self._shortest is None:
            reach = self.skeleton.chain_reach()[0]
            self._shortest = float(np.min(reach[reach > 0], initial=np.inf))
        lin = g.lin[0].tobytes()
        if lin == self._uncapped:
            return b""
        if lm_cap(st, self._shortest, g.lin[0]) >= lm_w_bar(st):
            self._uncapped = lin  # (the armature's transform of the last call, as a rule)
            return b""
        own = [tree_settings(st, self.skeleton, g, tree) for tree in self.trees_all]
        if all(o is st for o in own):
            return b""
        return repr([o.params.get("w_bar") for o in own]).encode()

    def _kernel_trees(self, g: PreparedGoals, start: Pose) -> _Compiled | None:
        """Each IK tree's skeleton and bones for goals weighted as ``g``, as ``solve`` splits
        them (one tree: the whole skeleton), and their compiled-loop plans in a
        ``kernel.OneFrame``; None when the compiled loop does not cover one of them."""
        skel, st = self.skeleton, self.settings
        method = st.make_method()
        if kernel.plan(_problem(skel, g, st), method, g, start, False) is None:
            return None  # (``solve`` would not run the compiled loop)
        whole = len(self.trees_all) == 1
        found, plans = [], []
        for tree in self.trees_all:
            if whole:
                sub, bones, solved = skel, np.arange(skel.n_bones), np.ones(skel.n_bones, bool)
            else:
                sub, bones, solved = skel.subtree(tree)
            gs = g if whole else g.select(tree)
            begin = start.of_bones(bones)
            own = tree_settings(st, sub, gs)
            problem = _problem(sub, gs, own)
            plan = kernel.plan(problem, own.make_method(), gs, begin, False)
            if plan is None:
                return None
            into, out = bones[solved], np.flatnonzero(solved)
            found.append(_KernelTree(tree, bones, into, out, problem, own))
            plans.append((problem, plan, np.asarray(tree, dtype=np.intp), bones))
        batch = kernel.OneFrame(plans)
        at = [b0 + t.out for t, (_, _, b0, _) in zip(found, batch.spans, strict=True)]
        into = np.concatenate([t.into for t in found])
        return _Compiled(found, batch, into, np.concatenate(at))


class _KernelTree(NamedTuple):
    """One IK tree as the compiled one-frame path solves it."""

    effectors: NDArray[np.intp]
    bones: NDArray[np.intp]  # its skeleton's bones among the armature's (``Skeleton.subtree``)
    into: NDArray[np.intp]  # the bones it solves, among the armature's
    out: NDArray[np.intp]  # and among its own
    problem: Any  # its ``solve._problem``
    settings: Settings  # ``solve.tree_settings``: the solver's, LM's w_bar capped by its reach


class _Compiled(NamedTuple):
    """The compiled one-frame path of goals weighted one way: the IK trees, their loops'
    buffers, and where each bone they solve is in the armature (``into``) and in the buffers
    (``solved``)."""

    trees: list[_KernelTree]
    batch: kernel.OneFrame
    into: NDArray[np.intp]
    solved: NDArray[np.intp]


def _one_frame_result(
    compiled: _Compiled, trees_all: list[NDArray[np.intp]], start: Pose, n_effectors: int
) -> SolveResult:
    """The ``SolveResult`` ``solve`` builds of the trees' loops (their last run): one tree's as
    it is, several merged as ``solve.combine_trees`` merges them (``solve.trees_record``)."""
    batch, count = compiled.batch, len(compiled.trees)
    reasons = REASONS[np.minimum(batch.reason, 6)]  # (T, 1)
    pos, rot = np.zeros((1, n_effectors)), np.zeros((1, n_effectors))
    pos[0, batch.effectors], rot[0, batch.effectors] = batch.pos, batch.rot
    if count == 1:
        last = int(batch.last[0, 0])
        pose = Pose(
            batch.rotations[None].copy(), start.locations.copy(), batch.stretch[None].copy()
        )
        result = SolveResult(
            pose,
            pos,
            rot,
            batch.iterations[0].copy(),
            reasons[0],
            batch.history[0, : last + 1].copy(),
            0.0,
        )
        result.trees = trees_all
        return result
    pose = start.copy()
    pose.rotations[0, compiled.into] = batch.rotations[compiled.solved]
    pose.stretch[0, compiled.into] = batch.stretch[compiled.solved]
    # ``trees_record`` of one frame: the first tree's reason that is not "converged", the
    # most iterations, each tree's history held at its last row and the squares added tree by
    # tree (a sum over the first axis adds its rows in order: the same numbers bit for bit)
    first = int(np.argmax(reasons[:, 0] != "converged"))
    ends = batch.last[:, 0]
    rows = np.minimum(np.arange(int(ends.max()) + 1), ends[:, None])  # (T, K)
    held = batch.history[np.arange(count)[:, None], rows]  # (T, K, 1)
    hist = np.sqrt((held**2).sum(axis=0))
    result = SolveResult(pose, pos, rot, batch.iterations.max(axis=0), reasons[first], hist, 0.0)
    result.trees, result.tree_reason = trees_all, reasons
    return result


def _one_frame_merge(
    skel: Skeleton, start: Pose, trees: list[NDArray[np.intp]], parts: list[SolveResult]
) -> SolveResult:
    """One frame's result from its trees' (each bone and goal from the tree that solves it),
    laid out as ``solve`` lays out its trees."""
    pose = start.copy()
    n_eff = skel.n_effectors
    pos, rot = np.zeros((1, n_eff)), np.zeros((1, n_eff))
    for tree, part in zip(trees, parts, strict=True):
        bones = np.unique(skel.dof_bone[skel.dof_moves[tree].any(axis=0)])
        pose.rotations[:, bones] = part.pose.rotations[:, bones]
        pos[:, tree], rot[:, tree] = part.position_error[:, tree], part.rotation_error[:, tree]
    return combine_trees(trees, parts, pose, pos, rot)
