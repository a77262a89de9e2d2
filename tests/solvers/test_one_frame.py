"""Solver's one-frame path (solvers/frame.py): the same iteration as solve() on one frame,
prepared once."""

from __future__ import annotations

import numpy as np
import pytest

from jacobian_ik.solvers import (
    METHODS,
    Effector,
    Goals,
    Joint,
    Pose,
    Settings,
    SettingsError,
    Skeleton,
    Solver,
    solve,
)
from jacobian_ik.solvers.frame import FrameSolver, damped_step, unsupported
from jacobian_ik.solvers.so3 import exp_so3
from jacobian_ik.solvers.solver import SINGULAR_VALUE_METHODS
from tests.rigs.skeletons import chain, humanoid


@pytest.fixture(autouse=True)
def _numpy_loops(monkeypatch):
    """The one-frame path against the numpy loop: with the compiled loop (solvers/kernel.py)
    on, ``Solver`` runs it instead of this path for the methods it covers."""
    monkeypatch.setenv("JACOBIAN_IK_KERNEL", "0")


def reachable_targets(skel, rng, scale=0.6):
    """Effector points and frames of a random pose (reachable by construction)."""
    pose = Pose.rest(skel.n_bones)
    free = np.unique(skel.dof_bone)
    pose.rotations[0, free] = exp_so3(scale * rng.normal(size=(len(free), 3)))
    kin = skel.forward_kinematics(pose)
    return kin.points[0], kin.frames_rot[0]


def start_pose(skel, rng):
    pose = Pose.rest(skel.n_bones)
    free = np.unique(skel.dof_bone)
    pose.rotations[0, free] = exp_so3(0.3 * rng.normal(size=(len(free), 3)))
    return pose


def compare(skel, settings, rng, w_rot, base=None):
    points, frames = reachable_targets(skel, rng)
    if base is not None:
        points = points @ base[:3, :3].T + base[:3, 3]
        frames = base[:3, :3] @ frames
    pose = start_pose(skel, rng)
    goals = Goals(position=points[None], rotation=frames[None], rotation_weight=w_rot, base=base)
    want = solve(skel, goals, settings, pose=pose)
    solver = Solver(skel, settings)
    got = solver.solve(goals, pose=pose)
    if settings.method not in SINGULAR_VALUE_METHODS:
        assert any(v is not None for v in solver._fast.values())  # the one-frame path ran
    assert got.reason[0] == want.reason[0]
    assert got.iterations[0] == want.iterations[0]
    # rounding differs (2-D vs batched numpy calls) and grows a little over 30 iterations
    np.testing.assert_allclose(got.pose.rotations, want.pose.rotations, atol=1e-7)
    np.testing.assert_allclose(got.position_error, want.position_error, atol=1e-9)
    np.testing.assert_allclose(got.rotation_error, want.rotation_error, atol=1e-9)
    np.testing.assert_allclose(got.history, want.history, rtol=1e-6, atol=1e-9)
    return got


# undamped steps (pseudoinverse, Gauss-Newton) amplify last-digit rounding differences near
# singular poses, so their paths part after a few iterations; every other method is compared
SINGLE_METHODS = [m for m in METHODS if m not in ("pseudoinverse", "gauss_newton")]


@pytest.mark.parametrize("method", SINGLE_METHODS)
def test_same_as_solve_humanoid(method, rng):
    skel, _ = humanoid()
    settings = Settings(method=method, max_iterations=30)
    compare(skel, settings, rng, np.array([1.0, 1.0, 0.0, 0.0]))


def test_same_as_solve_converges_lm(rng):
    skel, _ = humanoid()
    got = compare(skel, Settings(), rng, np.array([1.0, 0.5, 0.0, 1.0]))
    assert got.reason[0] == "converged"


@pytest.mark.parametrize("joint", [Joint.hinge("X"), Joint("XZ"), Joint("XY"), Joint("XYZ")])
def test_same_as_solve_joint_kinds(joint, rng):
    skel = chain(4, 0.5, joint)
    compare(skel, Settings(max_iterations=40), rng, np.array([0.0]))


def test_same_as_solve_stiffness_clamp_max_step(rng):
    joints = [Joint.ball(stiffness={"rot_x": 0.5}), Joint.ball(), Joint("XZ"), Joint.ball()]
    rest = np.stack([np.eye(4)] * 4)
    rest[1:, 1, 3] = 0.7
    skel = Skeleton([-1, 0, 1, 2], rest, joints, [Effector(3, (0, 0.7, 0), "tip")])
    settings = Settings(clamp_distance=0.2, max_step=0.1, max_iterations=60)
    compare(skel, settings, rng, np.array([0.0]))


def test_same_as_solve_scaled_rotated_base(rng):
    skel, _ = humanoid()
    base = np.eye(4)
    base[:3, :3] = exp_so3(np.array([0.3, -0.2, 0.5])) @ np.diag([1.5, 0.7, -1.1])
    base[:3, 3] = (0.2, -1.0, 0.4)
    compare(skel, Settings(), rng, np.array([1.0, 1.0, 0.0, 0.0]), base)


@pytest.mark.parametrize("method", ["lm", "sdls", "dls", "lm_chan_lawrence", "dls_optimal"])
def test_same_as_solve_out_of_reach_and_trees(method, rng):
    # one target far out of reach: step rejection and the stationary stop act
    skel, _ = humanoid()
    points, frames = reachable_targets(skel, rng)
    points[0] += np.array([3.0, 0.0, 0.0])
    pose = start_pose(skel, rng)
    settings = Settings(method=method)
    goals = Goals(points[None], frames[None], rotation_weight=np.array([0.0, 1.0, 0.0, 0.0]))
    want = solve(skel, goals, settings, pose=pose)
    got = Solver(skel, settings).solve(goals, pose=pose)
    assert (got.tree_reason == want.tree_reason).all()
    assert (got.goal_status == want.goal_status).all()
    np.testing.assert_allclose(got.pose.rotations, want.pose.rotations, atol=1e-7)
    np.testing.assert_allclose(got.position_error, want.position_error, atol=1e-8)


def test_same_as_solve_straight_chain_saddle():
    # a straight chain whose target lies along it, in reach: the gradient vanishes (a saddle)
    # and both paths bend the chain by the same kick
    skel = chain(3, 0.5, Joint.ball())
    target = np.array([[[0.0, 1.2, 0.0]]])
    want = solve(skel, Goals(target), Settings())
    got = Solver(skel, Settings()).solve(Goals(target))
    assert got.reason[0] == want.reason[0] == "converged"
    np.testing.assert_allclose(got.pose.rotations, want.pose.rotations, atol=1e-8)


def test_warm_start_small_move_few_iterations(rng):
    skel, _ = humanoid()
    solver = Solver(skel, Settings())
    w_rot = np.array([1.0, 1.0, 0.0, 0.0])
    points, frames = reachable_targets(skel, rng, scale=0.3)
    pose = solver.solve(
        Goals(points[None], frames[None], rotation_weight=w_rot), start_pose(skel, rng)
    ).pose
    moved = solver.solve(Goals(points[None] + 0.005, frames[None], rotation_weight=w_rot), pose)
    assert moved.reason[0] == "converged" and moved.iterations[0] <= 10


def test_damped_step_matches_normal_equations(rng):
    for m, n in [(6, 9), (9, 6)]:
        jac = rng.normal(size=(m, n))
        e = rng.normal(size=m)
        want = jac.T @ np.linalg.solve(jac @ jac.T + 0.01 * np.eye(m), e)
        np.testing.assert_allclose(damped_step(jac, e, 0.01), want, atol=1e-10)


def test_unsupported_problems_are_named():
    limited = chain(3, 1.0, Joint.ball(limits={"rot_x": (-0.5, 0.5)}))
    assert unsupported(limited, Settings()) == "joint limits"
    assert unsupported(limited, Settings(keep_limits=False)) is None
    assert unsupported(chain(3), Settings(mode="track")) == "mode 'track'"
    assert unsupported(chain(3, 1.0, Joint("X", location_axes="Y")), Settings()) is not None
    with pytest.raises(SettingsError, match="joint limits"):
        FrameSolver(limited, Settings())
