"""The damped Newton step (solvers/curvature.py): its curvature term against finite differences
of the error, and what it is for: frames whose unmet goals are all out of reach reach their best
pose in tens of steps where LM creeps for hundreds; the same in every loop (numpy, compiled,
one frame); frames with goals in conflict keep LM's steps."""

from __future__ import annotations

import dataclasses
import importlib

import numpy as np
import pytest

from jacobian_ik.solvers import (
    Effector,
    Goals,
    Joint,
    Pose,
    Settings,
    Skeleton,
    Solver,
    SolveResult,
    kernel,
    solve,
    straight,
)
from jacobian_ik.solvers.curvature import curvature, second_order_step, twist_dofs
from jacobian_ik.solvers.frame import unsupported
from jacobian_ik.solvers.goals import prepare_goals
from tests.rigs.skeletons import chain, translation
from tests.solvers.test_trees import random_humanoid, targets


def _branching(rng: np.random.Generator) -> Skeleton:
    """Ball joints, a hinge, a two-axis joint (a pre- and a post-rotation DOF), two effectors
    (one with an offset) on branches sharing a root, random rest frames."""
    parents = [-1, 0, 1, 2, 1, 4]
    rest = []
    for b in range(len(parents)):
        q, _ = np.linalg.qr(rng.normal(size=(3, 3)))
        m = translation(*rng.normal(scale=0.3, size=3)) if b else np.eye(4)
        m[:3, :3] = q * np.sign(np.linalg.det(q))
        rest.append(m)
    joints = [Joint.ball(), Joint("XZ"), Joint.ball(), Joint.hinge("Z"), Joint.ball(), Joint("YZ")]
    effectors = [Effector(3, (0, 0.4, 0), "a"), Effector(5, (0.1, 0.3, -0.2), "b")]
    return Skeleton(parents, np.stack(rest), joints, effectors)


def test_curvature_matches_finite_differences_of_the_error() -> None:
    """J^T W J + S is the Hessian of 1/2 |W^1/2 e|^2 in the solver's step coordinates
    (R <- exp(d_pre) R exp(d_post)), checked by central differences, with a moved, turned and
    scaled armature (world position rows)."""
    rng = np.random.default_rng(5)
    skel = _branching(rng)
    n = skel.n_dofs
    pose = skel.apply(Pose.rest(skel.n_bones), rng.normal(scale=0.6, size=(1, n)))
    lin = np.linalg.qr(rng.normal(size=(3, 3)))[0] * 1.7
    base = np.eye(4)
    base[:3, :3], base[:3, 3] = lin, rng.normal(size=3)
    weight = np.array([1.0, 2.5])
    goals = prepare_goals(
        Goals(rng.normal(size=(1, 2, 3)), position_weight=weight, base=base), skel.n_effectors
    )

    def energy(dq: np.ndarray) -> float:
        kin = skel.forward_kinematics(skel.apply(pose, dq[None]))
        world = kin.points[0] @ lin.T + base[:3, 3]
        e = goals.position[0] - world
        return 0.5 * float(np.sum(weight[:, None] * e**2))

    kin = skel.forward_kinematics(pose)
    e = goals.position[0] - (kin.points[0] @ lin.T + base[:3, 3])
    jac = np.einsum("ij,ejn->ein", lin, skel.jacobian(kin)[0][:, :3])  # world rows
    gn = np.einsum("e,ein,eim->nm", weight, jac, jac)
    u = (weight[:, None] * e) @ lin  # lin^T (W e): model space
    hess = gn + curvature(skel, kin, u[None])[0]
    h = 1e-4
    eye = np.eye(n)
    fd = np.empty((n, n))
    for a in range(n):
        for b in range(n):
            da, db = h * eye[a], h * eye[b]
            fd[a, b] = (energy(da + db) - energy(da - db) - energy(db - da) + energy(-da - db)) / (
                4 * h * h
            )
    assert np.abs(hess - gn).max() > 1e-2  # the term matters at this pose
    np.testing.assert_allclose(hess, fd, atol=2e-5 * np.abs(fd).max())


def _curled_tentacle(rng: np.random.Generator, bones: int) -> tuple[Skeleton, Pose, np.ndarray]:
    skel = chain(bones, 1.0 / bones)
    start = skel.apply(Pose.rest(bones), rng.normal(scale=0.15, size=(1, skel.n_dofs)))
    direction = rng.normal(size=(12, 3))
    direction /= np.linalg.norm(direction, axis=1, keepdims=True)
    far = direction * rng.uniform(1.05, 1.6, size=(12, 1))  # out of reach (length 1)
    return skel, start, far


@pytest.mark.parametrize("bones", [8, 30])
def test_a_long_chain_reaches_an_unreachable_targets_bound_in_few_steps(
    bones: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A straight chain toward the target is the best pose; LM alone needed 100s of steps to
    creep there (and stopped millimetres short at 500 on zoo tentacles). The loop's own way
    there (where the start is not straightened: solvers/straight.py, switched off here)."""
    monkeypatch.setattr(straight, "MIN_BONES", 10**6)
    rng = np.random.default_rng(bones)
    skel, start, far = _curled_tentacle(rng, bones)
    st = Settings(second_order=True)
    res = solve(skel, Goals(far[:, None]), st, pose=start.broadcast(len(far)))
    excess = res.position_error[:, 0] - (np.linalg.norm(far, axis=1) - 1.0)
    assert np.all(excess <= 1.1e-6), excess
    assert np.all(res.reason == "stationary"), res.reason
    assert res.iterations.max() <= 100, res.iterations
    old = solve(
        skel,
        Goals(far[:, None]),
        dataclasses.replace(st, second_order=False),
        pose=start.broadcast(len(far)),
    )
    assert old.iterations.mean() > 3 * res.iterations.mean()


def _frame_by_frame_equals(
    skel: Skeleton, st: Settings, pos: np.ndarray, want: SolveResult
) -> None:
    """``Solver`` one frame at a time (the compiled loop, or the one-frame path without it)
    gives the batched solve's iterations and poses."""
    solver = Solver(skel, st)
    got = [solver.solve(Goals(pos[f : f + 1])) for f in range(len(pos))]
    np.testing.assert_array_equal([g.iterations[0] for g in got], want.iterations)
    rotations = np.concatenate([g.pose.rotations for g in got])
    np.testing.assert_allclose(rotations, want.pose.rotations, atol=1e-9)


@pytest.mark.parametrize("compiled", [True, False])
def test_every_path_takes_the_newton_step_alike(
    compiled: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A humanoid whose hand chains run through the spine (one tree) and feet on their own, one
    foot's target out of reach: ``solve`` (the compiled loop or numpy) and ``Solver`` frame by
    frame (the compiled loop, or the one-frame path without it) give the same result, which the
    Newton step changed (the foot's frames)."""
    monkeypatch.setenv("JACOBIAN_IK_KERNEL", "1" if compiled else "0")
    rng = np.random.default_rng(11)
    skel = random_humanoid(rng, spine_chains=True)
    pos = targets(skel, rng, 6, far=3)
    st = Settings(second_order=True)
    assert kernel.covers(skel, st) == (compiled and kernel.enabled())
    assert unsupported(skel, st) is None
    want = solve(skel, Goals(pos), st)
    monkeypatch.setenv("JACOBIAN_IK_KERNEL", "0")
    numpy_loop = solve(skel, Goals(pos), st)
    np.testing.assert_array_equal(numpy_loop.iterations, want.iterations)
    np.testing.assert_allclose(numpy_loop.pose.rotations, want.pose.rotations, atol=1e-9)
    monkeypatch.setenv("JACOBIAN_IK_KERNEL", "1" if compiled else "0")
    _frame_by_frame_equals(skel, st, pos, want)
    off = solve(skel, Goals(pos), dataclasses.replace(st, second_order=False))
    assert np.abs(off.pose.rotations - want.pose.rotations).max() > 1e-6


def test_goals_in_conflict_keep_the_methods_step() -> None:
    """Targets each within its chain's reach, the hands' chains sharing the spine: no unmet goal
    is out of reach, so no frame takes the Newton step: the result is the one without it."""
    rng = np.random.default_rng(12)
    skel = random_humanoid(rng, spine_chains=True)
    pos = targets(skel, rng, 12, far=3)
    pos[:, 3] = targets(skel, rng, 12, far=0)[:, 3]  # (goal 3 back in reach)
    on = solve(skel, Goals(pos), Settings(second_order=True))
    off = solve(skel, Goals(pos), Settings(second_order=False))
    assert np.any(on.goal_status == "conflict") or not np.all(on.success)
    np.testing.assert_array_equal(on.iterations, off.iterations)
    np.testing.assert_array_equal(on.pose.rotations, off.pose.rotations)


def test_the_newton_step_turns_no_bone_about_its_own_length() -> None:
    """The step leaves the twist DOFs (each ball-jointed bone's Y axis) alone: where only goals
    out of reach are unmet, twist is what they cannot see and the curvature turned it
    differently from frame to frame; swinging alone still reaches the bound."""
    rng = np.random.default_rng(5)
    skel, start, far = _curled_tentacle(rng, 3)
    twist = twist_dofs(skel)
    assert twist.sum() == 3 and np.all(skel.dof_axis[twist] == 1)
    kin = skel.forward_kinematics(start)
    jw = skel.jacobian(kin)[:, 0, :3]  # (1, 3, n), unit weights
    e = far[:1] - kin.points[:, 0]
    step, ok = second_order_step(skel, kin, jw, e, e[:, None], np.ones((1, skel.n_dofs)), 1e-3)
    assert ok[0] and np.all(step[0, twist] == 0.0) and np.abs(step[0, ~twist]).max() > 1e-3
    res = solve(skel, Goals(far[:, None]), Settings(), pose=start.broadcast(len(far)))
    excess = res.position_error[:, 0] - (np.linalg.norm(far, axis=1) - 1.0)
    assert np.all(excess <= 1.1e-6), excess


def _hands_out_of_reach(seed: int) -> tuple[Skeleton, np.ndarray]:
    """Hands through the spine (one tree), both hands' targets out of reach in opposite
    directions (the chains pull apart), the feet in reach."""
    rng = np.random.default_rng(seed)
    skel = random_humanoid(rng, spine_chains=True)
    pos = targets(skel, rng, 10, far=0)
    pos[:, 1] = targets(skel, rng, 10, far=1)[:, 1]
    sides = pos[:, :2] - pos[:, :2].mean(axis=1, keepdims=True)
    pos[:, :2] += 0.5 * sides  # farther apart: both hands stay out of reach
    return skel, pos


@pytest.mark.parametrize("compiled", [True, False])
def test_goals_pulling_apart_out_of_reach_settle(
    compiled: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two goals of one tree out of reach: no pose puts each at its own lower bound, so the
    bound test never stops the frame, and the steps crept on by 1e-8 a step to the iteration
    cap. The Newton step is only for a lone unmet goal (with both out, it crept as well), and
    the frame stops as stationary once two steps lower the residual by less than SETTLED times
    the tolerance: within the tolerance of where the steps end without that stop, in far fewer
    steps; every loop alike (numpy, compiled, one frame)."""
    monkeypatch.setenv("JACOBIAN_IK_KERNEL", "1" if compiled else "0")
    skel, pos = _hands_out_of_reach(21)
    st = Settings(second_order=True)
    res = solve(skel, Goals(pos), st)
    assert np.all(res.goal_status[:, :2] == "out_of_reach")
    off = solve(skel, Goals(pos), dataclasses.replace(st, second_order=False))
    np.testing.assert_array_equal(res.iterations, off.iterations)  # no Newton step taken
    assert np.sum(res.tree_reason[0] == "stationary") >= 8, res.tree_reason[0]
    # the settle stop off (the numpy loop): the steps creep on
    monkeypatch.setenv("JACOBIAN_IK_KERNEL", "0")
    monkeypatch.setattr(importlib.import_module("jacobian_ik.solvers.solve"), "SETTLED", 0.0)
    creep = solve(skel, Goals(pos), st)
    assert creep.iterations.mean() > 1.5 * res.iterations.mean()
    gap = np.sqrt((res.position_error[:, :2] ** 2).sum(1)) - np.sqrt(
        (creep.position_error[:, :2] ** 2).sum(1)
    )
    assert np.all(gap < st.tolerance), gap
    monkeypatch.undo()
    monkeypatch.setenv("JACOBIAN_IK_KERNEL", "1" if compiled else "0")
    _frame_by_frame_equals(skel, st, pos, res)
