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
default), rotational DOFs (ball joints, hinges, two-axis joints, stiffness) and position and
orientation goals. Everything else (joint limits, location and stretch DOFs, poles and other
secondary goals, aim goals, balance, null-space terms, clamping, Jacobians at the targets,
track mode, the other methods) runs the numpy loop: ``plan`` says None. A frame whose normal
matrix is not positive definite (lambda = 0 at a singularity) is handed back to the numpy loop
too.

numba is optional: the extension zip carries its wheels where they exist (README), and without
it, or with ``JACOBIAN_IK_KERNEL=0`` in the environment, every problem runs the numpy loop. The
first call compiles the kernel (20-35 s, once per install: ``cache=True`` keeps it on disk in
``CACHE_DIR``, from where later sessions load it in about 0.6 s). It compiles in the calling
thread: a compile in a background thread beside Blender's own work crashed a test process once.
"""

from __future__ import annotations

import math
import os
import threading
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from .skeleton import ROT_POST, ROT_PRE, Pose

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

# reason codes, as solve.REASONS
RUNNING, CONVERGED, STAGNATED, DIVERGED, MAX_ITERATIONS, FAILED, STATIONARY = range(7)
FALLBACK = 7  # the frame goes back to the numpy loop


def enabled() -> bool:
    """Whether the compiled loop can run here (numba imported, not switched off, not broken)."""
    return numba is not None and not BROKEN and os.environ.get("JACOBIAN_IK_KERNEL", "1") != "0"


@dataclass
class Plan:
    """The compiled loop's view of one IK tree's problem: the method's damping and the arrays
    that stay fixed over the frames (kept on the problem, which ``solve._problem`` caches)."""

    lam_a: float
    lam_b: float
    static: tuple[Any, ...]  # the kernel's fixed arguments, in its order


def covers(skel: Any, st: Any) -> bool:
    """Whether the compiled loop covers this skeleton and these settings (the goals may still
    ask for what it does not: poles, aim goals, balance; see ``plan``)."""
    if not enabled() or st.method not in DAMPING or st.mode != "converge":
        return False
    kinds = skel.__dict__.get("_kernel_kinds")
    if kinds is None:  # (rotational DOFs only, any limited DOF), kept on the skeleton
        rotational = bool(np.all((skel.dof_kind == ROT_PRE) | (skel.dof_kind == ROT_POST)))
        kinds = skel.__dict__["_kernel_kinds"] = (rotational, bool(np.any(skel.dof_limited)))
    if not kinds[0] or (st.keep_limits and kinds[1]):
        return False
    if st.nullspace != "none" and (st.rest_weight > 0 or st.limit_weight > 0):
        return False
    if st.second_order:  # the damped Newton step runs in numpy only (solvers/curvature.py)
        return False
    return st.clamp_distance is None and st.max_step is None and not st.jacobian_at_targets


def plan(problem: Any, method: Any, goals: Any, start: Pose, track: bool) -> Plan | None:
    """A ``Plan`` when the compiled loop covers this problem, else None (use ``_iterate``)."""
    if track or not covers(problem.skel, problem.settings):
        return None
    if problem.use_nullspace or problem.aim.size or problem.balance or problem.sec_rows.size:
        return None
    if goals.on is not None or problem.rows.size == 0:
        return None
    lam_a, lam_b = DAMPING[method.name](method.params)
    static = problem.__dict__.get("_kernel_static")
    if static is None:
        skel = problem.skel
        parity = (skel.depth[skel.dof_bone] + skel.dof_axis) % 2 == 0
        static = problem.__dict__["_kernel_static"] = (
            skel.parents.astype(np.intp),
            np.argsort(skel.depth, kind="stable").astype(np.intp),
            np.ascontiguousarray(skel.rest_rot, dtype=np.float64),
            skel.dof_bone.astype(np.intp),
            skel.dof_axis.astype(np.intp),
            skel.dof_kind == ROT_PRE,
            skel.dof_weight.astype(np.float64),
            np.where(parity, 1.0, -1.0),
            np.ascontiguousarray(skel.dof_moves, dtype=np.bool_),
            skel.eff_bone.astype(np.intp),
            np.ascontiguousarray(skel.eff_offset, dtype=np.float64),
            problem.rows.astype(np.intp),
            problem.sqrt_w.astype(np.float64),
            problem.use_pos.astype(np.bool_),
            problem.reach.astype(np.float64),
            problem.inner.astype(np.float64),
            problem.reach_base.astype(np.intp),
            (problem.base_fixed & (problem.reach > 0)).astype(np.bool_),
        )
    return Plan(float(lam_a), float(lam_b), static)


def iterate(problem: Any, p: Plan, goals: Any, start: Pose) -> dict[str, Any]:
    """Run the compiled loop over every frame; the raw per-frame results (``solve.py`` turns
    them into a ``SolveResult`` and re-solves the frames marked FALLBACK with numpy)."""
    skel, st = problem.skel, problem.settings
    frames, n_eff = goals.frames, skel.n_effectors
    has_parent = skel.parents >= 0
    local_pos = skel.rest_pos[None] + np.einsum("bij,fbj->fbi", skel.rest_rot, start.locations)
    local_pos[:, has_parent, 1] += start.stretch[:, skel.parents[has_parent]]
    eff_shift = np.where(skel.eff_stretches[None], start.stretch[:, skel.eff_bone], 0.0)
    tol_pos, tol_rot = problem.tolerances(goals)
    lin_min = np.ones(frames)
    if problem.bounded and not problem.identity_base:
        lin_min = np.linalg.svd(goals.lin, compute_uv=False)[:, -1]
    out = {
        "rotations": np.array(start.rotations, dtype=np.float64, order="C"),
        "pos": np.zeros((frames, n_eff)),
        "rot": np.zeros((frames, n_eff)),
        "iterations": np.zeros(frames, dtype=np.intp),
        "reason": np.zeros(frames, dtype=np.intp),
        # (only the rows up to the last iteration are written and kept: np.empty does not touch
        # the rest, which matters for caps of thousands of iterations)
        "history": np.empty((st.max_iterations + 1, frames)),
        "last": np.zeros(frames, dtype=np.intp),
    }
    _call(
        *p.static,
        _writable(local_pos),
        _writable(eff_shift),
        _writable(goals.position),
        _writable(goals.rotation_model),
        bool(problem.any_rot),
        _writable(goals.lin),
        _writable(goals.trans),
        _writable(goals.targets_model()),
        bool(problem.identity_base),
        _writable(tol_pos[0]),
        _writable(tol_rot[0]),
        _writable(lin_min),
        bool(problem.bounded),
        p.lam_a,
        p.lam_b,
        int(st.max_iterations),
        float(st.tolerance),
        float(st.gradient_tolerance),
        bool(st.reject_rising_steps),
        float(st.stagnation),
        float(st.step_tolerance),
        int(st.divergence_count),
        out["rotations"],
        out["pos"],
        out["rot"],
        out["iterations"],
        out["reason"],
        out["history"],
        out["last"],
    )
    return out


def _writable(a: Any) -> Any:
    """``a`` as a C-contiguous, writable array: numba compiles the kernel once per array type,
    and a read-only array (a one-frame broadcast, which ``np.ascontiguousarray`` passes through)
    is another type, another compile."""
    a = np.ascontiguousarray(a)
    return a if a.flags.writeable else a.copy()


_COMPILED: list[Any] = []
_LOCK = threading.Lock()
COMPILE_TIME: list[float] = []  # seconds the first call took to compile (or load) the kernel
CACHE_DIR: str | None = None
"""Where numba keeps the compiled kernel: the add-on sets its user folder
(``bpy.utils.extension_path_user``); None: ``__pycache__`` beside this file (development)."""
BROKEN: list[str] = []  # why the kernel could not run here (then every solve uses numpy)


class KernelUnavailable(RuntimeError):
    """The compiled loop failed to compile or load; the caller runs the numpy loop."""


def _install_locator() -> None:
    """Keep the kernel's cache in CACHE_DIR, one folder per module name (the same file imported
    under two names must not load the other's cache: it refers to its module by name)."""
    from numba.core import caching

    class Locator(caching.UserProvidedCacheLocator):
        def __init__(self, py_func: Any, py_file: str) -> None:
            self._py_file = py_file
            self._lineno = py_func.__code__.co_firstlineno
            base = CACHE_DIR or os.path.join(os.path.dirname(py_file), "__pycache__")
            name = "numba-" + py_func.__module__.replace(".", "_")
            self._cache_path = os.path.join(base, name)

        @classmethod
        def from_function(cls, py_func: Any, py_file: str) -> Any:
            if py_func is not _loop:
                return None
            locator = cls(py_func, py_file)
            try:
                locator.ensure_cache_path()
            except OSError:
                return None
            return locator

    caching.CacheImpl._locator_classes.insert(0, Locator)


def _kernel(cache: bool = True) -> Any:
    with _LOCK:
        if not _COMPILED:
            if cache:
                _install_locator()
            _COMPILED.append(numba.njit(cache=cache, nogil=True)(_loop))
        return _COMPILED[0]


def _call(*args: Any) -> None:
    """The kernel on ``args``; a cache that does not load or a compile error recompiles once
    without the cache, then gives up (KernelUnavailable: numpy from then on)."""
    if BROKEN:
        raise KernelUnavailable(BROKEN[0])
    first = not COMPILE_TIME
    t0 = time.perf_counter()
    try:
        _kernel()(*args)
    except Exception:  # any failure of numba's machinery means: use numpy
        with _LOCK:
            _COMPILED.clear()
        try:
            _kernel(cache=False)(*args)
        except Exception as exc:
            BROKEN.append(f"{type(exc).__name__}: {exc}")
            raise KernelUnavailable(BROKEN[0]) from exc
    if first:
        COMPILE_TIME.append(time.perf_counter() - t0)


# -- the compiled loop --------------------------------------------------------------------
# Plain Python on numpy arrays, compiled by numba.njit in ``_kernel`` (and runnable as Python,
# very slowly, which the tests do not rely on). One frame at a time; every helper is inlined.

# The loop's constants, defined here once for all three loops (solve.py's ``_iterate`` and
# frame.py import them; this module cannot import solve.py, which imports it).
KICK = 0.05
"""Radians: how far each free DOF turns to leave a saddle point (a straight chain)."""
MIN_STEP_SCALE = 1.0 / 1024
"""A frame whose step, halved after each rise of the error, gets shorter than this is at a
stationary point for its method."""
BOUND_SLACK = 0.1
"""A goal out of reach is done when its error is within this fraction of the tolerance of its
lower bound (``solve._Problem.lower_bound``): as close as a straight chain gets, to 1e-6 at the
default tolerance."""


def _loop(
    parents,
    order,
    rest_rot,
    dof_bone,
    dof_axis,
    dof_pre,
    dof_w,
    kick_sign,
    dof_moves,
    eff_bone,
    eff_off,
    rows,
    sqrt_w,
    use_pos,
    reach,
    inner,
    reach_base,
    fixed,
    local_pos,
    eff_shift,
    target,
    rot_target,
    any_rot,
    lin,
    trans,
    tm,
    identity,
    tol_pos,
    tol_rot,
    lin_min,
    bounded,
    lam_a,
    lam_b,
    max_iter,
    tol,
    grad_tol,
    reject,
    stagnation,
    step_tol,
    div_count,
    rot_start,
    out_pos,
    out_roterr,
    out_it,
    out_reason,
    hist,
    last,
):
    n_bones = parents.shape[0]
    n_frames = rot_start.shape[0]
    n_eff = eff_bone.shape[0]
    n = dof_bone.shape[0]
    m = rows.shape[0]
    small = m <= n
    k_dim = m if small else n
    for f in range(n_frames):
        rot = rot_start[f].copy()
        prev_rot = rot.copy()
        best = rot.copy()
        mrot = np.zeros((n_bones, 3, 3))
        mpos = np.zeros((n_bones, 3))
        pts = np.zeros((n_eff, 3))
        err = np.zeros((n_eff, 6))
        pos_e = np.zeros(n_eff)
        rot_e = np.zeros(n_eff)
        best_pos = np.zeros(n_eff)
        best_rot = np.zeros(n_eff)
        jac = np.zeros((n_eff * 6, n))
        jw = np.zeros((m, n))
        ew = np.zeros(m)
        normal = np.zeros((k_dim, k_dim))
        low = np.zeros((k_dim, k_dim))
        rhs = np.zeros(k_dim)
        z = np.zeros(k_dim)
        dt = np.zeros(n)
        dq = np.zeros(n)
        tmp = np.zeros((3, 3))
        best_r = np.inf
        prev_r = np.inf
        prev2_r = np.inf
        rises = 0
        scale = 1.0
        kicks = 0
        why = MAX_ITERATIONS
        it = 0
        for k in range(max_iter + 1):
            r = 0.0
            met = True
            undone = False  # this iteration's step was undone (rose): no stagnation test
            for attempt in range(2):
                # forward kinematics: parents first
                for oi in range(n_bones):
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
                                + mrot[p, i, 1] * local_pos[f, b, 1]
                                + mrot[p, i, 2] * local_pos[f, b, 2]
                            )
                            for j in range(3):
                                mrot[b, i, j] = (
                                    mrot[p, i, 0] * tmp[0, j]
                                    + mrot[p, i, 1] * tmp[1, j]
                                    + mrot[p, i, 2] * tmp[2, j]
                                )
                # errors
                for e in range(n_eff):
                    b = eff_bone[e]
                    for i in range(3):
                        pts[e, i] = (
                            mpos[b, i]
                            + eff_shift[f, e] * mrot[b, i, 1]
                            + (
                                mrot[b, i, 0] * eff_off[e, 0]
                                + mrot[b, i, 1] * eff_off[e, 1]
                                + mrot[b, i, 2] * eff_off[e, 2]
                            )
                        )
                    for i in range(3):
                        world = (
                            lin[f, i, 0] * pts[e, 0]
                            + lin[f, i, 1] * pts[e, 1]
                            + lin[f, i, 2] * pts[e, 2]
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
                            ax0 = (
                                0.5 * (tmp[0, col] + tmp[col, 0]) - (cos_t if col == 0 else 0.0)
                            ) / (1.0 - cos_t)
                            ax1 = (
                                0.5 * (tmp[1, col] + tmp[col, 1]) - (cos_t if col == 1 else 0.0)
                            ) / (1.0 - cos_t)
                            ax2 = (
                                0.5 * (tmp[2, col] + tmp[col, 2]) - (cos_t if col == 2 else 0.0)
                            ) / (1.0 - cos_t)
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
                    else:
                        err[e, 3] = 0.0
                        err[e, 4] = 0.0
                        err[e, 5] = 0.0
                    pos_e[e] = math.sqrt(err[e, 0] ** 2 + err[e, 1] ** 2 + err[e, 2] ** 2)
                    rot_e[e] = math.sqrt(err[e, 3] ** 2 + err[e, 4] ** 2 + err[e, 5] ** 2)
                r2 = 0.0
                for i in range(m):
                    ew[i] = err[rows[i] // 6, rows[i] % 6] * sqrt_w[i]
                    r2 += ew[i] * ew[i]
                r = math.sqrt(r2)
                met = True
                for e in range(n_eff):
                    if pos_e[e] > tol_pos[e] or rot_e[e] > tol_rot[e]:
                        met = False
                if attempt == 1 or not (reject and k > 0):
                    break
                # a step that raised the error is undone and retried at half the length
                rose = r > prev_r and not met
                scale = 0.5 * scale if rose else min(2.0 * scale, 1.0)
                if not rose:
                    break
                undone = True
                rot[:] = prev_rot
            hist[k, f] = r
            last[f] = k
            if r < best_r:
                best[:] = rot
                best_r = r
                best_pos[:] = pos_e
                best_rot[:] = rot_e
            why = CONVERGED if met else RUNNING
            beyond = False  # only goals out of reach are unmet (no gradient stop: solve.py)
            if bounded and why == RUNNING:
                # every goal met or within the tolerance of its lower bound: no better pose
                done = True
                beyond = True
                for e in range(n_eff):
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
                        lb = max(max(d - reach[e], inner[e] - d), 0.0) * lin_min[f]
                    if pos_e[e] > max(tol_pos[e], lb + BOUND_SLACK * tol):
                        done = False
                    if rot_e[e] > tol_rot[e] or (pos_e[e] > tol_pos[e] and not lb > 0):
                        beyond = False
                if done:
                    why = STATIONARY
            if k > 0:
                rises = rises + 1 if r > prev_r else 0
                floor = stagnation * max(r, 1e-300)
                stagnant = (
                    stagnation > 0
                    and not undone
                    and (abs(prev_r - r) <= floor or abs(prev2_r - r) <= floor)
                )
                if why == RUNNING:
                    if stagnant:
                        why = STAGNATED
                    elif rises >= div_count:
                        why = DIVERGED
            if k == max_iter and why == RUNNING:
                why = CONVERGED if met else MAX_ITERATIONS
            if why != RUNNING:
                it = k
                break
            prev2_r = prev_r
            prev_r = r

            # the Jacobian (model space; world position rows), weighted: J~ = W_E^1/2 J W_q^1/2
            jac[:] = 0.0
            for j in range(n):
                b = dof_bone[j]
                a = dof_axis[j]
                p = parents[b]
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
                            jac[e * 6 + i, j] = (
                                lin[f, i, 0] * c0 + lin[f, i, 1] * c1 + lin[f, i, 2] * c2
                            )
                    jac[e * 6 + 3, j] = x0
                    jac[e * 6 + 4, j] = x1
                    jac[e * 6 + 5, j] = x2
            for i in range(m):
                for j in range(n):
                    jw[i, j] = jac[rows[i], j] * sqrt_w[i] * dof_w[j]
            energy = 0.5 * r2
            lam2 = lam_a * energy + lam_b
            # dt = J^T (J J^T + lam2 I)^-1 e by Cholesky on the smaller normal matrix
            for i in range(k_dim):
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
            ok = True
            for i in range(k_dim):
                for j in range(i + 1):
                    s = normal[i, j]
                    for c in range(j):
                        s -= low[i, c] * low[j, c]
                    if i == j:
                        if not s > 0.0:
                            ok = False
                            break
                        low[i, i] = math.sqrt(s)
                    else:
                        low[i, j] = s / low[j, j]
                if not ok:
                    break
            if not ok:
                why = FALLBACK
                it = k
                break
            for i in range(k_dim):
                if small:
                    rhs[i] = ew[i]
                else:
                    s = 0.0
                    for c in range(m):
                        s += jw[c, i] * ew[c]
                    rhs[i] = s
            for i in range(k_dim):  # L y = rhs
                s = rhs[i]
                for c in range(i):
                    s -= low[i, c] * z[c]
                z[i] = s / low[i, i]
            for i in range(k_dim - 1, -1, -1):  # L^T x = y
                s = z[i]
                for c in range(i + 1, k_dim):
                    s -= low[c, i] * z[c]
                z[i] = s / low[i, i]
            if small:
                for j in range(n):
                    s = 0.0
                    for i in range(m):
                        s += jw[i, j] * z[i]
                    dt[j] = s
            else:
                for j in range(n):
                    dt[j] = z[j]
            # a stationary point: the gradient J~^T e~ small against |J~| |e~|
            stationary = False
            saddle = False
            if grad_tol > 0:
                g2 = 0.0
                jf = 0.0
                for j in range(n):
                    s = 0.0
                    for i in range(m):
                        s += jw[i, j] * ew[i]
                        jf += jw[i, j] * jw[i, j]
                    g2 += s * s
                size = math.sqrt(jf) * r
                stationary = (not met) and (
                    (math.sqrt(g2) <= grad_tol * size and not beyond) or scale < MIN_STEP_SCALE
                )
                if stationary and kicks < 1:
                    # a saddle when an unmet position goal's target is within its reach
                    inside = False
                    for e in range(n_eff):
                        bb = reach_base[e]
                        d = math.sqrt(
                            (tm[f, e, 0] - mpos[bb, 0]) ** 2
                            + (tm[f, e, 1] - mpos[bb, 1]) ** 2
                            + (tm[f, e, 2] - mpos[bb, 2]) ** 2
                        )
                        if (
                            d < 0.99 * reach[e]
                            and d > 1.01 * inner[e]
                            and pos_e[e] > tol
                            and use_pos[e]
                        ):
                            inside = True
                    if inside:
                        stationary = False
                        saddle = True
                        kicks += 1
            for j in range(n):
                dq[j] = dof_w[j] * dt[j]
            if reject:
                for j in range(n):
                    dq[j] = dq[j] * scale
                prev_rot[:] = rot
            if stationary:
                dq[:] = 0.0
            if saddle:
                prev_r = np.inf
                for j in range(n):
                    dq[j] = dof_w[j] * KICK * kick_sign[j]
                scale = 1.0
            # the update: R <- R exp(d_post), then R <- exp(d_pre) R (so3.exp_so3)
            for phase in range(2):
                for b in range(n_bones):
                    v0 = 0.0
                    v1 = 0.0
                    v2 = 0.0
                    for j in range(n):
                        if dof_bone[j] == b and dof_pre[j] == (phase == 1):
                            if dof_axis[j] == 0:
                                v0 = dq[j]
                            elif dof_axis[j] == 1:
                                v1 = dq[j]
                            else:
                                v2 = dq[j]
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
                    ex00 = cc * 1.0 + ca * 0.0 + cb * (v0 * v0)
                    ex01 = cc * 0.0 + ca * -v2 + cb * (v0 * v1)
                    ex02 = cc * 0.0 + ca * v1 + cb * (v0 * v2)
                    ex10 = cc * 0.0 + ca * v2 + cb * (v1 * v0)
                    ex11 = cc * 1.0 + ca * 0.0 + cb * (v1 * v1)
                    ex12 = cc * 0.0 + ca * -v0 + cb * (v1 * v2)
                    ex20 = cc * 0.0 + ca * -v1 + cb * (v2 * v0)
                    ex21 = cc * 0.0 + ca * v0 + cb * (v2 * v1)
                    ex22 = cc * 1.0 + ca * 0.0 + cb * (v2 * v2)
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
            bad = False
            peak = 0.0
            for j in range(n):
                if not math.isfinite(dq[j]):
                    bad = True
                peak = max(peak, abs(dq[j]))
            for b in range(n_bones):
                for i in range(3):
                    for j in range(3):
                        if not math.isfinite(rot[b, i, j]):
                            bad = True
            if bad:
                why = FAILED
                it = k
                break
            if stationary:
                why = STATIONARY
                it = k
                break
            if peak < step_tol:  # Sugihara's stop (a)
                why = STAGNATED
                it = k + 1
                break
        rot_start[f] = best  # (the start poses' array is the output)
        out_pos[f] = best_pos
        out_roterr[f] = best_rot
        out_it[f] = it
        out_reason[f] = why
