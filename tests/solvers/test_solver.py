"""``Solver``: prepared once, solved many times, the same results as ``solve``."""

from __future__ import annotations

import numpy as np

from jacobian_ik.solvers import Goals, Pose, Settings, Solver, exp_so3, solve
from tests.rigs.skeletons import humanoid


def test_one_solver_many_solves_equals_solve(rng):
    skel, _ = humanoid()
    free = np.unique(skel.dof_bone)
    solver = Solver(skel, Settings(method="sdls"))
    pose = Pose.rest(skel.n_bones)
    for k in range(4):
        posed = Pose.rest(skel.n_bones, 3)
        posed.rotations[:, free] = exp_so3(0.5 * rng.normal(size=(3, len(free), 3)))
        kin = skel.forward_kinematics(posed)
        # the weights change between calls: each set gets its own prepared trees
        w_rot = np.array([1.0, 1.0, 0.0, 0.0]) if k % 2 else np.zeros(4)
        goals = Goals(kin.points + 0.05 * k, kin.frames_rot, rotation_weight=w_rot)
        got = solver.solve(goals, pose)
        want = solve(skel, goals, Settings(method="sdls"), pose)
        np.testing.assert_array_equal(got.pose.rotations, want.pose.rotations)
        np.testing.assert_array_equal(got.position_error, want.position_error)
        assert (got.reason == want.reason).all()
        assert (got.goal_status == want.goal_status).all()
        pose = got.pose[2]
