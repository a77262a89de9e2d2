"""The converge-mode loop compiled with numba, for the problems most rigs pose.

``solve.py``'s ``_iterate`` runs every frame of an IK tree as rows of numpy arrays; on small
chains its cost is numpy's call overhead (about 100 calls an iteration), not arithmetic. This
module runs the same loop per frame inside one compiled function: forward kinematics, errors,
the stop tests (converged, at the goals' lower bounds, stagnation, divergence, the iteration
cap, a stationary point, the saddle kick, a tiny step, NaN), rejection of rising steps and the
damped step J^T (J J^T + lambda^2 I)^-1 e by Cholesky, with the best pose kept. Same rules,
same order: results equal ``_iterate``'s to rounding (tests/solvers/test_kernel.py).

It covers converge mode, the four methods whose step is a damped solve with
lambda^2 = a E_k + b (``dls``, ``lm``, ``lm_constant``, ``lm_chan_lawrence``; ``lm`` is the
default), rotational DOFs (ball joints, hinges, two-axis joints, stiffness), stretch DOFs (IK
stretch: the main loop only, clamped into their range as the numpy loop clamps them) and
position and orientation goals. Everything else (location DOFs, poles and other secondary
goals, aim goals, balance, null-space terms, clamping, Jacobians at the targets, track mode, the
other methods) runs the numpy loop: ``plan`` says None. A frame whose normal matrix is not
positive definite (lambda = 0 at a singularity) is handed back to the numpy loop too, and so is,
on a rig with joint limits, a frame whose solve ends outside them (``iterate``): a frame the
compiled loop solves within the limits keeps that solve (the numpy loop clamps each step and
locks a DOF that hits its limit). Joint limits that seldom bind (knees and elbows) so cost
little; a rig with IK limits on its shins and forearms went through the numpy loop every frame,
7-20x the compiled loop's time on zoo humanoids (benchmarks/blas_threads.py --limits).

A second compiled loop, ``hold``, runs goal priority's null-space steps (solvers/priority.py,
(B)) per frame with the same pieces (forward kinematics, errors, Jacobian over every DOF that
moves a goal, Cholesky): the same steps as priority's numpy loop, equal to rounding
(tests/solvers/test_priority.py); it compiles at its first use, on the first rig whose goals
have two levels (about 20-40 s, then cached like the first). A third, ``smooth_passes``, runs
the jitter smoothing's passes (solvers/smooth.py) frame by frame: the step toward the cubic,
its projection onto the goal rows' null space and the minimum-norm step that puts the
effectors back (position rows in model space as numpy forms them: the same damped matrix; on
the rows of the trees that move at the frame: J J^T has a block per tree), the tests and
what each tree keeps; compiled the first time a bake smooths (about 30 s, cached).

numba is optional: the extension zip carries its wheels where they exist (README), and without
it, or with ``JACOBIAN_IK_KERNEL=0`` in the environment, every problem runs the numpy loop. The
first call compiles the kernel (20-35 s, once per install: ``cache=True`` keeps it on disk in
``CACHE_DIR``, from where later sessions load it in about 0.6 s). An installed add-on has a
child process per loop build them into ``CACHE_DIR`` when it is enabled (solvers/warmup.py); a
first call waits for its child (``BEFORE_COMPILE``) rather than compile beside it. Never in a
thread of this process: a compile in a background thread beside Blender's own work crashed a
test process once.
"""

from __future__ import annotations

import hashlib
import math
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import NDArray

from .curvature import twist_dofs
from .skeleton import ROT_POST, ROT_PRE, STRETCH, Pose, dof_order
from .stops import (
    BOUND_SLACK,
    CONVERGED,
    DIVERGED,
    FAILED,
    KICK,
    MAX_ITERATIONS,
    MIN_STEP_SCALE,
    RAISES,
    RUNNING,
    SETTLED,
    STAGNATED,
    STATIONARY,
)

Array = NDArray[np.float64]

numba: Any
try:  # numba is optional; the numpy loop is the fallback
    import numba  # type: ignore[import-untyped, no-redef, unused-ignore]
except ImportError:  # pragma: no cover - depends on the installation
    numba = None

DAMPING = {  # method: (a, b) of lambda^2 = a E_k + b from its parameters
    "dls": lambda p: (0.0, p["damping"] ** 2),
    "lm": lambda p: (1.0, p["w_bar"]),
    "lm_constant": lambda p: (0.0, p["w_n"]),
    "lm_chan_lawrence": lambda p: (p["w_n_factor"], 0.0),
}

FALLBACK = 7  # not a reason (stops.REASONS): the frame goes back to the numpy loop


def enabled() -> bool:
    """Whether the compiled loop can run here (numba imported, not switched off, not broken)."""
    return numba is not None and not BROKEN and os.environ.get("JACOBIAN_IK_KERNEL", "1") != "0"


@dataclass
class Plan:
    """The compiled loop's view of one IK tree's problem: the method's damping and the arrays
    that stay fixed over the frames (kept on the problem, which ``solve._problem`` caches)."""

    lam_a: float
    lam_b: float
    rig: Rig  # the kernel's arrays that stay fixed over the frames


def covers(skel: Any, st: Any, limits: bool = False, stretch: bool = False) -> bool:
    """Whether the compiled loop covers this skeleton and these settings (the goals may still
    ask for what it does not: poles, aim goals, balance; see ``plan``); with ``limits`` (as
    every loop asks: ``_outside``), also when joint limits are kept: the loops have none, and
    hand back, or leave as they were, the frames they end outside them. With ``stretch``, also
    stretch DOFs (IK stretch): the main loop has them, goal priority's and the smoothing's
    loops do not."""
    if st.method not in DAMPING or st.mode != "converge":
        return False
    if not _covers_rig(skel, st, limits, stretch):
        return False
    if st.nullspace != "none" and (st.rest_weight > 0 or st.limit_weight > 0):
        return False
    return st.clamp_distance is None and st.max_step is None and not st.jacobian_at_targets


def _covers_rig(skel: Any, st: Any, limits: bool = False, stretch: bool = False) -> bool:
    """Whether the kernel runs here and its pieces cover the skeleton: rotational DOFs only
    (and stretch DOFs with ``stretch``), no limit to keep (unless ``limits``)."""
    if not enabled():
        return False
    kinds = skel.__dict__.get("_kernel_kinds")
    if kinds is None:  # (rotational DOFs only, no location DOF, any limited DOF), kept
        rotational = (skel.dof_kind == ROT_PRE) | (skel.dof_kind == ROT_POST)
        kinds = skel.__dict__["_kernel_kinds"] = (
            bool(np.all(rotational)),
            bool(np.all(rotational | (skel.dof_kind == STRETCH))),
            bool(np.any(skel.dof_limited)),
        )
    return kinds[1 if stretch else 0] and (limits or not (st.keep_limits and kinds[2]))


def plan(problem: Any, method: Any, goals: Any, start: Pose, track: bool) -> Plan | None:
    """A ``Plan`` when the compiled loop covers this problem, else None (use ``_iterate``)."""
    if track or not covers(problem.skel, problem.settings, limits=True, stretch=True):
        return None
    if problem.use_nullspace or problem.aim.size or problem.balance or problem.sec_rows.size:
        return None
    if goals.on is not None or problem.rows.size == 0:
        return None
    lam_a, lam_b = DAMPING[method.name](method.params)
    return Plan(float(lam_a), float(lam_b), _rig(problem))


def _rig(problem: Any) -> Rig:
    """The kernel's fixed arrays of a problem, made once and kept on the problem."""
    rig = problem.__dict__.get("_kernel_rig")
    if rig is None:
        rig = problem.__dict__["_kernel_rig"] = _make_rig(problem)
    return rig


def _make_rig(problem: Any) -> Rig:
    skel = problem.skel
    parity = (skel.depth[skel.dof_bone] + skel.dof_axis) % 2 == 0
    return Rig(
        skel.parents.astype(np.intp),
        np.argsort(skel.depth, kind="stable").astype(np.intp),
        np.ascontiguousarray(skel.rest_rot, dtype=np.float64),
        skel.dof_bone.astype(np.intp),
        skel.dof_axis.astype(np.intp),
        skel.dof_kind == ROT_PRE,
        skel.dof_kind == STRETCH,
        (skel.dof_kind == STRETCH) & skel.dof_limited & bool(problem.settings.keep_limits),
        skel.dof_min.astype(np.float64),
        skel.dof_max.astype(np.float64),
        skel.dof_weight.astype(np.float64),
        np.where(parity, 1.0, -1.0),
        np.ascontiguousarray(skel.dof_moves, dtype=np.bool_),
        skel.eff_bone.astype(np.intp),
        np.ascontiguousarray(skel.eff_offset, dtype=np.float64),
        np.ascontiguousarray(skel.eff_stretches, dtype=np.bool_),
        problem.rows.astype(np.intp),
        problem.sqrt_w.astype(np.float64),
        problem.use_pos.astype(np.bool_),
        problem.reach.astype(np.float64),
        problem.inner.astype(np.float64),
        problem.reach_base.astype(np.intp),
        (problem.base_fixed & (problem.reach > 0)).astype(np.bool_),
        dof_order(skel),
        twist_dofs(skel),
    )


def iterate(problem: Any, p: Plan, goals: Any, start: Pose) -> Out:
    """Run the compiled loop over every frame; the raw per-frame results (``solve.py`` turns
    them into a ``SolveResult`` and re-solves the frames marked FALLBACK with numpy).
    ``Out.stretch`` holds the stretch each frame ends with (the start's plus the loop's
    steps). One frame of several trees, call after call: ``OneFrame``."""
    st = problem.settings
    frames, n_eff = goals.frames, problem.skel.n_effectors
    out = Out(
        np.array(start.rotations, dtype=np.float64, order="C"),
        np.zeros((frames, n_eff)),
        np.zeros((frames, n_eff)),
        np.zeros(frames, dtype=np.intp),
        np.zeros(frames, dtype=np.intp),
        # (only the rows up to the last iteration are written and kept: np.empty does not touch
        # the rest, which matters for caps of thousands of iterations)
        np.empty((st.max_iterations + 1, frames)),
        np.zeros(frames, dtype=np.intp),
        np.array(start.stretch, dtype=np.float64, order="C"),
    )
    rules = _rules(problem, goals, p.lam_a, p.lam_b)
    # the problem's last seconds a frame (one thread's) tell whether a batch is worth splitting
    rate = problem.__dict__.get("_kernel_rate")
    threads = min(THREADS, frames // CHUNK)
    if threads > 1 and (frames * rate < SPLIT_SECONDS if rate is not None else frames < SPLIT):
        threads = 1
    t0 = time.perf_counter()
    used = _call_frames(
        p.rig, _frames(problem, goals, start), rules, out, threads, problem.__dict__
    )
    if frames:
        problem.__dict__["_kernel_rate"] = (time.perf_counter() - t0) * used / frames
    out.reason[_outside(problem, out.rotations, start, out.stretch)] = FALLBACK  # numpy: limits
    return out


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity where the system has one)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # (macOS, Windows)
        return os.cpu_count() or 1


MAX_THREADS = 8


def set_threads(count: int) -> None:
    """The threads the compiled loop may use from now on (1 to ``MAX_THREADS``)."""
    global THREADS
    THREADS = max(1, min(int(count), MAX_THREADS))


THREADS = 1
"""Threads the compiled loop runs a batch's frames on (``_call_frames``): the CPUs this
process may use (``JACOBIAN_IK_THREADS`` where set), at most ``MAX_THREADS``; a bake in Blender
sets it to the scene's render threads (``bridge.run``: Blender's Performance setting, which
follows ``blender -t N``). Frames are independent (each starts from its own pose and writes
what it reads of the working arrays), so every count gives the same numbers bit for bit."""
set_threads(int(os.environ.get("JACOBIAN_IK_THREADS", "0")) or usable_cpus())
CHUNK = 4
"""Frames a thread takes at a time, at least."""
SPLIT = 256
"""A batch of a problem not timed yet is split from this many frames on."""
SPLIT_SECONDS = 3e-3
"""A batch is split when the problem's last batch (``iterate``) says it takes this long on one
thread: a chunk costs about 15 us to hand over (numba's dispatch), and the limbs' batches
(about 1-2 ms each) gained nothing from splitting on two cores (15 captured zoo bakes of seed
7777, limbs and tentacles: within the runs' 10 % noise)."""
SHARES = 4
"""Chunks a thread, about: frames out of reach take a hundred times the iterations of the
others and come in runs, so equal shares of a batch are not equal work."""
_POOL: list[Any] = []  # (threads, executor) once made


def stop_threads() -> None:
    """Let the threads of the pool go (the add-on's unregister); a later split makes a new one."""
    with _LOCK:
        _drop_pool()


def _drop_pool() -> None:
    """Shut the pool down, if there is one, without waiting for its work (``_LOCK`` held)."""
    if _POOL:
        _POOL.pop()[1].shutdown(wait=False)


def _executor(threads: int) -> Any:
    """A pool of ``threads`` workers, made once per count."""
    from concurrent.futures import ThreadPoolExecutor

    with _LOCK:
        if not _POOL or _POOL[0][0] != threads:
            _drop_pool()
            _POOL.append((threads, ThreadPoolExecutor(threads, "jacobian_ik_kernel")))
        return _POOL[0][1]


def _call_frames(
    rig: Rig,
    frames: Frames,
    rules: Rules,
    out: Any,
    threads: int,
    memo: dict[str, Any],
    held: Held | None = None,
) -> int:
    """``_call`` of the main loop (or, with ``held``, of the null-space steps' loop ``hold``)
    on every frame, the frames in chunks across ``threads`` threads (numba's ``nogil``: the
    loop runs without Python's lock): about ``SHARES`` chunks a thread, so a thread that drew
    frames of many iterations (out of reach) does not hold up the others, each chunk's arrays
    contiguous views of the batch's (the main loop's residual history its own, copied back).
    One thread, or the loop not loaded yet (the first call compiles or loads it, on the calling
    thread): ``_call``. ``memo``: the problem's, where the check that the chunks' argument
    types were compiled is kept (numba's ``typeof`` of the arguments costs about 0.3 ms).
    Returns the threads used."""
    loop = 0 if held is None else 1
    before = () if held is None else (held,)  # (``_hold_loop`` takes it before ``out``)
    count = len(out.rotations)
    compiled = _COMPILED.get(loop)
    if threads < 2 or compiled is None or BROKEN:
        _call(rig, frames, rules, *before, out, loop=loop)
        return 1
    size = max(CHUNK, -(-count // (SHARES * threads)))
    parts = []
    for a, b in [(a, min(a + size, count)) for a in range(0, count, size)]:
        part: Out | HeldOut
        if held is None:
            part = Out(
                out.rotations[a:b],
                out.pos[a:b],
                out.rot[a:b],
                out.iterations[a:b],
                out.reason[a:b],
                np.empty((out.history.shape[0], b - a)),
                out.last[a:b],
                out.stretch[a:b],
            )
        else:  # (every array of the steps' results is the frames')
            part = HeldOut(*(x[a:b] for x in out))
        parts.append((a, b, Frames(*(x[a:b] for x in frames)), part))
    # the chunks run the loop the calling thread loaded for these argument types: never a
    # compile on a worker thread (one beside Blender's own work crashed a process once)
    key = f"_kernel_split{loop}"
    if key not in memo:  # (a problem's arrays keep their dtypes and layouts)
        first = (rig, parts[0][2], rules, *before, parts[0][3])
        memo[key] = tuple(compiled.typeof_pyval(a) for a in first)
    if memo[key] not in compiled.overloads:
        _call(rig, frames, rules, *before, out, loop=loop)
        return 1
    try:  # (a failure is not expected: the types of the call that loaded the loop; a pool
        # let go by the add-on's unregister on another thread refuses new work)
        pool = _executor(THREADS)
        jobs = [pool.submit(compiled, rig, fr, rules, *before, part) for _, _, fr, part in parts]
        for job in jobs:
            job.result()
    except Exception as exc:  # the caller solves the batch with numpy from its start poses
        raise KernelUnavailable(f"{type(exc).__name__}: {exc}") from exc
    for a, b, _, part in parts:
        if isinstance(part, Out):
            used = int(part.last.max()) + 1
            out.history[:used, a:b] = part.history[:used]
    return threads


def _outside(
    problem: Any, rotations: Array, start: Pose, stretch: Array | None = None
) -> NDArray[np.bool_]:
    """(F,) the frames whose ``rotations`` (and ``stretch``, else the start's) are outside the
    skeleton's joint limits (where the settings keep them): the compiled loops have none, so
    those frames are handed back."""
    skel = problem.skel
    if not (problem.settings.keep_limits and np.any(skel.dof_limited)):
        return np.zeros(len(rotations), dtype=bool)
    stretch = start.stretch if stretch is None else stretch
    coords = skel.coordinates(Pose(rotations, start.locations, stretch), limited=True)
    return np.asarray(np.any(skel.violations(coords), axis=1))


def _frames(problem: Any, goals: Any, start: Pose) -> Frames:
    """The per-frame inputs: the start pose's local positions and the goals."""
    local_pos, eff_shift = _start_local(problem.skel, start.locations, start.stretch)
    lin_min = np.ones(goals.frames)
    if problem.bounded and not problem.identity_base:
        lin_min = np.linalg.svd(goals.lin, compute_uv=False)[:, -1]
    return Frames(
        local_pos,
        eff_shift,
        _writable(goals.position),
        _writable(goals.rotation_model),
        _writable(goals.lin),
        _writable(goals.trans),
        _writable(goals.targets_model()),
        _writable(lin_min),
        _writable(start.stretch),
    )


def _start_local(skel: Any, locations: Array, stretch: Array) -> tuple[Array, Array]:
    """(F, B, 3) the bones' heads in their parents' frames and (F, E) the stretch of each
    effector's bone, of a start pose's ``locations`` and ``stretch``."""
    has_parent = skel.parents >= 0
    local_pos = skel.rest_pos[None] + np.einsum("bij,fbj->fbi", skel.rest_rot, locations)
    local_pos[:, has_parent, 1] += stretch[:, skel.parents[has_parent]]
    eff_shift = np.where(skel.eff_stretches[None], stretch[:, skel.eff_bone], 0.0)
    return _writable(local_pos), _writable(eff_shift)


class OneFrame:
    """One frame of several IK trees by the compiled loop (live posing: one call an update),
    each tree's inputs and outputs views of buffers kept from call to call: per tree the loop
    call ``iterate`` makes, on the same numbers (the same results bit for bit), without making
    its arrays, selecting its goals and slicing its start pose tree by tree every call (most of
    a live update's solve on Rigify's meta-rig with five goals). ``trees``: each tree's
    ``(problem, plan, effectors, bones)``, its goals and bones among the skeleton's. A ``run``
    overwrites the last one's results; not for two threads at once."""

    def __init__(self, trees: list[tuple[Any, Plan, NDArray[np.intp], NDArray[np.intp]]]) -> None:
        self.trees = trees
        self.effectors = np.concatenate([t[2] for t in trees])
        self.bones = np.concatenate([t[3] for t in trees])
        e_at = np.cumsum([0] + [len(t[2]) for t in trees])
        b_at = np.cumsum([0] + [len(t[3]) for t in trees])
        self.spans = [
            (int(e_at[k]), int(e_at[k + 1]), int(b_at[k]), int(b_at[k + 1]))
            for k in range(len(trees))
        ]
        n_eff, n_bones, count = len(self.effectors), len(self.bones), len(trees)
        self.target, self.tm = np.zeros((n_eff, 3)), np.zeros((n_eff, 3))
        self.rot_target = np.zeros((n_eff, 3, 3))
        self.lin, self.trans = np.zeros((1, 3, 3)), np.zeros((1, 3))
        self.lin_min = np.ones((count, 1))
        self.local_pos, self.eff_shift = np.zeros((n_bones, 3)), np.zeros(n_eff)
        self.start_stretch, self.stretch = np.zeros(n_bones), np.zeros(n_bones)
        self.rotations = np.zeros((n_bones, 3, 3))
        self.pos, self.rot = np.zeros(n_eff), np.zeros(n_eff)
        self.iterations = np.zeros((count, 1), dtype=np.intp)
        self.reason = np.zeros((count, 1), dtype=np.intp)
        self.last = np.zeros((count, 1), dtype=np.intp)
        self.history = np.empty((count, max(t[0].settings.max_iterations for t in trees) + 1, 1))
        self.frames: list[Frames] = []
        self.outs: list[Out] = []
        for k, (e0, e1, b0, b1) in enumerate(self.spans):
            self.frames.append(
                Frames(
                    self.local_pos[None, b0:b1],
                    self.eff_shift[None, e0:e1],
                    self.target[None, e0:e1],
                    self.rot_target[None, e0:e1],
                    self.lin,
                    self.trans,
                    self.tm[None, e0:e1],
                    self.lin_min[k],
                    self.start_stretch[None, b0:b1],
                )
            )
            self.outs.append(
                Out(
                    self.rotations[None, b0:b1],
                    self.pos[None, e0:e1],
                    self.rot[None, e0:e1],
                    self.iterations[k],
                    self.reason[k],
                    self.history[k, : trees[k][0].settings.max_iterations + 1],
                    self.last[k],
                    self.stretch[None, b0:b1],
                )
            )
        self.limited = [
            bool(problem.settings.keep_limits and np.any(problem.skel.dof_limited))
            for problem, *_ in trees
        ]
        self.bounded = [bool(p.bounded and not p.identity_base) for p, *_ in trees]
        self.rules: list[Rules] | None = None
        self.start_key: bytes | None = None
        self.loaded: list[Any] | None = None  # each tree's compiled loop (``_overloads``), once

    def run(self, goals: Any, start: Pose) -> bool:
        """Solve one frame of ``goals`` (the skeleton's, prepared) from ``start``: each tree's
        results in ``rotations`` and ``stretch`` (in the order of ``bones``), ``pos`` and
        ``rot`` (of ``effectors``), and per tree ``iterations``, ``reason``, ``history`` up to
        ``last``. False when a tree's frame goes back to numpy (FALLBACK: it ends outside its
        joint limits, which the compiled loop does not keep); raises KernelUnavailable."""
        if self.rules is None:  # (the trees' stop rules, as ``iterate`` makes them)
            self.rules = [
                _rules(problem, goals.select(eff), plan.lam_a, plan.lam_b)
                for problem, plan, eff, _ in self.trees
            ]
        key = start.locations.tobytes() + start.stretch.tobytes()
        if key != self.start_key:
            for (problem, _, _, bones), (e0, e1, b0, b1) in zip(
                self.trees, self.spans, strict=True
            ):
                local_pos, eff_shift = _start_local(
                    problem.skel, start.locations[:, bones], start.stretch[:, bones]
                )
                self.local_pos[b0:b1], self.eff_shift[e0:e1] = local_pos[0], eff_shift[0]
            self.start_key = key
        eff, bones = self.effectors, self.bones
        self.target[:] = goals.position[0, eff]
        self.rot_target[:] = goals.rotation_model[0, eff]
        self.lin[:], self.trans[:] = goals.lin, goals.trans
        self.tm[:] = goals.targets_model()[0, eff]  # (each goal's alone: a tree's are its own)
        if any(self.bounded):
            lowest = np.linalg.svd(goals.lin, compute_uv=False)[:, -1]
            self.lin_min[:, 0] = np.where(self.bounded, lowest[0], 1.0)
        self.rotations[:] = start.rotations[0, bones]
        self.start_stretch[:] = start.stretch[0, bones]
        self.stretch[:] = self.start_stretch
        calls = [
            (plan.rig, frames, rules, out)
            for (_, plan, _, _), frames, rules, out in zip(
                self.trees, self.frames, self.rules, self.outs, strict=True
            )
        ]
        if self.loaded:  # the same arrays every call, so the same types: the loops numba chose
            for compiled, args in zip(self.loaded, calls, strict=True):
                compiled.entry_point(*args)
        else:
            for args in calls:
                _call(*args)
            if self.loaded is None:
                self.loaded = _overloads(calls)
        for (problem, _, _, tree_bones), out, limited in zip(
            self.trees, self.outs, self.limited, strict=True
        ):
            if limited:
                begin = Pose(
                    start.rotations[:, tree_bones],
                    start.locations[:, tree_bones],
                    start.stretch[:, tree_bones],
                )
                out.reason[_outside(problem, out.rotations, begin, out.stretch)] = FALLBACK
        return not (self.reason == FALLBACK).any()


def _overloads(calls: list[tuple[Any, ...]]) -> list[Any]:
    """The compiled loop's overload (numba's ``CompileResult``) for each call's argument
    types, or none when one is missing (``OneFrame`` then calls through ``_call``). Called
    once per ``OneFrame``, whose arguments are the same arrays at every call: later calls go
    to the overloads' entry points, without numba's dispatch (it types each of the ~50 arrays
    of the tuples every call: 11 against 6 us a tree on Rigify's meta-rig)."""
    compiled = _COMPILED.get(0)
    if compiled is None or BROKEN:
        return []
    found = []
    for args in calls:
        overload = compiled.overloads.get(tuple(compiled.typeof_pyval(a) for a in args))
        if overload is None:
            return []
        found.append(overload)
    return found


def _rules(problem: Any, goals: Any, lam_a: float, lam_b: float) -> Rules:
    """The stop rules of the settings and the method's damping."""
    st = problem.settings
    tol_pos, tol_rot = problem.tolerances(goals)
    return Rules(
        bool(problem.any_rot),
        bool(problem.identity_base),
        _writable(tol_pos[0]),
        _writable(tol_rot[0]),
        bool(problem.bounded),
        lam_a,
        lam_b,
        int(st.max_iterations),
        float(st.tolerance),
        float(st.gradient_tolerance),
        bool(st.reject_rising_steps),
        float(st.stagnation),
        float(st.step_tolerance),
        int(st.divergence_count),
        bool(st.second_order),
    )


def _writable(a: Any) -> Any:
    """``a`` as a C-contiguous, writable array: numba compiles the kernel once per array type,
    and a read-only array (a one-frame broadcast, which ``np.ascontiguousarray`` passes through)
    is another type, another compile."""
    a = np.ascontiguousarray(a)
    return a if a.flags.writeable else a.copy()


_COMPILED: dict[int, Any] = {}
_LOCATOR: list[bool] = []
_LOCK = threading.Lock()
COMPILE_TIME: list[float] = []  # seconds the first call took to compile (or load) the kernel
CACHE_DIR: str | None = None
"""Where numba keeps the compiled kernel: the add-on sets its user folder
(``bpy.utils.extension_path_user``); None: ``__pycache__`` beside this file (development)."""
BROKEN: list[str] = []  # why the kernel could not run here (then every solve uses numpy)
BEFORE_COMPILE: Callable[[int], None] | None = None
"""Called with a loop's number before its first call loads or compiles it: ``warmup.start``
sets its ``wait``, so the loop waits for the child building it rather than compile beside it."""


class KernelUnavailable(RuntimeError):
    """The compiled loop failed to compile or load; the caller runs the numpy loop."""


SOURCES = ("kernel.py", "stops.py")
"""The files whose code or constants the compiled loop is made of: numba stamps a cache with
its function's own file only, and the constants the loop imports (solvers/stops.py) are frozen
into it, so the cache's stamp covers both."""


def source_stamp(folder: str, names: tuple[str, ...] = SOURCES) -> str:
    """sha256 of the files ``names`` in ``folder``, in order: the kernel cache's freshness."""
    digest = hashlib.sha256()
    for name in names:
        with open(os.path.join(folder, name), "rb") as f:
            digest.update(f.read())
    return digest.hexdigest()


def _install_locator() -> None:
    """Keep the kernel's cache in CACHE_DIR, one folder per module name (the same file imported
    under two names must not load the other's cache: it refers to its module by name), stamped
    with ``source_stamp``."""
    from numba.core import caching

    class Locator(caching.UserProvidedCacheLocator):
        def __init__(self, py_func: Any, py_file: str) -> None:
            self._py_file = py_file
            self._lineno = py_func.__code__.co_firstlineno
            base = CACHE_DIR or os.path.join(os.path.dirname(py_file), "__pycache__")
            name = "numba-" + py_func.__module__.replace(".", "_")
            self._cache_path = os.path.join(base, name)

        def get_source_stamp(self) -> str:
            return source_stamp(os.path.dirname(self._py_file))

        @classmethod
        def from_function(cls, py_func: Any, py_file: str) -> Any:
            if py_func not in LOOPS:  # (their pieces are cached with them)
                return None
            locator = cls(py_func, py_file)
            try:
                locator.ensure_cache_path()
            except OSError:
                return None
            return locator

    caching.CacheImpl._locator_classes.insert(0, Locator)


def _kernel(cache: bool = True, loop: int = 0) -> Any:
    """The compiled ``_loop`` (``loop`` 0) or ``_hold_loop`` (1), compiled or loaded once."""
    with _LOCK:
        if loop not in _COMPILED:
            if cache and BEFORE_COMPILE is not None:
                BEFORE_COMPILE(loop)
            if cache and not _LOCATOR:
                _install_locator()
                _LOCATOR.append(True)
            _COMPILED[loop] = numba.njit(cache=cache, **JIT)(LOOPS[loop])
        return _COMPILED[loop]


def _call(*args: Any, loop: int = 0) -> None:
    """The kernel ``loop`` on ``args``; a cache that does not load or a compile error
    recompiles once without the cache, then gives up (KernelUnavailable: numpy from then on)."""
    if BROKEN:
        raise KernelUnavailable(BROKEN[0])
    first = not COMPILE_TIME and loop == 0
    t0 = time.perf_counter() if first else 0.0
    try:
        compiled = _COMPILED.get(loop)  # (the lock only until it is there)
        (_kernel(loop=loop) if compiled is None else compiled)(*args)
    except Exception:  # any failure of numba's machinery means: use numpy
        with _LOCK:
            _COMPILED.pop(loop, None)
        try:
            _kernel(cache=False, loop=loop)(*args)
        except Exception as exc:
            BROKEN.append(f"{type(exc).__name__}: {exc}")
            raise KernelUnavailable(BROKEN[0]) from exc
    if first:
        COMPILE_TIME.append(time.perf_counter() - t0)


# -- the compiled loop --------------------------------------------------------------------
# Plain Python on numpy arrays, one frame at a time: ``_loop`` calls ``_frame`` per frame, which
# calls one function per job of the iteration (no closures, no Python objects: arrays, scalars
# and the tuples below). The cache of ``_loop`` (``_kernel``) holds them all. Without numba they
# stay Python, which nothing relies on.


JIT = {"nogil": True, "error_model": "numpy"}
"""How every loop and piece is compiled. ``error_model="numpy"``: a float division is IEEE's
(x / 0 is inf or NaN, which the loop's finite checks catch) instead of Python's, which tests
the divisor and raises ZeroDivisionError before each of the loop's divisions (and would have
switched the kernel off for the session). The same numbers bit for bit where nothing divides
by zero; without the tests LLVM compiles the loops tighter: the compiled loop 1.3x faster on a
3-bone chain (18.6 against 24.6 us a frame of 7.7 iterations), zoo bakes 7-17 % faster with
bit-identical keys (docs/solver-api.md)."""


def _lean(func: Any) -> Any:
    """``numba.njit(**JIT, _nrt=False)``: a function compiled on its own (a frame's iteration of
    each loop, the parts they call), without numba's runtime, so no reference counts; it only
    reads and writes arrays it is given (none made, none copied by a slice assignment:
    ``_copy1``, ``_copy3``). The loops take their arrays from tuples, and numba counted a
    reference, atomically, on each array a piece took from them and on each array passed into
    an inlined piece: about 2,000 such calls in the compiled frame function, about half of a
    short chain's time (perf on 20,000 frames of a 3-bone chain: 47 % of the samples on the two
    atomic instructions). Without them the frame loop ran 3.3x faster there (18.5 -> 5.5 us a
    frame of 7.7 iterations), the same numbers bit for bit. The loops themselves (``LOOPS``)
    keep the runtime: they make the working arrays. Without numba the plain function."""
    return func if numba is None else numba.njit(**JIT, _nrt=False)(func)


def _piece(func: Any) -> Any:
    """``numba.njit(inline="always", **JIT)``: a job of the iteration, inlined into ``_frame`` in
    numba's IR, so that LLVM optimizes the frame's loop as one function, as when it was written
    as one (compiled on their own and called, the pieces made the solves 1.4 times slower);
    without numba the plain function."""
    return func if numba is None else numba.njit(inline="always", **JIT)(func)


class Rig(NamedTuple):
    """The arrays of one IK tree's problem the kernel reads, fixed over the frames."""

    parents: NDArray[np.intp]
    order: NDArray[np.intp]  # the bones, parents first
    rest_rot: Array
    dof_bone: NDArray[np.intp]
    dof_axis: NDArray[np.intp]
    dof_pre: NDArray[np.bool_]  # the DOF turns the frame before the bone's rotation
    dof_stretch: NDArray[np.bool_]  # the DOF is the bone's stretch (along its Y axis)
    dof_clamp: NDArray[np.bool_]  # a stretch DOF whose limits are kept (clamped each step)
    dof_min: Array
    dof_max: Array
    dof_w: Array
    kick_sign: Array  # the saddle kick's sign per DOF
    dof_moves: NDArray[np.bool_]  # (E, n)
    eff_bone: NDArray[np.intp]
    eff_off: Array
    eff_stretch: NDArray[np.bool_]  # the effector's point moves with its bone's stretch
    rows: NDArray[np.intp]  # the rows of the (E * 6) error that are solved for
    sqrt_w: Array  # their weights' square roots
    use_pos: NDArray[np.bool_]
    reach: Array  # each goal's chain: straight length,
    inner: Array  # folded length,
    reach_base: NDArray[np.intp]  # base bone,
    fixed: NDArray[np.bool_]  # and whether its base is fixed (it has a lower bound)
    dof_rel: NDArray[np.int8]  # (n, n) skeleton.dof_order: how DOF a acts on DOF b
    twist: NDArray[np.bool_]  # (n,) the DOFs the Newton step leaves alone (curvature.twist_dofs)


class Frames(NamedTuple):
    """Per frame (leading axis F): the start pose's local positions and the goals."""

    local_pos: Array  # (F, B, 3)
    eff_shift: Array  # (F, E) stretch of the effectors' bones
    target: Array  # (F, E, 3) world
    rot_target: Array  # (F, E, 3, 3) model space
    lin: Array  # (F, 3, 3) and
    trans: Array  # (F, 3): the model-to-world transform
    tm: Array  # (F, E, 3) targets in model space
    lin_min: Array  # (F,) smallest singular value of lin
    stretch: Array  # (F, B) the start's stretch


class Rules(NamedTuple):
    """The stop rules and the damping lambda^2 = lam_a E_k + lam_b of the step."""

    any_rot: bool  # some goal has an orientation (its error is measured)
    identity: bool  # the model-to-world transform is the identity
    tol_pos: Array  # (E,)
    tol_rot: Array  # (E,)
    bounded: bool  # some goal has a lower bound (``solve._Problem.lower_bound``)
    lam_a: float
    lam_b: float
    max_iter: int
    tol: float
    grad_tol: float
    reject: bool
    stagnation: float
    step_tol: float
    div_count: int
    second: bool  # the damped Newton step on frames whose unmet goals are out of reach


class Out(NamedTuple):
    """The results per frame (``rotations`` holds the start poses on the way in)."""

    rotations: Array
    pos: Array
    rot: Array
    iterations: NDArray[np.intp]
    reason: NDArray[np.intp]
    history: Array  # (max_iter + 1, F), the rows up to ``last`` written
    last: NDArray[np.intp]
    stretch: Array  # (F, B) the start's stretch on the way in, the result's on the way out


class Work(NamedTuple):
    """One frame's working arrays."""

    rot: Array  # (B, 3, 3) the pose
    ds: Array  # (B,) and its stretch less the start's
    colw: Array  # (n,) the DOFs' weights (0: a stretch DOF locked at its limit)
    lock: Array  # (n,) -1 / +1: the DOF is held at its min / max, 0: free
    prev_rot: Array  # the pose before the last step (restored when it is rejected)
    prev_ds: Array
    prev_colw: Array
    prev_lock: Array
    best: Array  # the best pose seen,
    best_ds: Array
    best_pos: Array  # its position
    best_rot: Array  # and orientation errors
    mrot: Array  # (B, 3, 3) model-space frames
    mpos: Array  # (B, 3) and heads
    pts: Array  # (E, 3) effector points
    err: Array  # (E, 6) errors
    pos_e: Array  # (E,) their norms
    rot_e: Array
    jac: Array  # (E * 6, n)
    jw: Array  # (m, n) weighted J~
    ew: Array  # (m,) weighted e~
    normal: Array  # (k, k), k = min(m, n)
    low: Array  # its Cholesky factor
    rhs: Array
    z: Array
    dt: Array  # (n,) the step in weighted coordinates
    dq: Array  # (n,) the step
    tmp: Array  # (3, 3)
    axes: Array  # (n, 3) each DOF's axis (model space)
    hess: Array  # (n, n) the damped Newton step's J~^T J~ + S~,
    low2: Array  # its Cholesky factor,
    grad: Array  # (n,) J~^T e~,
    lever: Array  # (n, 3) w_b x (p - o_b) of one effector,
    turn: Array  # (n, 3) u x w_a,
    uw: Array  # (E, 3) the weighted position errors (model space)


def _loop(rig, frames, rules, out):
    """Every frame in turn (the kernel), with one set of working arrays: each frame writes
    what it reads of them (``_frame`` resets the poses it starts from), and clearing a fresh set
    per frame cost about a quarter of a short solve (the Newton pair alone is n x n twice)."""
    if out.rotations.shape[0] == 0:
        return
    w = _work(rig, out.rotations[0], True)
    for f in range(out.rotations.shape[0]):
        _frame(f, rig, frames, rules, out, w)


@_lean
def _frame(f, rig, fr, ru, out, w):
    """One frame's iteration (``solve._iterate``'s for one frame) in the working arrays ``w``;
    its best pose to ``out``."""
    _restart(rig, w, out.rotations[f])
    best_r = np.inf
    prev_r = np.inf
    prev2_r = np.inf
    rises = 0
    scale = 1.0
    kicks = 0
    why = MAX_ITERATIONS
    it = 0
    for k in range(ru.max_iter + 1):
        undone = False  # this iteration's step was undone (rose): no stagnation test
        for attempt in range(2):
            r2, met = _evaluate(f, rig, fr, ru, w)
            if attempt == 1 or not (ru.reject and k > 0):
                break
            # a step that raised the error is undone and retried at half the length
            rose = math.sqrt(r2) > prev_r and not met
            scale = 0.5 * scale if rose else min(2.0 * scale, 1.0)
            if not rose:
                break
            undone = True
            _undo(w)
        r = math.sqrt(r2)
        out.history[k, f] = r
        out.last[f] = k
        if r < best_r:
            best_r = r
            _keep_best(w)
        if k > 0:
            rises = rises + 1 if r > prev_r else 0
        diverging = rises >= ru.div_count
        stuck = k > 0 and not undone  # (an undone step repeats the residual exactly)
        why, beyond = _stop_tests(f, stuck, k, r, met, prev_r, prev2_r, diverging, rig, fr, ru, w)
        if why != RUNNING:
            it = k
            break
        prev2_r = prev_r
        prev_r = r
        # frames whose one unmet goal is out of reach take the damped Newton step
        # (solvers/curvature.py); after an undone step, the method's own
        newton = ru.second and not met and not undone and beyond and _lone_unmet(ru, w)
        if not _damped_step(r2, newton, f, rig, fr, ru, w):
            why = FALLBACK
            it = k
            break
        stationary, saddle = _stationary(f, r, met, beyond, scale, kicks < 1, rig, fr, ru, w)
        _joint_step(rig, ru, w, scale, stationary, saddle)
        if ru.reject:
            _save(w)
        if saddle:  # the step out of the saddle is kept even where it raises the error
            kicks += 1
            prev_r = np.inf
            scale = 1.0
        _rotate(rig, w)
        _stretch(f, rig, fr, w)
        bad, peak = _finite_peak(w.dq, w.rot)
        if bad:
            why = FAILED
            it = k
            break
        if stationary:
            why = STATIONARY
            it = k
            break
        if peak < ru.step_tol:  # Sugihara's stop (a)
            why = STAGNATED
            it = k + 1
            break
    _copy3(out.rotations[f], w.best)  # (the start poses' array is the output)
    for b in range(w.best_ds.shape[0]):
        out.stretch[f, b] += w.best_ds[b]
    _copy1(out.pos[f], w.best_pos)
    _copy1(out.rot[f], w.best_rot)
    out.iterations[f] = it
    out.reason[f] = why


@_piece
def _copy1(dst, src):
    """dst[:] = src, one entry at a time: numba makes a slice assignment between arrays with
    its runtime (a temporary where they may overlap), which ``_lean`` functions have not."""
    for i in range(dst.shape[0]):
        dst[i] = src[i]


@_piece
def _copy3(dst, src):
    """dst[:] = src for (B, 3, 3) rotations, one entry at a time."""
    for b in range(dst.shape[0]):
        for i in range(3):
            for j in range(3):
                dst[b, i, j] = src[b, i, j]


@_piece
def _undo(w):
    """Back to the pose before the last step (and a limit the step hit is free again)."""
    _copy3(w.rot, w.prev_rot)
    _copy1(w.ds, w.prev_ds)
    _copy1(w.colw, w.prev_colw)
    _copy1(w.lock, w.prev_lock)


@_piece
def _save(w):
    """The pose before a step, for ``_undo``."""
    _copy3(w.prev_rot, w.rot)
    _copy1(w.prev_ds, w.ds)
    _copy1(w.prev_colw, w.colw)
    _copy1(w.prev_lock, w.lock)


@_piece
def _keep_best(w):
    """The pose as the best seen, with its errors."""
    _copy3(w.best, w.rot)
    _copy1(w.best_ds, w.ds)
    _copy1(w.best_pos, w.pos_e)
    _copy1(w.best_rot, w.rot_e)


@_piece
def _restart(rig, w, start):
    """The working arrays of a frame that starts from ``start``: what a fresh ``_work`` has
    that the loop reads before it writes it."""
    _copy3(w.rot, start)
    _copy3(w.prev_rot, start)
    _copy3(w.best, start)
    w.ds[:] = 0.0
    w.prev_ds[:] = 0.0
    w.best_ds[:] = 0.0
    _copy1(w.colw, rig.dof_w)
    _copy1(w.prev_colw, rig.dof_w)
    w.lock[:] = 0.0
    w.prev_lock[:] = 0.0
    w.best_pos[:] = 0.0  # (kept as they are when no residual is finite)
    w.best_rot[:] = 0.0


@_piece
def _work(rig, start, full):
    """The working arrays, the pose from ``start``; with ``full`` False only what forward
    kinematics, the errors, the Jacobian and the update use (the loop's others empty: the
    Newton step's n x n pair alone is 150 kB to clear on a 96-DOF rig)."""
    n_eff = rig.eff_bone.shape[0]
    n = rig.dof_bone.shape[0]
    m = rig.rows.shape[0] if full else 0
    k_dim = m if m <= n else n
    b_f = rig.parents.shape[0] if full else 0  # the sizes of what only the loop uses
    e_f = n_eff if full else 0
    n_f = n if full else 0
    n_b = rig.parents.shape[0]
    return Work(
        start.copy(),
        np.zeros(n_b),
        rig.dof_w.copy(),
        np.zeros(n),
        start[:b_f].copy(),
        np.zeros(b_f),
        rig.dof_w[:n_f].copy(),
        np.zeros(n_f),
        start[:b_f].copy(),
        np.zeros(b_f),
        np.zeros(e_f),
        np.zeros(e_f),
        np.zeros((rig.parents.shape[0], 3, 3)),
        np.zeros((rig.parents.shape[0], 3)),
        np.zeros((n_eff, 3)),
        np.zeros((n_eff, 6)),
        np.zeros(n_eff),
        np.zeros(n_eff),
        np.zeros((n_eff * 6, n)),
        np.zeros((m, n_f)),
        np.zeros(m),
        np.zeros((k_dim, k_dim)),
        np.zeros((k_dim, k_dim)),
        np.zeros(k_dim),
        np.zeros(k_dim),
        np.zeros(n_f),
        np.zeros(n),
        np.zeros((3, 3)),
        np.zeros((n, 3)),
        np.zeros((n_f, n_f)),
        np.zeros((n_f, n_f)),
        np.zeros(n_f),
        np.zeros((n_f, 3)),
        np.zeros((n_f, 3)),
        np.zeros((e_f, 3)),
    )


@_piece
def _evaluate(f, rig, fr, ru, w):
    """Forward kinematics and errors of the pose ``w.rot``: (r^2 = |e~|^2, every goal met)."""
    _forward(f, rig, fr, w)
    _errors(f, rig, fr, ru, w)
    rows, sqrt_w, ew, err, pos_e, rot_e = rig.rows, rig.sqrt_w, w.ew, w.err, w.pos_e, w.rot_e
    r2 = 0.0
    for i in range(rows.shape[0]):
        ew[i] = err[rows[i] // 6, rows[i] % 6] * sqrt_w[i]
        r2 += ew[i] * ew[i]
    tol_pos, tol_rot = ru.tol_pos, ru.tol_rot
    met = True
    for e in range(pos_e.shape[0]):
        if pos_e[e] > tol_pos[e] or rot_e[e] > tol_rot[e]:
            met = False
    return r2, met


@_piece
def _forward(f, rig, fr, w):
    """Forward kinematics: the model-space frames ``w.mrot``, ``w.mpos``, parents first."""
    order, parents, rest_rot, local_pos = rig.order, rig.parents, rig.rest_rot, fr.local_pos
    rot, mrot, mpos, tmp, ds = w.rot, w.mrot, w.mpos, w.tmp, w.ds
    for oi in range(parents.shape[0]):
        b = order[oi]
        p = parents[b]
        for i in range(3):
            for j in range(3):
                tmp[i, j] = (
                    rest_rot[b, i, 0] * rot[b, 0, j]
                    + rest_rot[b, i, 1] * rot[b, 1, j]
                    + rest_rot[b, i, 2] * rot[b, 2, j]
                )
        if p < 0:
            for i in range(3):
                mpos[b, i] = local_pos[f, b, i]
                for j in range(3):
                    mrot[b, i, j] = tmp[i, j]
        else:
            for i in range(3):
                mpos[b, i] = mpos[p, i] + (
                    mrot[p, i, 0] * local_pos[f, b, 0]
                    + mrot[p, i, 1] * (local_pos[f, b, 1] + ds[p])
                    + mrot[p, i, 2] * local_pos[f, b, 2]
                )
                for j in range(3):
                    mrot[b, i, j] = (
                        mrot[p, i, 0] * tmp[0, j]
                        + mrot[p, i, 1] * tmp[1, j]
                        + mrot[p, i, 2] * tmp[2, j]
                    )


@_piece
def _errors(f, rig, fr, ru, w):
    """The effector points, their position and orientation errors and the errors' norms."""
    e_bone, e_off, e_shift, target, rot_target = (
        rig.eff_bone,
        rig.eff_off,
        fr.eff_shift,
        fr.target,
        fr.rot_target,
    )
    lin, trans, any_rot = fr.lin, fr.trans, ru.any_rot
    mrot, mpos, pts, err, pos_e, rot_e, tmp = w.mrot, w.mpos, w.pts, w.err, w.pos_e, w.rot_e, w.tmp
    for e in range(e_bone.shape[0]):
        b = e_bone[e]
        shift = e_shift[f, e] + w.ds[b] if rig.eff_stretch[e] else e_shift[f, e]
        for i in range(3):
            pts[e, i] = (
                mpos[b, i]
                + shift * mrot[b, i, 1]
                + (
                    mrot[b, i, 0] * e_off[e, 0]
                    + mrot[b, i, 1] * e_off[e, 1]
                    + mrot[b, i, 2] * e_off[e, 2]
                )
            )
        for i in range(3):
            world = (
                lin[f, i, 0] * pts[e, 0] + lin[f, i, 1] * pts[e, 1] + lin[f, i, 2] * pts[e, 2]
            ) + trans[f, i]
            err[e, i] = target[f, e, i] - world
        if any_rot:
            # Sugihara eq. 1: a(R_target R^T) in model space (so3.angle_axis)
            for i in range(3):
                for j in range(3):
                    tmp[i, j] = (
                        rot_target[f, e, i, 0] * mrot[b, j, 0]
                        + rot_target[f, e, i, 1] * mrot[b, j, 1]
                        + rot_target[f, e, i, 2] * mrot[b, j, 2]
                    )
            _angle_axis(tmp, err, e)
        else:
            err[e, 3] = 0.0
            err[e, 4] = 0.0
            err[e, 5] = 0.0
        pos_e[e] = math.sqrt(err[e, 0] ** 2 + err[e, 1] ** 2 + err[e, 2] ** 2)
        rot_e[e] = math.sqrt(err[e, 3] ** 2 + err[e, 4] ** 2 + err[e, 5] ** 2)


@_piece
def _angle_axis(tmp, err, e):
    """``err[e, 3:]`` = the angle-axis vector of the rotation ``tmp`` (so3.angle_axis)."""
    lx = tmp[2, 1] - tmp[1, 2]
    ly = tmp[0, 2] - tmp[2, 0]
    lz = tmp[1, 0] - tmp[0, 1]
    trace = tmp[0, 0] + tmp[1, 1] + tmp[2, 2]
    l_norm = math.sqrt(lx * lx + ly * ly + lz * lz)
    angle = math.atan2(l_norm, trace - 1.0)
    if trace < 1.0:
        cos_t = (trace - 1.0) / 2.0
        col = 0
        best_d = -np.inf
        for c in range(3):
            d = (tmp[c, c] - cos_t) / (1.0 - cos_t)
            if d > best_d:
                best_d = d
                col = c
        ax0 = (0.5 * (tmp[0, col] + tmp[col, 0]) - (cos_t if col == 0 else 0.0)) / (1.0 - cos_t)
        ax1 = (0.5 * (tmp[1, col] + tmp[col, 1]) - (cos_t if col == 1 else 0.0)) / (1.0 - cos_t)
        ax2 = (0.5 * (tmp[2, col] + tmp[col, 2]) - (cos_t if col == 2 else 0.0)) / (1.0 - cos_t)
        nrm = math.sqrt(ax0 * ax0 + ax1 * ax1 + ax2 * ax2)
        ax0, ax1, ax2 = ax0 / nrm, ax1 / nrm, ax2 / nrm
        sign = -1.0 if ax0 * lx + ax1 * ly + ax2 * lz < 0.0 else 1.0
        err[e, 3] = sign * angle * ax0
        err[e, 4] = sign * angle * ax1
        err[e, 5] = sign * angle * ax2
    else:
        sc = 0.0 if l_norm < 1e-300 else angle / l_norm
        err[e, 3] = sc * lx
        err[e, 4] = sc * ly
        err[e, 5] = sc * lz


@_piece
def _stop_tests(f, stuck, k, r, met, prev_r, prev2_r, diverging, rig, fr, ru, w):
    """(why the frame stops or RUNNING, whether only goals out of reach are unmet); stuck: the
    stagnation test applies (not on the first iteration, nor right after an undone step);
    diverging: the residual rose ``divergence_count`` times in a row."""
    why = CONVERGED if met else RUNNING
    beyond = False  # only goals out of reach are unmet (no gradient stop: solve.py)
    if ru.bounded and why == RUNNING:
        done, beyond = _bound_test(f, rig, fr, ru, w)
        if done or (beyond and stuck and prev2_r - r < SETTLED * ru.tol):
            why = STATIONARY
    if k > 0:
        floor = ru.stagnation * max(r, 1e-300)
        stagnant = ru.stagnation > 0 and (abs(prev_r - r) <= floor or abs(prev2_r - r) <= floor)
        if why == RUNNING:
            if stagnant and stuck:
                why = STAGNATED
            elif diverging:
                why = DIVERGED
    if k == ru.max_iter and why == RUNNING:
        why = CONVERGED if met else MAX_ITERATIONS
    return why, beyond


@_piece
def _bound_test(f, rig, fr, ru, w):
    """(every goal met or within the tolerance of its lower bound: no better pose, only goals
    out of reach are unmet)."""
    done = True
    beyond = True
    mpos, tm, pos_e, rot_e, tol_pos, tol_rot = (
        w.mpos,
        fr.tm,
        w.pos_e,
        w.rot_e,
        ru.tol_pos,
        ru.tol_rot,
    )
    fixed, reach_base, reach, inner = rig.fixed, rig.reach_base, rig.reach, rig.inner
    lin_min, tol = fr.lin_min[f], ru.tol
    for e in range(pos_e.shape[0]):
        if rot_e[e] > tol_rot[e]:
            done = False
        lb = 0.0
        if fixed[e]:
            bb = reach_base[e]
            d = math.sqrt(
                (tm[f, e, 0] - mpos[bb, 0]) ** 2
                + (tm[f, e, 1] - mpos[bb, 1]) ** 2
                + (tm[f, e, 2] - mpos[bb, 2]) ** 2
            )
            if not _away(f, e, d, rig, fr, w):  # (pointing away: no bound, solve.py)
                lb = max(max(d - reach[e], inner[e] - d), 0.0) * lin_min
        if pos_e[e] > max(tol_pos[e], lb + BOUND_SLACK * tol):
            done = False
        if rot_e[e] > tol_rot[e] or (pos_e[e] > tol_pos[e] and not lb > 0):
            beyond = False
    return done, beyond


@_piece
def _lone_unmet(ru, w):
    """One position goal unmet (``solve.lone_unmet``)."""
    count = 0
    for e in range(w.pos_e.shape[0]):
        if w.pos_e[e] > ru.tol_pos[e]:
            count += 1
    return count == 1


@_piece
def _damped_step(r2, newton, f, rig, fr, ru, w):
    """``w.dt`` = J~^T (J~ J~^T + lambda^2 I)^-1 e~ by Cholesky on the smaller normal matrix,
    or with ``newton`` the damped Newton step where it exists (``_newton``); False when the
    normal matrix is not positive definite (the frame goes back to numpy)."""
    _jacobian(f, rig, fr, ru, w)
    _release(rig, w)
    jw, jac, rows, sqrt_w, dof_w = w.jw, w.jac, rig.rows, rig.sqrt_w, w.colw
    m, n = jw.shape
    for i in range(m):
        for j in range(n):
            jw[i, j] = jac[rows[i], j] * sqrt_w[i] * dof_w[j]
    if newton and _newton(f, rig, fr, ru, w):
        return True
    energy = 0.5 * r2
    lam2 = ru.lam_a * energy + ru.lam_b
    _normal_matrix(jw, lam2, w.normal)
    if not _cholesky(w.normal, w.low):
        return False
    _solve_normal(w)
    return True


@_piece
def _release(rig, w):
    """A DOF held at a limit whose gradient (J~^T e~)_j points back inside is free again
    (``solve._weighted_jacobian``, ``Settings.keep_limits``)."""
    rows, sqrt_w, jac, ew = rig.rows, rig.sqrt_w, w.jac, w.ew
    for j in range(w.lock.shape[0]):
        if w.lock[j] == 0.0:
            continue
        g = 0.0
        for i in range(rows.shape[0]):
            g += jac[rows[i], j] * sqrt_w[i] * ew[i]
        if w.lock[j] * g < 0.0:
            w.colw[j] = rig.dof_w[j]
            w.lock[j] = 0.0


@_piece
def _newton(f, rig, fr, ru, w):
    """``w.dt`` = the damped Newton step (J~^T J~ + S~ + mu I) dt = J~^T e~ (solvers/curvature.py,
    its terms in the same order), mu = lam_b raised tenfold until the matrix is positive
    definite, at most RAISES times; False when it never is (the method's step is taken)."""
    _newton_matrix(f, rig, fr, ru, w)
    jw, ew, hess, low2, grad, dt = w.jw, w.ew, w.hess, w.low2, w.grad, w.dt
    m, n = jw.shape
    mu = ru.lam_b
    for _ in range(RAISES + 1):
        for a in range(n):
            for b in range(a + 1):
                low2[a, b] = hess[a, b]
            low2[a, a] += mu
        if _cholesky(low2, low2):
            for j in range(n):
                s = 0.0
                for i in range(m):
                    s += jw[i, j] * ew[i]
                grad[j] = s
            _triangular_solves(low2, grad, dt)
            for j in range(n):  # no bone turns about its own length (curvature.twist_dofs)
                if rig.twist[j]:
                    dt[j] = 0.0
            return True
        mu *= 10.0
    return False


@_piece
def _newton_matrix(f, rig, fr, ru, w):
    """The lower triangle of J~^T J~ + S~ into ``w.hess``: S_ab = -sum_e u_e . d2p_e/dq_a dq_b,
    u_e = W e_e of the position rows in model space (curvature.curvature_terms), times the
    DOFs' weights."""
    jw, err, rows, sqrt_w, dof_w = w.jw, w.err, rig.rows, rig.sqrt_w, w.colw
    dof_bone, dof_moves, dof_rel = rig.dof_bone, rig.dof_moves, rig.dof_rel
    hess, axes, lever, turn, uw, pts, mpos = w.hess, w.axes, w.lever, w.turn, w.uw, w.pts, w.mpos
    m, n = jw.shape
    n_eff = uw.shape[0]
    uw[:] = 0.0
    for i in range(m):
        if rows[i] % 6 < 3:
            uw[rows[i] // 6, rows[i] % 6] = sqrt_w[i] ** 2 * err[rows[i] // 6, rows[i] % 6]
    if not ru.identity:
        lin = fr.lin
        for e in range(n_eff):
            u0, u1, u2 = uw[e, 0], uw[e, 1], uw[e, 2]
            for i in range(3):
                uw[e, i] = lin[f, 0, i] * u0 + lin[f, 1, i] * u1 + lin[f, 2, i] * u2
    for a in range(n):
        for b in range(a + 1):
            s = 0.0
            for i in range(m):
                s += jw[i, a] * jw[i, b]
            hess[a, b] = s
    for e in range(n_eff):
        if uw[e, 0] == 0.0 and uw[e, 1] == 0.0 and uw[e, 2] == 0.0:
            continue
        for j in range(n):
            b = dof_bone[j]
            v0 = pts[e, 0] - mpos[b, 0]
            v1 = pts[e, 1] - mpos[b, 1]
            v2 = pts[e, 2] - mpos[b, 2]
            lever[j, 0] = axes[j, 1] * v2 - axes[j, 2] * v1
            lever[j, 1] = axes[j, 2] * v0 - axes[j, 0] * v2
            lever[j, 2] = axes[j, 0] * v1 - axes[j, 1] * v0
            turn[j, 0] = uw[e, 1] * axes[j, 2] - uw[e, 2] * axes[j, 1]
            turn[j, 1] = uw[e, 2] * axes[j, 0] - uw[e, 0] * axes[j, 2]
            turn[j, 2] = uw[e, 0] * axes[j, 1] - uw[e, 1] * axes[j, 0]
        for a in range(n):
            if not dof_moves[e, a]:
                continue
            for b in range(a + 1):
                if not dof_moves[e, b] or dof_rel[a, b] == 0:
                    continue
                tab = turn[a, 0] * lever[b, 0] + turn[a, 1] * lever[b, 1] + turn[a, 2] * lever[b, 2]
                tba = turn[b, 0] * lever[a, 0] + turn[b, 1] * lever[a, 1] + turn[b, 2] * lever[a, 2]
                if dof_rel[a, b] == 1:  # a upstream of b
                    t = tab
                elif dof_rel[a, b] == 2:  # a downstream of b
                    t = tba
                else:  # two DOFs of one rotation
                    t = 0.5 * (tab + tba)
                hess[a, b] -= t * dof_w[a] * dof_w[b]


@_piece
def _jacobian(f, rig, fr, ru, w):
    """The Jacobian ``w.jac`` (model space; world position rows)."""
    parents, rest_rot, dof_bone, dof_axis, dof_pre, dof_moves = (
        rig.parents,
        rig.rest_rot,
        rig.dof_bone,
        rig.dof_axis,
        rig.dof_pre,
        rig.dof_moves,
    )
    identity, lin, n_eff = ru.identity, fr.lin, dof_moves.shape[0]
    jac, mrot, mpos, pts, tmp = w.jac, w.mrot, w.mpos, w.pts, w.tmp
    jac[:] = 0.0
    for j in range(dof_bone.shape[0]):
        b = dof_bone[j]
        a = dof_axis[j]
        p = parents[b]
        if rig.dof_stretch[j]:
            _stretch_column(f, j, rig, fr, ru, w)
            continue
        if dof_pre[j]:  # the axis of the frame before the bone's rotation
            for i in range(3):
                if p < 0:
                    tmp[i, 0] = rest_rot[b, i, a]
                else:
                    tmp[i, 0] = (
                        mrot[p, i, 0] * rest_rot[b, 0, a]
                        + mrot[p, i, 1] * rest_rot[b, 1, a]
                        + mrot[p, i, 2] * rest_rot[b, 2, a]
                    )
            x0, x1, x2 = tmp[0, 0], tmp[1, 0], tmp[2, 0]
        else:
            x0, x1, x2 = mrot[b, 0, a], mrot[b, 1, a], mrot[b, 2, a]
        w.axes[j, 0], w.axes[j, 1], w.axes[j, 2] = x0, x1, x2
        for e in range(n_eff):
            if not dof_moves[e, j]:
                continue
            v0 = pts[e, 0] - mpos[b, 0]
            v1 = pts[e, 1] - mpos[b, 1]
            v2 = pts[e, 2] - mpos[b, 2]
            c0 = x1 * v2 - x2 * v1
            c1 = x2 * v0 - x0 * v2
            c2 = x0 * v1 - x1 * v0
            if identity:
                jac[e * 6 + 0, j] = c0
                jac[e * 6 + 1, j] = c1
                jac[e * 6 + 2, j] = c2
            else:
                for i in range(3):
                    jac[e * 6 + i, j] = lin[f, i, 0] * c0 + lin[f, i, 1] * c1 + lin[f, i, 2] * c2
            jac[e * 6 + 3, j] = x0
            jac[e * 6 + 4, j] = x1
            jac[e * 6 + 5, j] = x2


@_piece
def _stretch_column(f, j, rig, fr, ru, w):
    """Column ``j`` of ``w.jac``, a stretch DOF: it moves the points below along its bone's Y
    axis (model space), no turn (``Skeleton.jacobian``)."""
    b, lin, jac, mrot = rig.dof_bone[j], fr.lin, w.jac, w.mrot
    x0, x1, x2 = mrot[b, 0, 1], mrot[b, 1, 1], mrot[b, 2, 1]
    w.axes[j, 0], w.axes[j, 1], w.axes[j, 2] = x0, x1, x2
    for e in range(rig.dof_moves.shape[0]):
        if not rig.dof_moves[e, j]:
            continue
        if ru.identity:
            jac[e * 6 + 0, j] = x0
            jac[e * 6 + 1, j] = x1
            jac[e * 6 + 2, j] = x2
        else:
            for i in range(3):
                jac[e * 6 + i, j] = lin[f, i, 0] * x0 + lin[f, i, 1] * x1 + lin[f, i, 2] * x2


@_piece
def _normal_matrix(jw, lam2, normal):
    """The lower triangle of J~ J~^T + lam2 I (m <= n) or J~^T J~ + lam2 I."""
    m, n = jw.shape
    small = m <= n
    for i in range(normal.shape[0]):
        for j in range(i + 1):
            s = 0.0
            if small:
                for c in range(n):
                    s += jw[i, c] * jw[j, c]
            else:
                for c in range(m):
                    s += jw[c, i] * jw[c, j]
            normal[i, j] = s
        normal[i, i] += lam2


@_piece
def _cholesky(normal, low):
    """``low`` = L of normal = L L^T, row by row (``low`` may be ``normal``); False when
    ``normal`` is not positive definite. Above 8 rows ``_cholesky_rows`` (the same numbers)."""
    if normal.shape[0] > 8:
        return _cholesky_rows(normal, low)
    for i in range(normal.shape[0]):
        if not _cholesky_row(normal, low, i, 0):
            return False
    return True


@_piece
def _cholesky_row(normal, low, i, start):
    """Entries ``start``..i of row i of the factor, those before it done; False when the
    pivot is not positive."""
    for j in range(start, i + 1):
        s = normal[i, j]
        for c in range(j):
            s -= low[i, c] * low[j, c]
        if i == j:
            if not s > 0.0:
                return False
            low[i, i] = math.sqrt(s)
        else:
            low[i, j] = s / low[j, j]
    return True


@_lean
def _cholesky_rows(normal, low):
    """``_cholesky`` of a larger matrix (the damped Newton step's, n x n: 300 rows on a 100-bone
    chain). Each entry is normal[i, j] minus its products in the order of their columns, as in
    ``_cholesky_row``, so the factor is bit for bit the same; but eight entries of a row take
    their sums over their common columns side by side (independent chains of additions, not
    one waiting on the next), then each adds its own last columns in order: 2.7 times faster
    at n = 300. Compiled on its own, not inlined: inlined at each of the six calls it made
    the first compile 5 s longer."""
    for i in range(normal.shape[0]):
        j = 0
        while j + 7 < i:
            s0, s1, s2, s3 = normal[i, j], normal[i, j + 1], normal[i, j + 2], normal[i, j + 3]
            s4, s5, s6, s7 = normal[i, j + 4], normal[i, j + 5], normal[i, j + 6], normal[i, j + 7]
            for c in range(j):
                x = low[i, c]
                s0 -= x * low[j, c]
                s1 -= x * low[j + 1, c]
                s2 -= x * low[j + 2, c]
                s3 -= x * low[j + 3, c]
                s4 -= x * low[j + 4, c]
                s5 -= x * low[j + 5, c]
                s6 -= x * low[j + 6, c]
                s7 -= x * low[j + 7, c]
            low[i, j], low[i, j + 1], low[i, j + 2], low[i, j + 3] = s0, s1, s2, s3
            low[i, j + 4], low[i, j + 5], low[i, j + 6], low[i, j + 7] = s4, s5, s6, s7
            for k in range(j, j + 8):  # (the partial sums wait in low[i, k])
                s = low[i, k]
                for c in range(j, k):
                    s -= low[i, c] * low[k, c]
                low[i, k] = s / low[k, k]
            j += 8
        if not _cholesky_row(normal, low, i, j):
            return False
    return True


@_piece
def _solve_normal(w):
    """``w.dt`` from the Cholesky factor ``w.low``: the two triangular solves, then J~^T."""
    _solve_factored(w.jw, w.ew, w.low, w.rhs, w.z, w.dt)


@_piece
def _solve_factored(jw, ew, low, rhs, z, dt):
    """``dt`` = J^T (J J^T + lam2 I)^-1 e (rows <= columns) or (J^T J + lam2 I)^-1 J^T e from
    the Cholesky factor ``low`` of that matrix (``_normal_matrix``)."""
    m, n = jw.shape
    small = m <= n
    k_dim = low.shape[0]
    for i in range(k_dim):
        if small:
            rhs[i] = ew[i]
        else:
            s = 0.0
            for c in range(m):
                s += jw[c, i] * ew[c]
            rhs[i] = s
    _triangular_solves(low, rhs, z)
    if small:
        for j in range(n):
            s = 0.0
            for i in range(m):
                s += jw[i, j] * z[i]
            dt[j] = s
    else:
        for j in range(n):
            dt[j] = z[j]


@_piece
def _triangular_solves(low, b, x):
    """x = (L L^T)^-1 b from the Cholesky factor ``low``: L y = b, then L^T x = y (``x`` holds y
    in between; ``b`` is not overwritten)."""
    k = low.shape[0]
    for i in range(k):  # L y = b
        s = b[i]
        for c in range(i):
            s -= low[i, c] * x[c]
        x[i] = s / low[i, i]
    for i in range(k - 1, -1, -1):  # L^T x = y
        s = x[i]
        for c in range(i + 1, k):
            s -= low[c, i] * x[c]
        x[i] = s / low[i, i]


@_piece
def _stationary(f, r, met, beyond, scale, may_kick, rig, fr, ru, w):
    """(at a stationary point: the gradient J~^T e~ small against |J~| |e~|, or no step found
    that lowers the error; at a saddle instead: bend the chain, once)."""
    stationary = False
    saddle = False
    if ru.grad_tol > 0:
        jw, ew = w.jw, w.ew
        g2 = 0.0
        jf = 0.0
        for j in range(jw.shape[1]):
            s = 0.0
            for i in range(jw.shape[0]):
                s += jw[i, j] * ew[i]
                jf += jw[i, j] * jw[i, j]
            g2 += s * s
        size = math.sqrt(jf) * r
        stationary = (not met) and (
            (math.sqrt(g2) <= ru.grad_tol * size and not beyond) or scale < MIN_STEP_SCALE
        )
        if stationary and may_kick and _in_reach_unmet(f, rig, fr, ru, w):
            stationary = False
            saddle = True
    return stationary, saddle


@_piece
def _in_reach_unmet(f, rig, fr, ru, w):
    """A saddle, not a minimum: an unmet position goal's target is within its reach, or its
    effector points away from it (a straight chain turned away from a target out of reach)."""
    tm, mpos, pos_e, reach, inner, use_pos = (
        fr.tm,
        w.mpos,
        w.pos_e,
        rig.reach,
        rig.inner,
        rig.use_pos,
    )
    reach_base, tol = rig.reach_base, ru.tol
    inside = False
    for e in range(reach.shape[0]):
        bb = reach_base[e]
        d = math.sqrt(
            (tm[f, e, 0] - mpos[bb, 0]) ** 2
            + (tm[f, e, 1] - mpos[bb, 1]) ** 2
            + (tm[f, e, 2] - mpos[bb, 2]) ** 2
        )
        within = d < 0.99 * reach[e] and d > 1.01 * inner[e]
        if (within or _away(f, e, d, rig, fr, w)) and pos_e[e] > tol and use_pos[e]:
            if _own_stationary(e, rig, ru, w):
                inside = True
    return inside


@_piece
def _own_stationary(e, rig, ru, w):
    """Goal ``e`` at a stationary point of its own weighted error: the gradient of its rows
    small against their |J~| |e~| (``solve.own_stationary``)."""
    jw, ew, rows = w.jw, w.ew, rig.rows
    g2 = 0.0
    jf = 0.0
    ef = 0.0
    for i in range(jw.shape[0]):
        if rows[i] // 6 == e:
            ef += ew[i] * ew[i]
    for j in range(jw.shape[1]):
        s = 0.0
        for i in range(jw.shape[0]):
            if rows[i] // 6 == e:
                s += jw[i, j] * ew[i]
                jf += jw[i, j] * jw[i, j]
        g2 += s * s
    return math.sqrt(g2) <= ru.grad_tol * math.sqrt(jf * ef)


@_piece
def _away(f, e, d, rig, fr, w):
    """The effector farther from its target than its chain's base is (``d``) plus the chain's
    inner reach (``solve.pointing_away``)."""
    tm, pts = fr.tm, w.pts
    tip = math.sqrt(
        (tm[f, e, 0] - pts[e, 0]) ** 2
        + (tm[f, e, 1] - pts[e, 1]) ** 2
        + (tm[f, e, 2] - pts[e, 2]) ** 2
    )
    return tip > d + rig.inner[e]


@_piece
def _joint_step(rig, ru, w, scale, stationary, saddle):
    """``w.dq``: the step W_q^1/2 dt at the current length, none at a stationary point, the
    fixed small turn of every free DOF at a saddle."""
    dq, dt, dof_w, kick_sign = w.dq, w.dt, w.colw, rig.kick_sign
    for j in range(dq.shape[0]):
        dq[j] = dof_w[j] * dt[j]
    if ru.reject:
        for j in range(dq.shape[0]):
            dq[j] = dq[j] * scale
    if stationary:
        dq[:] = 0.0
    if saddle:
        for j in range(dq.shape[0]):
            dq[j] = dof_w[j] * KICK * kick_sign[j]


@_piece
def _rotate(rig, w):
    """The update: R <- R exp(d_post), then R <- exp(d_pre) R (so3.exp_so3)."""
    rot, tmp, dq, dof_bone, dof_axis, dof_pre = (
        w.rot,
        w.tmp,
        w.dq,
        rig.dof_bone,
        rig.dof_axis,
        rig.dof_pre,
    )
    for phase in range(2):
        for b in range(rot.shape[0]):
            v0 = 0.0
            v1 = 0.0
            v2 = 0.0
            for j in range(dq.shape[0]):
                if dof_bone[j] == b and dof_pre[j] == (phase == 1) and not rig.dof_stretch[j]:
                    if dof_axis[j] == 0:
                        v0 = dq[j]
                    elif dof_axis[j] == 1:
                        v1 = dq[j]
                    else:
                        v2 = dq[j]
            ex00, ex01, ex02, ex10, ex11, ex12, ex20, ex21, ex22 = _exp_so3(v0, v1, v2)
            for i in range(3):
                for j in range(3):
                    tmp[i, j] = rot[b, i, j]
            if phase == 0:  # R exp(v)
                for i in range(3):
                    rot[b, i, 0] = tmp[i, 0] * ex00 + tmp[i, 1] * ex10 + tmp[i, 2] * ex20
                    rot[b, i, 1] = tmp[i, 0] * ex01 + tmp[i, 1] * ex11 + tmp[i, 2] * ex21
                    rot[b, i, 2] = tmp[i, 0] * ex02 + tmp[i, 1] * ex12 + tmp[i, 2] * ex22
            else:  # exp(v) R
                for j in range(3):
                    rot[b, 0, j] = ex00 * tmp[0, j] + ex01 * tmp[1, j] + ex02 * tmp[2, j]
                    rot[b, 1, j] = ex10 * tmp[0, j] + ex11 * tmp[1, j] + ex12 * tmp[2, j]
                    rot[b, 2, j] = ex20 * tmp[0, j] + ex21 * tmp[1, j] + ex22 * tmp[2, j]


@_piece
def _stretch(f, rig, fr, w):
    """The update of the stretch DOFs: s <- s + ds (``Skeleton.apply``); one whose limits are
    kept is clamped into them and locked (its weight 0) when the step crosses one, as the
    numpy loop does (``Skeleton.clamp_sides``, ``violations``; ``_release`` frees it)."""
    for j in range(w.dq.shape[0]):
        if not rig.dof_stretch[j]:
            continue
        b = rig.dof_bone[j]
        w.ds[b] += w.dq[j]
        if rig.dof_clamp[j]:
            s = fr.stretch[f, b] + w.ds[b]
            if s < rig.dof_min[j] - 1e-12:
                w.ds[b] = rig.dof_min[j] - fr.stretch[f, b]
                w.colw[j] = 0.0
                w.lock[j] = -1.0
            elif s > rig.dof_max[j] + 1e-12:
                w.ds[b] = rig.dof_max[j] - fr.stretch[f, b]
                w.colw[j] = 0.0
                w.lock[j] = 1.0


@_piece
def _exp_so3(v0, v1, v2):
    """The rotation exp([v]x), row by row (Rodrigues; its Taylor series for tiny angles)."""
    theta2 = v0 * v0 + v1 * v1 + v2 * v2
    if theta2 < 1e-12:
        ca = 1.0 - theta2 / 6.0
        cb = 0.5 - theta2 / 24.0
        cc = 1.0 - theta2 / 2.0
    else:
        th = math.sqrt(theta2)
        ca = math.sin(th) / th
        cb = (1.0 - math.cos(th)) / (th * th)
        cc = math.cos(th)
    return (
        cc * 1.0 + ca * 0.0 + cb * (v0 * v0),
        cc * 0.0 + ca * -v2 + cb * (v0 * v1),
        cc * 0.0 + ca * v1 + cb * (v0 * v2),
        cc * 0.0 + ca * v2 + cb * (v1 * v0),
        cc * 1.0 + ca * 0.0 + cb * (v1 * v1),
        cc * 0.0 + ca * -v0 + cb * (v1 * v2),
        cc * 0.0 + ca * -v1 + cb * (v2 * v0),
        cc * 0.0 + ca * v0 + cb * (v2 * v1),
        cc * 1.0 + ca * 0.0 + cb * (v2 * v2),
    )


@_piece
def _finite_peak(dq, rot):
    """(some step or pose entry is NaN or infinite, the largest |dq|)."""
    bad = False
    peak = 0.0
    for j in range(dq.shape[0]):
        if not math.isfinite(dq[j]):
            bad = True
        peak = max(peak, abs(dq[j]))
    for b in range(rot.shape[0]):
        for i in range(3):
            for j in range(3):
                if not math.isfinite(rot[b, i, j]):
                    bad = True
    return bad, peak


# -- goal priority's null-space steps (solvers/priority.py, (B)) ----------------------------


class Held(NamedTuple):
    """The rows the null-space steps hold and step toward, their DOFs and constants
    (solvers/priority.py; ``rig`` then has ``dof_moves`` = every DOF that moves a goal)."""

    primary: NDArray[np.intp]  # rows (of E * 6) of the primary goals, held
    other: NDArray[np.intp]  # rows of the other goals, stepped toward
    other_w: Array  # their weights' square roots
    prim_eff: NDArray[np.intp]  # the primary effectors
    other_eff: NDArray[np.intp]  # the other effectors
    cols: NDArray[np.intp]  # the DOFs that step
    colw: Array  # their weights
    steps: int
    hold_steps: int
    damping: float
    min_gain: float
    min_scale: float
    max_turn: float
    hold_damping: float
    tol: float
    rtol: float


class HeldOut(NamedTuple):
    """Per frame: the pose (in: where (A) left it; out: after the steps), the others' bounds,
    and the results."""

    rotations: Array  # (F, B, 3, 3)
    bound_pos: Array  # (F, E) the steps stop once every other goal is within these
    bound_rot: Array
    pos: Array  # (F, E) the goals' errors at the pose left
    rot: Array
    taken: NDArray[np.intp]  # (F,) the steps kept
    status: NDArray[np.intp]  # (F,) 0, or FALLBACK: a matrix was not positive definite


def hold(problem: Any, goals: Any, start: Pose, held: Held, bound: tuple[Array, Array]) -> HeldOut:
    """priority's null-space steps of every frame of ``start`` by the compiled loop, where
    ``covers_hold``; the frames marked FALLBACK are left as they were (numpy steps them).
    Raises KernelUnavailable when the kernel does not run here."""
    rig = _rig_every(problem)
    frames, n_eff = goals.frames, problem.skel.n_effectors
    out = HeldOut(
        np.array(start.rotations, dtype=np.float64, order="C"),
        _writable(bound[0]),
        _writable(bound[1]),
        np.zeros((frames, n_eff)),
        np.zeros((frames, n_eff)),
        np.zeros(frames, dtype=np.intp),
        np.zeros(frames, dtype=np.intp),
    )
    threads = min(THREADS, frames // CHUNK)  # (a frame's steps cost ~0.1-1 ms: always split)
    fr, rules = _frames(problem, goals, start), _rules(problem, goals, 0.0, 0.0)
    _call_frames(rig, fr, rules, out, threads, problem.__dict__, held)
    outside = _outside(problem, out.rotations, start)  # numpy steps them, keeping the limits
    out.rotations[outside] = start.rotations[outside]
    out.status[outside] = FALLBACK
    return out


def _rig_every(problem: Any) -> Rig:
    """The problem's rig with every DOF that moves a goal (``Skeleton.dof_affects``), kept on
    the problem."""
    rig = problem.__dict__.get("_kernel_rig_every")
    if rig is None:
        every = np.ascontiguousarray(problem.skel.dof_affects, dtype=np.bool_)
        rig = problem.__dict__["_kernel_rig_every"] = _rig(problem)._replace(dof_moves=every)
    return rig


def covers_hold(problem: Any, goals: Any) -> bool:
    """Whether ``hold`` covers the problem: what the compiled loop covers, any goal rows."""
    if not covers(problem.skel, problem.settings, limits=True):
        return False
    return not (problem.aim.size or problem.balance or goals.on is not None)


def _hold_loop(rig, frames, rules, held, out):
    """Every frame in turn (the null-space steps' kernel), with one set of working arrays
    (each frame writes what it reads of them)."""
    if out.rotations.shape[0] == 0:
        return
    w = _work(rig, out.rotations[0], False)
    hw = _hold_work(rig, held.primary.shape[0], held.other.shape[0], held.cols.shape[0])
    for f in range(out.rotations.shape[0]):
        w.rot[:] = out.rotations[f]
        _hold_frame(f, rig, frames, rules, held, out, w, hw)


@_lean
def _hold_frame(f, rig, fr, ru, hd, out, w, hw):
    """One frame's null-space steps (priority._null_space_steps for one frame), from the pose
    in ``w.rot``."""
    if hd.primary.shape[0] > hd.cols.shape[0]:
        out.status[f] = FALLBACK
        return
    _pose_errors(f, rig, fr, ru, w)
    _hold_here(rig, w, hd.prim_eff, hw.held_pts, hw.held_rot)  # where (A) left the primaries
    for i in range(hd.prim_eff.shape[0]):  # and how near
        e = hd.prim_eff[i]
        hw.max_pos[i] = max(w.pos_e[e], hd.tol) + 0.1 * hd.tol
        hw.max_rot[i] = max(w.rot_e[e], hd.rtol) + 0.1 * hd.rtol
    energy = _other_energy(hd, w)
    active = energy > 0.0 and _far(f, hd, w, out)
    scale = 1.0
    taken = 0
    for _ in range(hd.steps):
        if not active:
            break
        _copy3(hw.saved, w.rot)
        if not _null_step(f, rig, fr, ru, hd, w, hw, energy, scale):
            out.status[f] = FALLBACK
            return
        for _h in range(hd.hold_steps):
            if not _hold_step(f, rig, fr, ru, hd, w, hw):
                out.status[f] = FALLBACK
                return
        _pose_errors(f, rig, fr, ru, w)
        e_new = _other_energy(hd, w)
        keep = e_new < energy and _finite(w.rot)
        for i in range(hd.prim_eff.shape[0]):
            e = hd.prim_eff[i]
            if w.pos_e[e] > hw.max_pos[i] or w.rot_e[e] > hw.max_rot[i]:
                keep = False
        if keep:
            gain = (energy - e_new) / energy
            energy = e_new
            taken += 1
            scale = min(2.0 * scale, 1.0)
            if gain < hd.min_gain or not _far(f, hd, w, out):
                active = False
        else:
            _copy3(w.rot, hw.saved)
            _pose_errors(f, rig, fr, ru, w)
            scale *= 0.5
        if scale < hd.min_scale:
            active = False
    _copy3(out.rotations[f], w.rot)
    _copy1(out.pos[f], w.pos_e)
    _copy1(out.rot[f], w.rot_e)
    out.taken[f] = taken


class HoldWork(NamedTuple):
    """The null-space steps' working arrays of one frame."""

    held_pts: Array  # (P, 3) the primaries' points as (A) left them (model space)
    held_rot: Array  # (P, 3, 3) and their frames
    max_pos: Array  # (P,) how far off a primary may end
    max_rot: Array
    saved: Array  # (B, 3, 3) the pose before the step
    jp: Array  # (P rows, nc) the primaries' rows
    js: Array  # (O rows, nc) the others' rows (weighted), then projected
    proj: Array  # (nc, nc) J_p^+ J_p
    x: Array  # (P rows, nc) (J_p J_p^T + d I)^-1 J_p
    pp: Array  # (P rows, P rows) J_p J_p^T + d I and
    low_p: Array  # its Cholesky factor
    col: Array  # (P rows,) one column's solve
    eo: Array  # (O rows,) the others' weighted errors
    no: Array  # the others' normal matrix,
    low_o: Array  # its factor,
    rhs_o: Array
    z_o: Array
    step: Array  # (nc,) the step
    step2: Array
    back: Array  # (P rows,) where the primaries should be minus where they are
    rhs_p: Array
    z_p: Array
    err6: Array  # (E, 6)
    tmp: Array  # (3, 3)


@_piece
def _hold_work(rig, n_p, n_o, nc):
    n_eff = rig.eff_bone.shape[0]
    k_o = n_o if n_o <= nc else nc
    return HoldWork(
        np.zeros((n_eff, 3)),
        np.zeros((n_eff, 3, 3)),
        np.zeros(n_eff),
        np.zeros(n_eff),
        np.zeros((rig.parents.shape[0], 3, 3)),
        np.zeros((n_p, nc)),
        np.zeros((n_o, nc)),
        np.zeros((nc, nc)),
        np.zeros((n_p, nc)),
        np.zeros((n_p, n_p)),
        np.zeros((n_p, n_p)),
        np.zeros(n_p),
        np.zeros(n_o),
        np.zeros((k_o, k_o)),
        np.zeros((k_o, k_o)),
        np.zeros(k_o),
        np.zeros(k_o),
        np.zeros(nc),
        np.zeros(nc),
        np.zeros(n_p),
        np.zeros(n_p),
        np.zeros(n_p),
        np.zeros((n_eff, 6)),
        np.zeros((3, 3)),
    )


@_lean
def _pose_errors(f, rig, fr, ru, w):
    """Forward kinematics and every goal's errors of the pose ``w.rot`` (compiled on its own
    and called: inlined at each of its uses, the null-space steps took minutes to compile)."""
    _forward(f, rig, fr, w)
    _errors(f, rig, fr, ru, w)


@_lean
def _jacobian_of(f, rig, fr, ru, w):
    """``_jacobian``, compiled on its own and called (as ``_pose_errors``)."""
    _jacobian(f, rig, fr, ru, w)


@_lean
def _turn(rig, w):
    """``_rotate``, compiled on its own and called (as ``_pose_errors``)."""
    _rotate(rig, w)


@_piece
def _other_energy(hd, w):
    """The other goals' weighted squared error."""
    s = 0.0
    for i in range(hd.other.shape[0]):
        r = hd.other[i]
        v = w.err[r // 6, r % 6] * hd.other_w[i]
        s += v * v
    return s


@_piece
def _far(f, hd, w, out):
    """Some other goal is not yet within its bound."""
    for i in range(hd.other_eff.shape[0]):
        e = hd.other_eff[i]
        if w.pos_e[e] > out.bound_pos[f, e] or w.rot_e[e] > out.bound_rot[f, e]:
            return True
    return False


@_piece
def _finite(rot):
    for b in range(rot.shape[0]):
        for i in range(3):
            for j in range(3):
                if not math.isfinite(rot[b, i, j]):
                    return False
    return True


@_piece
def _rows_of(jac, rows, cols, colw, row_w, out):
    """``out`` = jac[rows][:, cols] * colw (times ``row_w`` per row when it has any)."""
    for i in range(rows.shape[0]):
        rw = row_w[i] if row_w.shape[0] else 1.0
        for c in range(cols.shape[0]):
            out[i, c] = jac[rows[i], cols[c]] * colw[c] * rw


@_lean
def _null_step(f, rig, fr, ru, hd, w, hw, energy, scale):
    """Turn ``w.rot`` by the others' damped least-squares step in the primaries' null space,
    dq = N (J_o N)^T (J_o N N^T J_o^T + lambda^2 I)^-1 e_o with N = I - J_p^+ J_p (at most
    ``max_turn`` a DOF, times ``scale``); False when a matrix is not positive definite."""
    _jacobian_of(f, rig, fr, ru, w)
    nc = hd.cols.shape[0]
    no_w = hd.other_w[:0]  # (no weights: an empty view, nothing made)
    _rows_of(w.jac, hd.primary, hd.cols, hd.colw, no_w, hw.jp)
    _rows_of(w.jac, hd.other, hd.cols, hd.colw, hd.other_w, hw.js)
    for i in range(hd.other.shape[0]):
        r = hd.other[i]
        hw.eo[i] = w.err[r // 6, r % 6] * hd.other_w[i]
    # the projector J_p^T (J_p J_p^T + d I)^-1 J_p, one column of J_p at a time
    _normal_matrix(hw.jp, hd.hold_damping, hw.pp)
    if not _cholesky(hw.pp, hw.low_p):
        return False
    for c in range(nc):
        for i in range(hd.primary.shape[0]):
            hw.rhs_p[i] = hw.jp[i, c]
        _triangular_solves(hw.low_p, hw.rhs_p, hw.col)
        for i in range(hd.primary.shape[0]):
            hw.x[i, c] = hw.col[i]
    for a in range(nc):
        for b in range(nc):
            s = 0.0
            for i in range(hd.primary.shape[0]):
                s += hw.jp[i, a] * hw.x[i, b]
            hw.proj[a, b] = s
    for o in range(hd.other.shape[0]):  # J_o N (N is symmetric)
        for b in range(nc):
            s = 0.0
            for a in range(nc):
                s += hw.js[o, a] * hw.proj[a, b]
            hw.step2[b] = hw.js[o, b] - s
        _copy1(hw.js[o], hw.step2)
    _normal_matrix(hw.js, energy + hd.damping, hw.no)
    if not _cholesky(hw.no, hw.low_o):
        return False
    _solve_factored(hw.js, hw.eo, hw.low_o, hw.rhs_o, hw.z_o, hw.step)
    peak = 0.0
    for a in range(nc):  # N step, and the trust region
        s = 0.0
        for b in range(nc):
            s += hw.proj[a, b] * hw.step[b]
        hw.step2[a] = hw.step[a] - s
        peak = max(peak, abs(hw.step2[a]))
    shrink = min(1.0, hd.max_turn / max(peak, 1e-300)) * scale
    w.dq[:] = 0.0
    for c in range(nc):
        w.dq[hd.cols[c]] = hw.step2[c] * shrink * hd.colw[c]
    _turn(rig, w)
    return True


@_lean
def _hold_step(f, rig, fr, ru, hd, w, hw):
    """One minimum-norm step that puts the primaries back where (A) left them; False when
    the matrix is not positive definite."""
    _pose_errors(f, rig, fr, ru, w)  # (the effector points and frames)
    _held_error(f, rig, fr, ru, w, hd.prim_eff, hw.held_pts, hw.held_rot, hw.err6, hw.tmp)
    for i in range(hd.primary.shape[0]):
        r = hd.primary[i]
        hw.back[i] = hw.err6[r // 6, r % 6]
    _jacobian_of(f, rig, fr, ru, w)
    no_w = hd.other_w[:0]  # (no weights: an empty view, nothing made)
    _rows_of(w.jac, hd.primary, hd.cols, hd.colw, no_w, hw.jp)
    _normal_matrix(hw.jp, hd.hold_damping, hw.pp)
    if not _cholesky(hw.pp, hw.low_p):
        return False
    _solve_factored(hw.jp, hw.back, hw.low_p, hw.rhs_p, hw.z_p, hw.step)
    w.dq[:] = 0.0
    for c in range(hd.cols.shape[0]):
        w.dq[hd.cols[c]] = hw.step[c] * hd.colw[c]
    _turn(rig, w)
    return True


@_piece
def _hold_here(rig, w, effs, held_pts, held_rot):
    """``held_pts`` and ``held_rot`` (indexed like ``effs``): where the effectors ``effs`` are
    and how they are turned (``w`` after ``_pose_errors``), for ``_held_error``."""
    for i in range(effs.shape[0]):
        e = effs[i]
        b = rig.eff_bone[e]
        for a in range(3):
            held_pts[i, a] = w.pts[e, a]
            for c in range(3):
                held_rot[i, a, c] = w.mrot[b, a, c]


@_piece
def _held_error(f, rig, fr, ru, w, effs, held_pts, held_rot, err6, tmp):
    """``err6`` rows of the effectors ``effs``: from where they are (``w``, after
    ``_pose_errors``) to ``held_pts`` and ``held_rot`` (indexed like ``effs``), in the
    Jacobian's spaces (world positions, model-space orientations)."""
    lin = fr.lin
    for i in range(effs.shape[0]):
        e = effs[i]
        b = rig.eff_bone[e]
        d0 = held_pts[i, 0] - w.pts[e, 0]
        d1 = held_pts[i, 1] - w.pts[e, 1]
        d2 = held_pts[i, 2] - w.pts[e, 2]
        for a in range(3):
            if ru.identity:
                err6[e, a] = d0 if a == 0 else (d1 if a == 1 else d2)
            else:
                err6[e, a] = lin[f, a, 0] * d0 + lin[f, a, 1] * d1 + lin[f, a, 2] * d2
        for a in range(3):  # held R times R^T
            for c in range(3):
                tmp[a, c] = (
                    held_rot[i, a, 0] * w.mrot[b, c, 0]
                    + held_rot[i, a, 1] * w.mrot[b, c, 1]
                    + held_rot[i, a, 2] * w.mrot[b, c, 2]
                )
        _angle_axis(tmp, err6, e)


# -- the jitter smoothing's passes (solvers/smooth.py) -------------------------------------


class SmoothFixed(NamedTuple):
    """What the smoothing's passes read and do not change (solvers/smooth.py ``_Run``)."""

    row_tree: NDArray[np.intp]  # (rows,) the tree (a carry group) of each goal row
    goal_tree: NDArray[np.intp]  # (E,) and of each goal
    bone_tree: NDArray[np.intp]  # (B,) and of each bone (-1: no tree moves it)
    max_pos: Array  # (F, E) how far off each goal may end (admissible as the flip repair's)
    max_rot: Array
    passes: int
    alpha: float  # smooth.ALPHA
    damping: float  # smooth.DAMPING
    window_cos: float  # cos(smooth.WINDOW / 2)
    deviation: float  # smooth.DEVIATION
    angle: float  # Settings.flip_angle (inf: no jump test)


class SmoothState(NamedTuple):
    """What the passes change: the poses, which (frame, tree) may still move, the refusals in a
    row, the frames changed."""

    rotations: Array  # (F, B, 3, 3)
    loose: NDArray[np.bool_]  # (F, T)
    refused: NDArray[np.intp]  # (F, T)
    changed: NDArray[np.bool_]  # (F,)


def smooth_passes(
    problem: Any, goals: Any, pose: Pose, fixed: SmoothFixed, state: SmoothState
) -> None:
    """The smoothing's passes (solvers/smooth.py ``smooth``) by the compiled loop, where
    ``covers_smooth``, on ``state`` in place. Raises KernelUnavailable when the kernel does not
    run here."""
    # the position rows in model space, as smooth.py's numpy forms them: the same J J^T, so the
    # same damping (near a straight chain's singularity, damping the world-space rows of a
    # scaled armature moved the null space's step by 1 % of itself)
    rules = _rules(problem, goals, 0.0, 0.0)._replace(identity=True)
    _call(_rig_every(problem), _frames(problem, goals, pose), rules, fixed, state, loop=2)
    # a frame the passes left outside the joint limits keeps its pose (numpy's passes clamp)
    outside = _outside(problem, state.rotations, pose)
    state.rotations[outside] = pose.rotations[outside]
    state.changed[outside] = False


def covers_smooth(problem: Any, goals: Any) -> bool:
    """Whether ``smooth_passes`` covers the problem: the kernel's rigs, goal rows only (no
    poles, aim goals, balance or goals switched per frame; joint limits: ``smooth_passes``
    leaves a frame it would move outside them as it was)."""
    if not _covers_rig(problem.skel, problem.settings, limits=True):
        return False
    if problem.aim.size or problem.balance or problem.sec_rows.size:
        return False
    return goals.on is None


def _smooth_loop(rig, fr, ru, sf, st):
    """The passes: even frames, then odd ones, each half's steps toward the cubic taken from
    the poses as they stand, then each frame moved, tested and kept per tree (the kernel)."""
    frames, n = st.rotations.shape[0], rig.dof_bone.shape[0]
    if frames == 0:
        return
    w = _work(rig, st.rotations[0], False)
    sw = _smooth_work(rig)
    v = np.zeros((frames, n))
    go = np.zeros(frames, dtype=np.bool_)
    post = np.zeros((rig.parents.shape[0], 3))
    q = np.zeros((5, 4))
    bad = np.zeros(st.loose.shape[1], dtype=np.bool_)
    for _ in range(sf.passes):
        moved = False
        for half in range(2):
            for f in range(half, frames, 2):
                go[f] = st.loose[f].any() and _target(f, rig, sf, st, v, post, q)
            for f in range(half, frames, 2):
                if go[f] and _smooth_frame(f, rig, fr, ru, sf, st, v, w, sw, bad):
                    moved = True
        if not moved:
            break


@_piece
def _quaternion(m, q, k):
    """``q[k]`` = the unit quaternion (w, x, y, z), w >= 0, of the rotation ``m``
    (rotations.quaternion_from_matrix: Shepperd's method)."""
    tr = m[0, 0] + m[1, 1] + m[2, 2]
    best, top = 0, tr
    for i in range(3):
        d = 2.0 * m[i, i] - tr
        if d > top:
            best, top = i + 1, d
    if best == 0:
        a, b, c, d = 1.0 + tr, m[2, 1] - m[1, 2], m[0, 2] - m[2, 0], m[1, 0] - m[0, 1]
    elif best == 1:
        a, b = m[2, 1] - m[1, 2], 1.0 + m[0, 0] - m[1, 1] - m[2, 2]
        c, d = m[0, 1] + m[1, 0], m[0, 2] + m[2, 0]
    elif best == 2:
        a, b = m[0, 2] - m[2, 0], m[0, 1] + m[1, 0]
        c, d = 1.0 - m[0, 0] + m[1, 1] - m[2, 2], m[1, 2] + m[2, 1]
    else:
        a, b = m[1, 0] - m[0, 1], m[0, 2] + m[2, 0]
        c, d = m[1, 2] + m[2, 1], 1.0 - m[0, 0] - m[1, 1] + m[2, 2]
    norm = math.sqrt(a * a + b * b + c * c + d * d)
    sign = -1.0 if a / norm < 0.0 else 1.0
    q[k, 0], q[k, 1], q[k, 2], q[k, 3] = (
        sign * a / norm,
        sign * b / norm,
        sign * c / norm,
        sign * d / norm,
    )


@_piece
def _target(f, rig, sf, st, v, post, q):
    """``v[f]``: the DOF step of frame ``f`` toward the cubic through its two neighbours on
    either side, over the bones of its loose trees (smooth._Run.targets); False when every
    bone lies within ``deviation`` of its cubic."""
    rot = st.rotations
    peak = 0.0
    for b in range(post.shape[0]):
        post[b, 0] = post[b, 1] = post[b, 2] = 0.0
        t = sf.bone_tree[b]
        if t < 0 or not st.loose[f, t]:
            continue
        for k in range(5):
            _quaternion(rot[f - 2 + k, b], q, k)
        for k in range(5):  # one hemisphere with the frame's own
            if q[k, 0] * q[2, 0] + q[k, 1] * q[2, 1] + q[k, 2] * q[2, 2] + q[k, 3] * q[2, 3] < 0.0:
                for i in range(4):
                    q[k, i] = -q[k, i]
        dots = 2.0
        for k in range(4):
            d = abs(
                q[k + 1, 0] * q[k, 0]
                + q[k + 1, 1] * q[k, 1]
                + q[k + 1, 2] * q[k, 2]
                + q[k + 1, 3] * q[k, 3]
            )
            dots = min(dots, d)
        if not dots > sf.window_cos:  # the bone jumps within its stencil: it stays
            continue
        m0 = (-q[0, 0] + 4.0 * q[1, 0] + 4.0 * q[3, 0] - q[4, 0]) / 6.0
        m1 = (-q[0, 1] + 4.0 * q[1, 1] + 4.0 * q[3, 1] - q[4, 1]) / 6.0
        m2 = (-q[0, 2] + 4.0 * q[1, 2] + 4.0 * q[3, 2] - q[4, 2]) / 6.0
        m3 = (-q[0, 3] + 4.0 * q[1, 3] + 4.0 * q[3, 3] - q[4, 3]) / 6.0
        mn = math.sqrt(m0 * m0 + m1 * m1 + m2 * m2 + m3 * m3)
        m0, m1, m2, m3 = m0 / mn, m1 / mn, m2 / mn, m3 / mn
        a0, a1, a2, a3 = q[2, 0], q[2, 1], q[2, 2], q[2, 3]
        # R_a exp(d) = R_b: the vector part of conj(a) b scaled to its angle (smooth._turn)
        dw = a0 * m0 + a1 * m1 + a2 * m2 + a3 * m3
        v0 = a0 * m1 - m0 * a1 - (a2 * m3 - a3 * m2)
        v1 = a0 * m2 - m0 * a2 - (a3 * m1 - a1 * m3)
        v2 = a0 * m3 - m0 * a3 - (a1 * m2 - a2 * m1)
        sn = math.sqrt(v0 * v0 + v1 * v1 + v2 * v2)
        scale = 2.0 * math.atan2(sn, dw) / sn if sn > 1e-300 else 2.0
        post[b, 0], post[b, 1], post[b, 2] = v0 * scale, v1 * scale, v2 * scale
        peak = max(peak, sn * scale)
    if not peak > sf.deviation:
        return False
    for j in range(v.shape[1]):
        b, a = rig.dof_bone[j], rig.dof_axis[j]
        if rig.dof_pre[j]:  # exp(d) R: the same turn in the parent's frame
            val = (
                rot[f, b, a, 0] * post[b, 0]
                + rot[f, b, a, 1] * post[b, 1]
                + rot[f, b, a, 2] * post[b, 2]
            )
        else:
            val = post[b, a]
        v[f, j] = val * rig.dof_w[j]
    return True


class SmoothWork(NamedTuple):
    """The smoothing move's working arrays (of the most rows; a frame uses its first m)."""

    held_pts: Array  # (E, 3) the effectors before the move (model space)
    held_rot: Array  # (E, 3, 3) and their frames
    jg: Array  # (rows, n) the rows of the trees that move
    eg: Array  # (rows,) J v, then the error back to the held effectors
    normal: Array  # (k, k) J J^T + d I (or J^T J + d I)
    low: Array  # its Cholesky factor
    rhs: Array
    z: Array
    step: Array  # (n,)
    on: NDArray[np.bool_]  # (rows,) the rows of the trees that move
    effs: NDArray[np.intp]  # (E,) every effector


@_piece
def _smooth_work(rig):
    n_eff, n, m = rig.eff_bone.shape[0], rig.dof_bone.shape[0], rig.rows.shape[0]
    k_dim = m if m <= n else n
    return SmoothWork(
        np.zeros((n_eff, 3)),
        np.zeros((n_eff, 3, 3)),
        np.zeros((m, n)),
        np.zeros(m),
        np.zeros((k_dim, k_dim)),
        np.zeros((k_dim, k_dim)),
        np.zeros(k_dim),
        np.zeros(k_dim),
        np.zeros(n),
        np.zeros(m, dtype=np.bool_),
        np.arange(n_eff),
    )


@_piece
def _goal_rows(jac, rows, on, out):
    """``out`` = jac[rows[on]] (every column)."""
    k = 0
    for i in range(rows.shape[0]):
        if on[i]:
            for c in range(jac.shape[1]):
                out[k, c] = jac[rows[i], c]
            k += 1


@_piece
def _min_norm(jg, e, damping, normal, low, rhs, z, dq):
    """``dq`` = J^T (J J^T + damping I)^-1 e (or its J^T J form); False when the matrix is not
    positive definite."""
    _normal_matrix(jg, damping, normal)
    if not _cholesky(normal, low):
        return False
    _solve_factored(jg, e, low, rhs, z, dq)
    return True


@_lean
def _smooth_move(f, rig, fr, ru, vf, alpha, damping, w, sw):
    """Frame ``f`` from the pose in ``w.rot``: ``alpha`` times ``vf`` projected onto the null
    space of the goal rows ``sw.on``, then one minimum-norm step that puts the effectors back,
    then the goals' errors (smooth._Run._move); False when a matrix is not positive
    definite."""
    rows, on = rig.rows, sw.on
    n = rig.dof_bone.shape[0]
    m = 0
    for i in range(rows.shape[0]):
        m += 1 if on[i] else 0
    k_dim = m if m <= n else n
    jg, eg, normal, low = sw.jg[:m], sw.eg[:m], sw.normal[:k_dim, :k_dim], sw.low[:k_dim, :k_dim]
    rhs, z = sw.rhs[:k_dim], sw.z[:k_dim]
    _pose_errors(f, rig, fr, ru, w)
    _hold_here(rig, w, sw.effs, sw.held_pts, sw.held_rot)
    # toward the cubic in the goals' null space: alpha (v - J^T (J J^T + d I)^-1 J v)
    _jacobian_of(f, rig, fr, ru, w)
    _goal_rows(w.jac, rows, on, jg)
    for i in range(m):
        s = 0.0
        for j in range(n):
            s += jg[i, j] * vf[j]
        eg[i] = s
    if not _min_norm(jg, eg, damping, normal, low, rhs, z, sw.step):
        return False
    for j in range(n):
        w.dq[j] = alpha * (vf[j] - sw.step[j])
    _turn(rig, w)
    # the effectors back where they were: one minimum-norm step on the goal rows
    _pose_errors(f, rig, fr, ru, w)
    _held_error(f, rig, fr, ru, w, sw.effs, sw.held_pts, sw.held_rot, w.err, w.tmp)
    k = 0
    for i in range(rows.shape[0]):
        if on[i]:
            eg[k] = w.err[rows[i] // 6, rows[i] % 6]
            k += 1
    _jacobian_of(f, rig, fr, ru, w)
    _goal_rows(w.jac, rows, on, jg)
    if not _min_norm(jg, eg, damping, normal, low, rhs, z, w.dq):
        return False
    _turn(rig, w)
    _pose_errors(f, rig, fr, ru, w)
    return True


@_piece
def _turn_angle(a, b):
    """The angle of R_a^T R_b (flips.turn_angles)."""
    tr = 0.0
    for i in range(3):
        for j in range(3):
            tr += a[i, j] * b[i, j]
    return math.acos(min(1.0, max(-1.0, (tr - 1.0) / 2.0)))


@_lean
def _smooth_frame(f, rig, fr, ru, sf, st, v, w, sw, bad):
    """Frame ``f``'s move, kept by each tree whose goals stay admissible and none of whose
    bones jumps to a neighbour where it did not (smooth._Run.step); whether one kept it."""
    loose, rows = st.loose, rig.rows
    for i in range(rows.shape[0]):
        sw.on[i] = loose[f, sf.row_tree[i]]
    _copy3(w.rot, st.rotations[f])
    ok = _smooth_move(f, rig, fr, ru, v[f], sf.alpha, sf.damping, w, sw)
    bad[:] = not ok  # (a matrix that was not positive definite: refused)
    if ok:
        for e in range(w.pos_e.shape[0]):
            if w.pos_e[e] > sf.max_pos[f, e] or w.rot_e[e] > sf.max_rot[f, e]:
                bad[sf.goal_tree[e]] = True
        for b in range(rig.parents.shape[0]):
            t = sf.bone_tree[b]
            if t < 0 or not loose[f, t] or bad[t]:
                continue
            if not _finite(w.rot[b : b + 1]):
                bad[t] = True
                continue
            for side in (-1, 1):
                near = st.rotations[f + side, b]
                now = _turn_angle(near, w.rot[b]) > sf.angle
                if now and not _turn_angle(near, st.rotations[f, b]) > sf.angle:
                    bad[t] = True
    took = False
    for t in range(loose.shape[1]):
        if not loose[f, t]:  # not tried here: not taken
            bad[t] = True
            st.refused[f, t] = 0
            continue
        st.refused[f, t] = st.refused[f, t] + 1 if bad[t] else 0
        if st.refused[f, t] >= 2:  # refused twice in a row: stays as it is here
            loose[f, t] = False
        took = took or not bad[t]
    if took:
        for b in range(rig.parents.shape[0]):
            t = sf.bone_tree[b]
            if t >= 0 and not bad[t]:
                _copy3(st.rotations[f, b : b + 1], w.rot[b : b + 1])
        st.changed[f] = True
    return took


LOOPS = (_loop, _hold_loop, _smooth_loop)
"""The kernels, by number: the converge-mode loop, goal priority's null-space steps and the
jitter smoothing's passes."""
