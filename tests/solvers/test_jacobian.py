"""Every Jacobian column against central finite differences, for every joint kind."""

import numpy as np
from solver_cases import tree_with_every_joint

from jacobian_ik.solvers import Pose, angle_axis


def random_pose(rng, skel, frames):
    pose = Pose.rest(skel.n_bones, frames)
    pose.locations[:] = rng.normal(size=pose.locations.shape) * 0.2
    pose.stretch[:] = rng.normal(size=pose.stretch.shape) * 0.2
    return skel.apply(pose, rng.normal(size=(frames, skel.n_dofs)) * 0.8)


def test_every_joint_kind_is_in_the_tree(rng):
    skel = tree_with_every_joint(rng)
    assert {"rot_x", "rot_y", "rot_z", "loc_x", "loc_y", "stretch"} <= set(skel.dof_key)
    assert set(skel.dof_kind.tolist()) == {0, 1, 2, 3}


def test_jacobian_matches_finite_differences(rng):
    skel = tree_with_every_joint(rng)
    frames, h = 3, 1e-6
    pose = random_pose(rng, skel, frames)
    kin = skel.forward_kinematics(pose)
    jac = skel.jacobian(kin)  # (F, E, 6, n)
    for j in range(skel.n_dofs):
        step = np.zeros((frames, skel.n_dofs))
        step[:, j] = h
        plus = skel.forward_kinematics(skel.apply(pose, step))
        minus = skel.forward_kinematics(skel.apply(pose, -step))
        dpos = (plus.points - minus.points) / (2 * h)
        # orientation rows: the angular velocity, a(R+ R-^T) / 2h
        drot = angle_axis(plus.frames_rot @ np.swapaxes(minus.frames_rot, -1, -2)) / (2 * h)
        assert np.allclose(jac[:, :, :3, j], dpos, atol=1e-6), skel.dof_key[j]
        assert np.allclose(jac[:, :, 3:, j], drot, atol=1e-6), skel.dof_key[j]


def test_jacobian_has_zero_columns_for_dofs_that_do_not_move_an_effector(rng):
    skel = tree_with_every_joint(rng)
    kin = skel.forward_kinematics(random_pose(rng, skel, 1))
    jac = skel.jacobian(kin)[0]
    for e in range(skel.n_effectors):
        for j in range(skel.n_dofs):
            if not skel.dof_moves[e, j]:
                assert np.all(jac[e, :, j] == 0)
    # a stretch does not move a point at its own bone's head
    stretch_4 = [j for j in range(skel.n_dofs) if skel.dof_bone[j] == 4 and skel.dof_kind[j] == 3]
    assert not skel.dof_moves[1, stretch_4[0]] and skel.dof_moves[0, stretch_4[0]]


def test_jacobian_at_targets_uses_the_given_points(rng):
    skel = tree_with_every_joint(rng)
    kin = skel.forward_kinematics(random_pose(rng, skel, 2))
    shifted = kin.points + 0.3
    jac_t = skel.jacobian(kin, shifted)
    kin.points = shifted
    assert np.allclose(jac_t, skel.jacobian(kin))


def test_forward_kinematics_is_the_product_of_local_transforms(rng):
    skel = tree_with_every_joint(rng)
    pose = random_pose(rng, skel, 2)
    frames = skel.forward(pose)
    for f in range(2):
        for b in range(skel.n_bones):
            local = np.eye(4)
            local[:3, :3] = skel.rest_rot[b]
            local[:3, 3] = skel.rest_pos[b]
            basis = np.eye(4)
            basis[:3, :3] = pose.rotations[f, b]
            basis[:3, 3] = pose.locations[f, b]
            p = skel.parents[b]
            parent = np.eye(4)
            if p >= 0:
                parent = frames[f, p].copy()
                parent[:3, 3] += pose.stretch[f, p] * parent[:3, 1]
            assert np.allclose(frames[f, b], parent @ local @ basis, atol=1e-12)
