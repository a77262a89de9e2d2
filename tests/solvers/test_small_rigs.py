"""Small rigs: LM's constant damping w_bar is capped by the squared reach of each IK tree in
world units (``solve.tree_settings``), so a chain a few centimetres long (a finger, a small
creature, a scene modelled at the wrong scale) converges as a 1 m one does, in every loop;
trees reaching 0.32 m or more keep w_bar."""

from __future__ import annotations

import numpy as np
import pytest

from jacobian_ik.solvers import Goals, Pose, Settings, Solver, solve
from jacobian_ik.solvers.goals import prepare_goals
from jacobian_ik.solvers.so3 import exp_so3
from jacobian_ik.solvers.solve import W_BAR_SHARE, tree_settings
from tests.rigs.skeletons import chain, humanoid


def targets(skel, rng, frames):
    """Effector points of random poses of ``skel`` (reachable by construction), (F, E, 3)."""
    free = np.unique(skel.dof_bone)
    pose = Pose.rest(skel.n_bones).broadcast(frames)
    pose.rotations[:, free] = exp_so3(0.7 * rng.normal(size=(frames, len(free), 3)))
    return skel.forward_kinematics(pose).points


@pytest.mark.parametrize("kernel", ["1", "0"])
def test_a_short_chain_converges_as_a_long_one(rng, monkeypatch, kernel):
    monkeypatch.setenv("JACOBIAN_IK_KERNEL", kernel)
    iterations = {}
    for length in (0.5, 0.01, 0.003):  # chains of 1.5 m, 3 cm and 9 mm
        skel = chain(3, length)
        result = solve(skel, Goals(position=targets(skel, rng, 20)), Settings())
        assert np.all(result.reason == "converged"), (length, result.reason)
        iterations[length] = float(np.mean(result.iterations))
    # uncapped, the 3 cm chain took about 100 iterations a frame, the 9 mm one 500 (the cap)
    assert iterations[0.003] < 2.0 * iterations[0.5] and iterations[0.01] < 2.0 * iterations[0.5]


def test_the_cap_bites_below_032_m_in_world_units(rng):
    st = Settings()
    for length, base_scale, capped in ((0.2, 1.0, False), (0.1, 1.0, True), (20.0, 0.01, False)):
        skel = chain(3, length)  # reach 3 x length, times the armature's scale in the world
        base = np.diag([base_scale, base_scale, base_scale, 1.0])
        g = prepare_goals(Goals(position=targets(skel, rng, 2), base=base), skel.n_effectors)
        own = tree_settings(st, skel, g)
        assert (own is not st) == capped, (length, base_scale)
        if capped:
            assert own.params["w_bar"] == pytest.approx(W_BAR_SHARE * (3 * length) ** 2)
    other = Settings(method="dls")
    assert tree_settings(other, chain(3, 0.001), g) is other  # LM's w_bar only


def test_each_tree_has_its_own_cap(rng):
    """The humanoid at 1 % scale (1.8 cm tall): every tree, each with the damping of its own
    reach, converges in a few iterations."""
    skel, _ = humanoid()
    base = np.diag([0.01, 0.01, 0.01, 1.0])
    points = targets(skel, rng, 6) @ base[:3, :3].T
    result = solve(skel, Goals(position=points, base=base), Settings())
    assert np.all(result.reason == "converged"), result.reason
    assert np.max(result.iterations) < 60


@pytest.mark.parametrize("kernel", ["1", "0"])
def test_one_frame_path_gives_what_solve_gives(rng, monkeypatch, kernel):
    """The compiled one-frame path (plans cached with the cap in their key) and the numpy one
    (``FrameSolver._cap``) take the capped damping as ``solve`` does, frame after frame."""
    monkeypatch.setenv("JACOBIAN_IK_KERNEL", kernel)
    skel, _ = humanoid()
    solver = Solver(skel, Settings())
    for scale in (0.01, 0.01, 1.0, 0.02):
        base = np.diag([scale, scale, scale, 1.0])
        points = targets(skel, rng, 1) @ base[:3, :3].T
        goals = Goals(position=points, base=base)
        want = solve(skel, goals, Settings())
        got = solver.solve(goals)
        assert got.reason[0] == want.reason[0] == "converged"
        assert got.iterations[0] == want.iterations[0]
        np.testing.assert_allclose(got.pose.rotations, want.pose.rotations, atol=1e-7)
