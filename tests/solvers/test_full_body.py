"""Full-body goals (issue 16): a free root (hips that help), balance over the feet, aim goals.

The humanoid is the demo's bone list (scripts/demo.py) as numpy rest frames; targets are built
from seeds, never tuned to one pose.
"""

import math
from dataclasses import replace

import numpy as np
import pytest

from jacobian_ik.solvers import (
    AXIS_VECTORS,
    Balance,
    Effector,
    GoalError,
    Goals,
    Joint,
    Pose,
    Settings,
    Skeleton,
    solve,
)
from jacobian_ik.solvers.aim import aim_rows
from jacobian_ik.solvers.balance import center_of_mass, com_jacobian, prepare_balance
from jacobian_ik.solvers.goals import prepare_goals

# name, head, tail, parent (Z up, the character faces -Y), as in scripts/demo.py
BONES = [
    ("root", (0, 0, 0), (0, 0.3, 0), None),
    ("hips", (0, 0, 1.0), (0, 0, 1.1), "root"),
    ("spine", (0, 0, 1.1), (0, 0, 1.3), "hips"),
    ("chest", (0, 0, 1.3), (0, 0, 1.5), "spine"),
    ("neck", (0, 0, 1.5), (0, 0, 1.6), "chest"),
    ("head", (0, 0, 1.6), (0, -0.02, 1.8), "neck"),
]
for _s, _k in (("L", 1.0), ("R", -1.0)):
    BONES += [
        (f"shoulder.{_s}", (0.02 * _k, 0, 1.45), (0.18 * _k, 0, 1.45), "chest"),
        (f"upper_arm.{_s}", (0.18 * _k, 0, 1.45), (0.45 * _k, 0.03, 1.42), f"shoulder.{_s}"),
        (f"forearm.{_s}", (0.45 * _k, 0.03, 1.42), (0.7 * _k, 0, 1.4), f"upper_arm.{_s}"),
        (f"hand.{_s}", (0.7 * _k, 0, 1.4), (0.8 * _k, 0, 1.4), f"forearm.{_s}"),
        (f"thigh.{_s}", (0.1 * _k, 0, 1.0), (0.1 * _k, -0.03, 0.55), "hips"),
        (f"shin.{_s}", (0.1 * _k, -0.03, 0.55), (0.1 * _k, 0, 0.1), f"thigh.{_s}"),
        (f"foot.{_s}", (0.1 * _k, 0, 0.1), (0.1 * _k, -0.16, 0.02), f"shin.{_s}"),
    ]
NAMES = [b[0] for b in BONES]
CHAINS = {"hand": ("hand", "forearm", "upper_arm"), "foot": ("foot", "shin", "thigh")}


def bone_frame(head, tail):
    """A rest frame with Y along the bone (Blender's convention, roll 0 up to a sign)."""
    y = np.subtract(tail, head, dtype=float)
    length = np.linalg.norm(y)
    y /= length
    ref = np.array([0.0, 0.0, 1.0]) if abs(y[2]) < 0.9 else np.array([0.0, -1.0, 0.0])
    x = np.cross(y, ref)
    x /= np.linalg.norm(x)
    z = np.cross(x, y)
    m = np.eye(4)
    m[:3, :3] = np.stack([x, y, z], axis=1)
    m[:3, 3] = head
    return m, length


def humanoid(free_root=True, root_stiffness=0.0, aim_head=False, neck=False):
    local = {}
    lengths = {}
    for name, head, tail, _ in BONES:
        local[name], lengths[name] = bone_frame(head, tail)
    parents, rest, joints = [], [], []
    moving = {f"{p}.{s}" for s in "LR" for c in CHAINS.values() for p in c}
    if neck:
        moving |= {"neck", "head"}
    for name, _, _, parent in BONES:
        parents.append(NAMES.index(parent) if parent else -1)
        rest.append(np.linalg.inv(local[parent]) @ local[name] if parent else local[name])
        if name == "hips" and free_root:
            joints.append(Joint.free(root_stiffness))
        elif name in moving:
            joints.append(Joint("XYZ"))
        else:
            joints.append(Joint.fixed())
    effectors = [
        Effector(NAMES.index(f"{k}.{s}"), (0.0, lengths[f"{k}.{s}"], 0.0), f"{k}.{s}")
        for k in ("hand", "foot")
        for s in "LR"
    ]
    if aim_head:
        effectors.append(Effector(NAMES.index("head"), (0.0, 0.0, 0.0), "head"))
    skel = Skeleton(parents, np.array(rest), joints, effectors, names=NAMES)
    return skel, lengths


def masses(skel, lengths):
    """Mass proportional to bone length, at the bone's middle (as the bridge does)."""
    mass = np.array([lengths[n] for n in NAMES])
    mass[NAMES.index("root")] = 0.0  # a control bone, no body
    center = np.array([[0.0, lengths[n] / 2, 0.0] for n in NAMES])
    return mass, center


def feet_goals(skel, frames):
    """Feet pinned where they stand at rest (position and orientation)."""
    kin = skel.forward_kinematics(Pose.rest(skel.n_bones))
    return kin.points[0, 2:4], kin.frames_rot[0, 2:4]


def reach_goals(skel, hands, frames, **kw):
    feet_pos, feet_rot = feet_goals(skel, frames)
    e = skel.n_effectors
    pos = np.zeros((frames, e, 3))
    pos[:, :2] = hands
    pos[:, 2:4] = feet_pos
    rot = np.broadcast_to(np.eye(3), (frames, e, 3, 3)).copy()
    rot[:, 2:4] = feet_rot
    rw = np.zeros(e)
    rw[2:4] = 1.0
    support = np.zeros(e, dtype=bool)
    support[2:4] = True
    return Goals(pos, rot, rotation_weight=rw, support=support, **kw)


def forward_targets(rng, frames):
    """Hand targets in front of the body, out of the arms' reach from the rest shoulders
    (0.63 long arms from (+-0.18, 0, 1.45)) but within reach of a leaning body."""
    out = np.zeros((frames, 2, 3))
    for f in range(frames):
        x = rng.uniform(0.15, 0.35)
        y = -rng.uniform(0.75, 0.9)
        z = rng.uniform(1.0, 1.3)
        out[f, 0] = (x, y, z)
        out[f, 1] = (-x + rng.uniform(-0.05, 0.05), y + rng.uniform(-0.05, 0.05), z)
    return out


# -- Jacobians against finite differences -------------------------------------------------------


def test_free_joint_has_six_dofs_and_its_columns_match_finite_differences(rng):
    skel, _ = humanoid(root_stiffness=0.5)
    hips = [j for j in range(skel.n_dofs) if skel.dof_bone[j] == NAMES.index("hips")]
    assert sorted(skel.dof_key[j] for j in hips) == sorted(
        ["rot_x", "rot_y", "rot_z", "loc_x", "loc_y", "loc_z"]
    )
    assert np.allclose(skel.dof_weight[hips], 0.5)
    pose = skel.apply(Pose.rest(skel.n_bones, 2), rng.normal(size=(2, skel.n_dofs)) * 0.4)
    kin = skel.forward_kinematics(pose)
    jac = skel.jacobian(kin)
    h = 1e-6
    for j in hips:
        step = np.zeros((2, skel.n_dofs))
        step[:, j] = h
        plus = skel.forward_kinematics(skel.apply(pose, step)).points
        minus = skel.forward_kinematics(skel.apply(pose, -step)).points
        assert np.allclose(jac[:, :, :3, j], (plus - minus) / (2 * h), atol=1e-6)
        assert np.abs(jac[:, :, :3, j]).max() > 0.1  # the root moves every goal


def test_aim_rows_match_finite_differences(rng):
    skel, _ = humanoid(aim_head=True, neck=True)
    frames, h = 3, 1e-6
    pose = skel.apply(Pose.rest(skel.n_bones, frames), rng.normal(size=(frames, skel.n_dofs)) * 0.5)
    targets = rng.normal(size=(frames, skel.n_effectors, 3)) + np.array([0, -1.5, 1.5])
    axis = np.array([AXIS_VECTORS[k] for k in ("X", "-Y", "Z", "-Z", "-X")])
    kin = skel.forward_kinematics(pose)
    e, theta, rows = aim_rows(kin.frames_rot, kin.points, targets, axis, skel.jacobian(kin))
    assert np.allclose(e[..., 0], theta) and np.all(e[..., 1] == 0)
    from jacobian_ik.solvers.aim import aim_axes, aim_basis

    a0 = aim_axes(kin.frames_rot, axis)
    d0 = targets - kin.points
    d0 /= np.linalg.norm(d0, axis=-1, keepdims=True)
    u, v, _ = aim_basis(a0, d0)

    def task(p):  # f(q) = U^T (a(q) - d(q)) with U frozen at the pose
        k = skel.forward_kinematics(p)
        a = aim_axes(k.frames_rot, axis)
        d = targets - k.points
        d /= np.linalg.norm(d, axis=-1, keepdims=True)
        return np.stack([np.sum((a - d) * u, -1), np.sum((a - d) * v, -1)], axis=-1)

    moved = 0
    for j in range(skel.n_dofs):
        step = np.zeros((frames, skel.n_dofs))
        step[:, j] = h
        fd = (task(skel.apply(pose, step)) - task(skel.apply(pose, -step))) / (2 * h)
        assert np.allclose(rows[..., j], fd, atol=1e-6), skel.dof_key[j]
        moved += np.abs(fd).max() > 1e-3
    assert moved > 10


def test_com_jacobian_matches_finite_differences(rng):
    skel, lengths = humanoid(neck=True)
    frames, h = 2, 1e-6
    mass, center = masses(skel, lengths)
    pose = skel.apply(Pose.rest(skel.n_bones, frames), rng.normal(size=(frames, skel.n_dofs)) * 0.5)
    bal = prepare_balance(
        Balance(mass, center, fixed_mass=2.0, fixed_center=(1, 2, 3)),
        skel,
        frames,
        np.zeros((frames, 3)),
    )
    jac = com_jacobian(skel, skel.forward_kinematics(pose), bal)
    for j in range(skel.n_dofs):
        step = np.zeros((frames, skel.n_dofs))
        step[:, j] = h
        plus = center_of_mass(skel.forward_kinematics(skel.apply(pose, step)), bal)
        minus = center_of_mass(skel.forward_kinematics(skel.apply(pose, -step)), bal)
        assert np.allclose(jac[..., j], (plus - minus) / (2 * h), atol=1e-7), skel.dof_key[j]
    # the COM of the rest pose, by hand: mass points at the bones' middles
    rest = center_of_mass(skel.forward_kinematics(Pose.rest(skel.n_bones)), bal)[0]
    mids = np.array([(np.add(b[1], b[2])) / 2 for b in BONES])
    expect = (mass @ mids + 2.0 * np.array([1, 2, 3])) / (mass.sum() + 2.0)
    assert np.allclose(rest, expect)


# -- behaviour on the humanoid ---------------------------------------------------------------------


def test_hips_help_the_hands_reach_with_the_feet_kept(rng):
    frames = 8
    hands = forward_targets(rng, frames)
    fixed, _ = humanoid(free_root=False)
    free, _ = humanoid(free_root=True)
    settings = Settings(max_iterations=200, tolerance=1e-4)
    off = solve(fixed, reach_goals(fixed, hands, frames), settings)
    on = solve(free, reach_goals(free, hands, frames), settings)
    assert np.all(off.position_error[:, :2].max(axis=1) > 0.05)  # out of the arms' reach
    assert np.all(on.position_error < 1e-3), on.position_error.max(axis=0)
    assert np.all(on.rotation_error[:, 2:4] < 1e-3)
    hips = NAMES.index("hips")
    assert np.all(np.linalg.norm(on.pose.locations[:, hips], axis=1) > 0.01)  # the hips moved


def test_a_stiff_root_moves_less(rng):
    frames = 4
    hands = forward_targets(rng, frames)
    moves = []
    for stiffness in (0.0, 0.9):
        skel, _ = humanoid(root_stiffness=stiffness)
        res = solve(skel, reach_goals(skel, hands * [1, 0.85, 1], frames), Settings())
        assert np.all(res.position_error < 1e-3)
        moves.append(np.linalg.norm(res.pose.locations[:, NAMES.index("hips")], axis=1).mean())
    assert moves[1] < moves[0]


def balance_solve(skel, lengths, hands, weight):
    mass, center = masses(skel, lengths)
    goals = reach_goals(skel, hands, len(hands), balance=Balance(mass, center, weight=weight))
    return solve(skel, goals, Settings(max_iterations=200, tolerance=1e-4))


def test_balance_keeps_the_centre_of_mass_over_the_feet(rng):
    frames = 8
    hands = forward_targets(rng, frames)
    skel, lengths = humanoid()
    off = balance_solve(skel, lengths, hands, 0.0)
    on = balance_solve(skel, lengths, hands, 1.0)
    for res in (off, on):
        assert np.all(res.position_error < 1e-3) and np.all(res.rotation_error[:, 2:4] < 1e-3)
    assert off.balance_distance is not None and on.balance_distance is not None
    ratio = off.balance_distance / np.maximum(on.balance_distance, 1e-12)
    assert np.all(ratio >= 5.0), (off.balance_distance, on.balance_distance)
    assert np.all(off.balance_distance > 0.02)  # reaching forward tips the body over


def test_balance_needs_a_support_goal_and_a_weight_in_0_1():
    skel, lengths = humanoid()
    mass, center = masses(skel, lengths)
    goals = Goals(np.zeros((4, 3)), balance=Balance(mass, center))
    with pytest.raises(GoalError, match="support"):
        prepare_goals(goals, 4)
    goals = reach_goals(skel, np.zeros((1, 2, 3)), 1, balance=Balance(mass, center, weight=2.0))
    with pytest.raises(GoalError, match="weight"):
        solve(skel, goals)
    goals = reach_goals(skel, np.zeros((1, 2, 3)), 1, balance=Balance(-mass, center))
    with pytest.raises(GoalError, match="masses"):
        solve(skel, goals)


@pytest.mark.parametrize("axis", ["Z", "-X"])
def test_a_head_aims_at_a_moving_target(axis):
    """Head and neck share the turn; the angle to the target is under 0.5 degrees."""
    skel, _ = humanoid(free_root=False, aim_head=True, neck=True)
    head = NAMES.index("head")
    frames = 24
    t = np.linspace(0, 2 * math.pi, frames)
    # a target circling in front of the face (the character faces -Y), far and near
    targets = np.stack([0.8 * np.sin(t), -1.5 + 0.5 * np.cos(2 * t), 1.7 + 0.4 * np.cos(t)], 1)
    kin = skel.forward_kinematics(Pose.rest(skel.n_bones))
    face = kin.frames_rot[0, 4].T @ np.array([0.0, -1.0, 0.0])  # the head's forward, local
    local = np.array(AXIS_VECTORS[axis])
    # aim the bone axis that faces forward at rest: the test's axis is rotated onto it
    rot_to_face = _rotation_between(local, face)
    kw = dict(position_weight=[0, 0, 0, 0, 1])
    pos = np.zeros((frames, 5, 3))
    pos[:, 4] = targets
    aim = np.zeros((5, 3))
    aim[4] = local
    skel_aim = _with_head_rest(skel, head, rot_to_face)
    res = solve(skel_aim, Goals(pos, aim=aim, **kw), Settings(mode="track", track_steps=8))
    k = skel_aim.forward_kinematics(res.pose)
    a = k.frames_rot[:, 4] @ local
    d = targets - k.points[:, 4]
    # (atan2, not arccos of the cosine: arccos loses about 1e-6 degree near 0)
    angle = np.degrees(np.arctan2(np.linalg.norm(np.cross(a, d), axis=1), np.sum(a * d, 1)))
    assert np.all(angle < 0.5), angle
    assert np.allclose(np.degrees(res.rotation_error[:, 4]), angle, atol=1e-6)
    # the neck shares the turn
    neck_turn = np.linalg.norm(_log(res.pose.rotations[:, NAMES.index("neck")]), axis=1)
    assert np.all(neck_turn[angle < 0.5].max() > 0.05)


def _rotation_between(a, b):
    from jacobian_ik.solvers import exp_so3

    axis = np.cross(a, b)
    s, c = np.linalg.norm(axis), float(np.dot(a, b))
    if s < 1e-12:
        return np.eye(3) if c > 0 else exp_so3(np.array([0.0, 0.0, math.pi]))
    return exp_so3(axis / s * math.atan2(s, c))


def _with_head_rest(skel, head, rot):
    """The skeleton with the head's rest frame turned so that ``rot @ local`` faces forward."""
    rest = np.tile(np.eye(4), (skel.n_bones, 1, 1))
    rest[:, :3, :3] = skel.rest_rot
    rest[:, :3, 3] = skel.rest_pos
    rest[head, :3, :3] = rest[head, :3, :3] @ rot
    return Skeleton(skel.parents, rest, skel.joints, skel.effectors, names=skel.names)


def _log(r):
    from jacobian_ik.solvers import angle_axis

    return angle_axis(r)


# -- units ----------------------------------------------------------------------------------------


def _in_units(skel, k, length):
    """``skel`` measured in units k times smaller (a rig in centimetres: k = 100), IK stretch on
    the arms (range 0..0.15 m), the translations weighed in ``length`` (model units)."""
    joints = []
    for b, j in enumerate(skel.joints):
        stretch = NAMES[b].startswith(("upper_arm", "forearm"))
        lim = {key: (lo * k, hi * k) for key, (lo, hi) in j.limits.items() if "loc" in key}
        lim |= {"stretch": (0.0, 0.15 * k)} if stretch else {}
        stiff = dict(j.stiffness) | ({"stretch": 0.9} if stretch else {})
        joints.append(Joint(j.rotation_axes, j.location_axes, stretch, lim, stiff, length))
    rest = np.tile(np.eye(4), (skel.n_bones, 1, 1))
    rest[:, :3, :3], rest[:, :3, 3] = skel.rest_rot, skel.rest_pos * k
    effectors = [replace(e, offset=tuple(k * np.asarray(e.offset))) for e in skel.effectors]
    return Skeleton(skel.parents, rest, joints, effectors, names=NAMES)


def test_a_rig_in_centimetres_moves_as_in_metres(rng):
    """Location and stretch DOFs weighed in a length (``Joint.length``; the bridge gives them
    the chain's): the same rig in centimetres under an object scale of 0.01 (an FBX import)
    moves its hips and stretches its arms as in metres. Weighed per model unit, it takes
    another pose (its hips and stretch 100x more reluctant)."""
    frames = 6
    hands = forward_targets(rng, frames) * [1.3, 1.2, 1.0]  # some beyond a leaning body
    metres, _ = humanoid(free_root=True)
    results = {}
    for k, length in ((1.0, 0.9), (100.0, 90.0), (100.0, 0.9)):
        skel = _in_units(metres, k, length)
        goals = reach_goals(skel, hands, frames)
        goals.position[:, 2:4] /= k  # the feet where they stand, in the world
        base = np.diag([1.0 / k] * 3 + [1.0])
        results[k, length] = solve(skel, replace(goals, base=base), Settings())
    m, cm, per_unit = results[1.0, 0.9], results[100.0, 90.0], results[100.0, 0.9]
    assert np.any(m.pose.stretch > 1e-3) and np.any(np.abs(m.pose.locations) > 1e-3)
    assert m.iterations.tolist() == cm.iterations.tolist()
    np.testing.assert_allclose(cm.pose.rotations, m.pose.rotations, atol=1e-8)
    np.testing.assert_allclose(cm.pose.locations / 100, m.pose.locations, atol=1e-10)
    np.testing.assert_allclose(cm.pose.stretch / 100, m.pose.stretch, atol=1e-10)
    np.testing.assert_allclose(cm.position_error, m.position_error, atol=1e-9)
    assert np.abs(per_unit.pose.rotations - m.pose.rotations).max() > 0.05
