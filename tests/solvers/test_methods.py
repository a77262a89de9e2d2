"""The invariants every method must keep, and each paper's defining property."""

import math
import warnings

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
    make_method,
    solve,
)
from jacobian_ik.solvers.methods import SDLS, StepContext, clamp_max_abs, optimal_damping
from tests.rigs.skeletons import buss_kim, chain, humanoid

ALL = sorted(METHODS)
# the methods that settle on unreachable targets (with their damping as the papers use it)
SETTLING = {
    "dls": Settings(method="dls", params={"damping": 1.1}, clamp_distance=0.4),
    "sdls": Settings(method="sdls", clamp_distance=0.4),
    "lm": Settings(method="lm"),
}


def ctx_for(jac, e, rotational=None):
    n = jac.shape[2]
    rows = jac.shape[1]
    return StepContext(
        0.5 * np.einsum("fm,fm->f", e, e),
        np.arange(rows) // 3,
        math.ceil(rows / 3),
        np.ones(n, bool) if rotational is None else rotational,
        make_method("dls").initial_state(len(jac)),
    )


@pytest.mark.parametrize("name", ALL)
def test_zero_error_gives_zero_step(name, rng):
    method = make_method(name)
    jac = rng.normal(size=(3, 6, 9))
    e = np.zeros((3, 6))
    ctx = ctx_for(jac, e)
    ctx.state.update(method.initial_state(3))
    assert np.array_equal(method.step(jac, e, ctx), np.zeros((3, 9)))


@pytest.mark.parametrize("name", ALL)
def test_reached_target_is_kept_and_takes_no_step(name):
    skel = chain(3)
    pose = skel.apply(Pose.rest(3), np.array([[0.3, 0.1, -0.2, 0.4, 0.0, 0.2, -0.1, 0.2, 0.3]]))
    target = skel.forward_kinematics(pose).points
    result = solve(skel, Goals(position=target), Settings(method=name), pose)
    assert result.iterations[0] == 0 and result.reason[0] == "converged"
    assert np.array_equal(result.pose.rotations, pose.rotations)


@pytest.mark.parametrize("name", ALL)
def test_every_method_reaches_a_reachable_target(name):
    skel = chain(3)
    steps = 3000 if name in ("transpose", "steepest_descent") else 300
    result = solve(
        skel, Goals(position=[[1.2, 1.5, 0.6]]), Settings(method=name, max_iterations=steps)
    )
    assert result.reason[0] == "converged", (result.reason, result.position_error)
    assert result.position_error[0, 0] <= 1e-5


@pytest.mark.parametrize("name", ["dls", "sdls", "lm", "lm_constant", "dls_optimal"])
def test_error_decreases_on_reachable_targets(name):
    skel, _ = humanoid()
    posed = skel.apply(
        Pose.rest(skel.n_bones), np.random.default_rng(7).normal(size=(1, skel.n_dofs)) * 0.4
    )
    goals = Goals(position=skel.forward_kinematics(posed).points)  # reachable by construction
    result = solve(skel, goals, Settings(method=name, max_iterations=400))
    h = result.history[: result.iterations[0] + 1, 0]
    assert result.reason[0] == "converged"
    assert h[-1] < 1e-3 * h[0]
    # a damped method makes steady progress: no step raises the error by more than round-off
    if name in ("lm", "dls_optimal", "lm_constant"):
        assert np.all(np.diff(h) <= 1e-12)


@pytest.mark.parametrize("name", sorted(SETTLING))
def test_unreachable_target_settles_pointing_at_it(name):
    skel = chain(4)  # reach 4
    target = np.array([3.0, 4.0, 2.0])
    settings = SETTLING[name]
    settings.max_iterations = 3000
    settings.stagnation = 1e-13
    settings.gradient_tolerance = 1e-8  # settle fully (the default stops within ~1e-4)
    settings.tolerance = 1e-9  # and the lower-bound stop within 1e-9 of the best distance
    start = skel.apply(Pose.rest(4), np.full((1, skel.n_dofs), 0.05))
    result = solve(skel, Goals(position=target[None]), settings, start)
    best = np.linalg.norm(target) - 4.0
    assert abs(result.position_error[0, 0] - best) < 1e-6, (result.reason, result.position_error)
    # settled, not oscillating: one more step barely moves anything
    again = solve(
        skel,
        Goals(position=target[None]),
        Settings(
            method=settings.method,
            params=settings.params,
            clamp_distance=settings.clamp_distance,
            max_iterations=1,
            stagnation=0,
        ),
        result.pose,
    )
    assert np.abs(again.pose.rotations - result.pose.rotations).max() < 1e-4
    h = result.history[: result.iterations[0] + 1, 0]
    assert np.all(np.diff(h[-20:]) <= 1e-9)


def test_sdls_never_moves_a_joint_more_than_gamma_max(rng):
    method = SDLS(gamma_max=0.3)
    for _ in range(20):
        jac = rng.normal(size=(5, 12, 25)) * rng.random((5, 1, 25)) ** 4  # ill conditioned
        e = rng.normal(size=(5, 12)) * 10
        dq = method.step(jac, e, ctx_for(jac, e))
        assert np.abs(dq).max() <= 0.3 + 1e-12


def test_sdls_does_not_clamp_translation(rng):
    jac = rng.normal(size=(1, 3, 2))
    e = np.array([[50.0, -40.0, 30.0]])
    rotational = np.array([True, False])
    dq = SDLS(gamma_max=0.1).step(jac, e, ctx_for(jac, e, rotational))
    assert abs(dq[0, 0]) <= 0.1 + 1e-12


def test_deo_walker_optimal_damping_bounds_the_step(rng):
    method = make_method("dls_optimal", {"max_norm": 0.5})
    jac = rng.normal(size=(4, 6, 8))
    jac[:, :, 0] *= 1e-4  # nearly singular
    big = rng.normal(size=(4, 6)) * 5
    ctx = ctx_for(jac, big)
    ctx.state.update(method.initial_state(4))
    dq = method.step(jac, big, ctx)
    assert np.allclose(np.linalg.norm(dq, axis=1), 0.5, rtol=1e-5)
    assert np.all(ctx.state["lam"] > 0)
    assert np.mean(ctx.stats["newton_iterations"]) <= 8
    small = big * 1e-4
    ctx = ctx_for(jac, small)
    ctx.state.update(method.initial_state(4))
    pinv = np.einsum("fnm,fm->fn", np.linalg.pinv(jac), small)
    if np.all(np.linalg.norm(pinv, axis=1) <= 0.5):
        dq = method.step(jac, small, ctx)
        assert np.all(ctx.state["lam"] == 0)
        assert np.allclose(dq, pinv, atol=1e-12)


def test_optimal_damping_newton_warm_start_takes_few_iterations(rng):
    s = np.sort(rng.random((50, 6)), axis=1)[:, ::-1]
    gamma = rng.normal(size=(50, 6)) * 3
    lam, its = optimal_damping(s, gamma, 1.0, np.zeros(50))
    _lam2, its2 = optimal_damping(s, gamma * 1.01, 1.0, lam)
    assert its2.mean() <= its.mean() and its2.mean() <= 3


@pytest.mark.parametrize(
    "name", ["lm", "dls", "sdls", "dls_optimal", "dls_chan_lawrence", "pseudoinverse", "dls_kelmar"]
)
def test_batched_equals_one_at_a_time(name, rng):
    skel = buss_kim()
    posed = skel.apply(Pose.rest(skel.n_bones, 6), rng.normal(size=(6, skel.n_dofs)) * 0.3)
    targets = skel.forward_kinematics(posed).points  # reachable: every frame converges
    steps = 3000 if name == "transpose" else 300
    clamp = 0.4 if name != "lm" else None
    settings = Settings(method=name, max_iterations=steps, clamp_distance=clamp)
    batch = solve(skel, Goals(position=targets), settings)
    for f in range(len(targets)):
        one = solve(skel, Goals(position=targets[f : f + 1]), settings)
        assert one.reason[0] in ("converged", "stagnated")
        assert np.allclose(batch.pose.rotations[f], one.pose.rotations[0], atol=1e-9, rtol=0)
        assert batch.iterations[f] == one.iterations[0] and batch.reason[f] == one.reason[0]


@pytest.mark.parametrize("name", ALL)
def test_no_nan_from_singular_start_poses(name):
    skel = chain(3)  # fully stretched at rest, all joints zero
    targets = np.array(
        [
            [[0.0, 5.0, 0.0]],
            [[0.0, 3.0, 0.0]],
            [[0.0, 0.0, 0.0]],
            [[0.0, -3.0, 0.0]],
            [[1e-9, 3.0, 0.0]],
        ]
    )
    result = solve(skel, Goals(position=targets), Settings(method=name, max_iterations=50))
    for arr in (result.pose.rotations, result.position_error, result.history):
        assert np.all(np.isfinite(arr))


def test_orientation_goals_are_met():
    skel, _ = humanoid()
    pose = skel.apply(
        Pose.rest(skel.n_bones), np.random.default_rng(3).normal(size=(1, skel.n_dofs)) * 0.3
    )
    kin = skel.forward_kinematics(pose)
    goals = Goals(position=kin.points, rotation=kin.frames_rot, rotation_weight=[1, 1, 0, 0])
    result = solve(skel, goals, Settings(method="lm", max_iterations=200))
    assert result.reason[0] == "converged"
    assert result.position_error.max() <= 1e-5 and result.rotation_error[0, :2].max() <= 1e-4


def test_base_transform_measures_errors_in_world_units():
    skel = chain(2)
    base = np.diag([2.0, -0.5, 3.0, 1.0])
    base[:3, 3] = (1, 2, 3)
    target_model = np.array([0.5, 1.2, 0.7])
    target_world = base[:3, :3] @ target_model + base[:3, 3]
    result = solve(
        skel, Goals(position=target_world[None, None], base=base), Settings(tolerance=1e-7)
    )
    tip_model = skel.forward_kinematics(result.pose).points[0, 0]
    assert np.linalg.norm(base[:3, :3] @ tip_model + base[:3, 3] - target_world) <= 1e-7


def test_track_mode_starts_each_frame_from_the_previous_result():
    skel = chain(3)
    t = np.linspace(0, 1, 30)
    targets = np.stack([np.sin(t), 2.5 + 0.2 * np.cos(t), 0.3 * t], axis=1)[:, None]
    result = solve(
        skel, Goals(position=targets), Settings(method="dls", mode="track", track_steps=2)
    )
    assert np.all(result.iterations <= 2)
    # frame 5 equals two steps from frame 4's result
    again = solve(
        skel,
        Goals(position=targets[5:6]),
        Settings(method="dls", mode="track", track_steps=2),
        result.pose[4],
    )
    assert np.allclose(again.pose.rotations, result.pose.rotations[5:6], atol=1e-12)


def test_joint_limits_hold_and_lock():
    skel = chain(3, joint=Joint("X", limits={"rot_x": (-0.5, 0.5)}))
    result = solve(
        skel, Goals(position=[[0.0, 0.0, 2.9]]), Settings(method="lm", max_iterations=200)
    )
    coords = skel.coordinates(result.pose)
    assert np.all(coords >= -0.5 - 1e-9) and np.all(coords <= 0.5 + 1e-9)
    assert np.isclose(coords.max(), 0.5)  # pushed to the limit, held there


def test_ball_joint_swing_twist_limits(rng):
    skel = chain(
        2,
        joint=Joint(
            "XYZ", limits={"rot_x": (-0.3, 0.3), "rot_y": (-0.1, 0.1), "rot_z": (-0.2, 0.6)}
        ),
    )
    result = solve(
        skel, Goals(position=[[1.5, 0.2, 1.0]]), Settings(method="sdls", max_iterations=200)
    )
    coords = skel.coordinates(result.pose)
    assert np.all(coords >= skel.dof_min - 1e-9) and np.all(coords <= skel.dof_max + 1e-9)


def test_stiffness_makes_a_dof_move_less():
    free = chain(2)
    stiff = chain(2, joint=Joint("XYZ", stiffness={"rot_z": 0.9, "rot_x": 0.9}))
    goal = Goals(position=[[1.0, 1.2, 0.4]])
    a = solve(free, goal, Settings(max_iterations=1))
    b = solve(stiff, goal, Settings(max_iterations=1))
    za = np.abs(free.coordinates(a.pose)[0, [0, 2]]).sum()
    zb = np.abs(stiff.coordinates(b.pose)[0, [0, 2]]).sum()
    assert zb < za


def test_nullspace_rest_pull_keeps_the_goal():
    skel = chain(4)
    goal = Goals(position=[[1.0, 2.5, 0.5]])
    start = skel.apply(Pose.rest(4), np.random.default_rng(5).normal(size=(1, skel.n_dofs)) * 0.5)
    plain = solve(skel, goal, Settings(method="lm", max_iterations=300), start)

    def dist(r):
        return np.linalg.norm(skel.rest_offsets(r.pose))

    # the exact projection leaves the goal alone to first order; Deo-Walker's damped
    # (I - J* J) v has a component in the range of J^T (their section 4), so a small bias stays
    for mode, bound in (("exact", 1e-5), ("damped", 1e-3)):
        settings = Settings(method="lm", nullspace=mode, rest_weight=0.1, max_iterations=300)
        pulled = solve(skel, goal, settings, start)
        assert pulled.position_error[0, 0] <= bound
        assert dist(pulled) < 0.8 * dist(plain)


def test_jacobian_at_targets_option_converges():
    skel = chain(3)
    result = solve(
        skel,
        Goals(position=[[1.0, 1.5, 0.5]]),
        Settings(method="dls", jacobian_at_targets=True, max_iterations=500),
    )
    assert result.reason[0] == "converged"


def test_unknown_method_and_parameter_are_errors():
    with pytest.raises(SettingsError, match="unknown method"):
        Settings(method="magic")
    with pytest.raises(SettingsError, match="no parameter"):
        Settings(method="dls", params={"lambda": 1})
    with pytest.raises(SettingsError):
        Settings(method="sdls", params={"gamma_max": -1})
    with pytest.raises(SettingsError):
        Settings(mode="bake")


def test_divergence_returns_the_best_pose():
    skel = chain(3)
    settings = Settings(
        method="pseudoinverse",
        params={"threshold": 1e-14},
        max_iterations=200,
        divergence_count=2,
        stagnation=0,
    )
    result = solve(skel, Goals(position=[[0.0, 4.5, 0.1]]), settings)
    assert np.all(np.isfinite(result.pose.rotations))
    assert result.history[: result.iterations[0] + 1, 0].min() == pytest.approx(
        np.linalg.norm(skel.forward_kinematics(result.pose).points[0, 0] - [0, 4.5, 0.1])
    )


def leg():
    """Thigh and shin along -Z (2 x 0.45), ball hip, ball knee; effectors: foot, knee."""
    from jacobian_ik.solvers import Effector, Skeleton

    down = np.array([[1.0, 0, 0, 0], [0, 0, 1, 0], [0, -1, 0, 1.0], [0, 0, 0, 1]])  # Y -> -Z
    shin = np.eye(4)
    shin[1, 3] = 0.45
    rest = np.stack([down, shin])
    effectors = [Effector(1, (0, 0.45, 0), "foot"), Effector(1, (0, 0, 0), "knee")]
    return Skeleton([-1, 1 - 1], rest, [Joint.ball(), Joint.ball()], effectors)


@pytest.mark.parametrize("pole_y", [-1.0, 1.0])
def test_pole_goal_bends_the_knee_toward_the_pole_with_the_foot_on_target(pole_y):
    skel = leg()
    foot = np.array([0.0, 0.0, 0.3])  # hip at z = 1, the leg must bend
    pole = np.array([0.0, pole_y, 0.55])
    goals = Goals(position=np.stack([foot, pole])[None], secondary=[False, True])
    result = solve(skel, goals, Settings(method="lm", max_iterations=200))
    kin = skel.forward_kinematics(result.pose)
    assert result.position_error[0, 0] <= 1e-5
    assert np.sign(kin.points[0, 1, 1]) == np.sign(pole_y)  # the knee is on the pole's side
    assert abs(kin.points[0, 1, 0]) < 1e-3  # and in the plane of hip, foot and pole


def test_track_mode_in_chunks_equals_the_whole_range():
    skel = chain(3)
    t = np.linspace(0, 3, 40)
    targets = np.stack([np.sin(t) * 2, 1.5 + np.cos(2 * t), 0.5 * t], axis=1)[:, None]
    settings = Settings(
        method="dls_optimal", mode="track", track_steps=2, clamp_distance=0.3, clamp_adaptive=True
    )
    whole = solve(skel, Goals(position=targets), settings)
    first = solve(skel, Goals(position=targets[:17]), settings)
    second = solve(
        skel, Goals(position=targets[17:]), settings, first.pose[-1], resume=first.resume
    )
    assert np.allclose(
        np.concatenate([first.pose.rotations, second.pose.rotations]),
        whole.pose.rotations,
        atol=1e-12,
    )


def test_adaptive_clamp_carries_d_i_across_track_frames():
    """Buss-Kim sec. 3: D_max,i = d_i + D_max with d_i what the last step gained on its own
    target; track mode's second frame must clamp with the first frame's d_i."""
    skel = buss_kim()
    start = skel.forward_kinematics(Pose.rest(skel.n_bones)).points
    target = start + np.array([1.5, 0.8, 0.0])  # far: every error clamped
    settings = dict(
        method="dls",
        params={"damping": 0.7},
        clamp_distance=0.4,
        clamp_adaptive=True,
        tolerance=0,
        stagnation=0,
    )
    track = solve(skel, Goals(position=np.repeat(target, 2, 0)), Settings(mode="track", **settings))
    converge = solve(skel, Goals(position=target), Settings(max_iterations=2, **settings))
    assert np.allclose(track.pose.rotations[1], converge.pose.rotations[0], atol=1e-12)


@pytest.mark.parametrize("mode", ["converge", "track"])
@pytest.mark.parametrize("name", ALL)
def test_a_goal_no_dof_moves_beside_a_free_chain(name, mode):
    """A goal on a bone no DOF moves is an IK tree of its own with an empty Jacobian: no step
    for it (Maciejewski-Klein's and Chiaverini's smallest singular value raised IndexError
    there), while the free chain's goal is solved as alone."""
    rest = np.tile(np.eye(4), (3, 1, 1))
    rest[1:, 1, 3] = 1.0
    joints = [Joint(""), Joint("XYZ"), Joint("XYZ")]
    effectors = [Effector(0, (0.0, 0.5, 0.0)), Effector(2, (0.0, 1.0, 0.0))]
    skel = Skeleton([-1, 0, 1], rest, joints, effectors)
    goals = Goals(position=np.array([[[0.2, 0.5, 0.0], [0.6, 2.2, 0.4]]]))
    settings = Settings(method=name, mode=mode, max_iterations=50)
    both = solve(skel, goals, settings)
    alone = solve(chain_of_two(), Goals(position=goals.position[:, 1:]), settings)
    assert np.all(np.isfinite(both.pose.rotations))
    np.testing.assert_allclose(both.position_error[:, 1], alone.position_error[:, 0], atol=1e-9)
    assert both.position_error[0, 0] == pytest.approx(0.2)  # the fixed goal stays where it was


def chain_of_two():
    """The free part of the skeleton above: two ball joints from (0, 1, 0), on a fixed root."""
    rest = np.tile(np.eye(4), (3, 1, 1))
    rest[1:, 1, 3] = 1.0
    return Skeleton(
        [-1, 0, 1], rest, [Joint(""), Joint("XYZ"), Joint("XYZ")], [Effector(2, (0.0, 1.0, 0.0))]
    )


def test_clamp_max_abs_scales_only_steps_over_the_bound_and_never_overflows() -> None:
    """ClampMaxAbs (Buss-Kim 2005): a step whose largest rotational component is over the bound
    is scaled down to it, any other kept as it is, translations not measured; a huge bound over
    a tiny step (SDLS's gamma on a near-singular frame) neither overflows nor warns (it did)."""
    dq = np.array([[0.2, -0.5, 3.0], [1e-300, 0.0, 0.0], [0.01, 0.02, 9.0]])
    rotational = np.array([True, True, False])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = clamp_max_abs(dq, np.array([0.25, 1e300, 0.25]), rotational)
        one = clamp_max_abs(dq[0], 0.25, rotational)
    np.testing.assert_allclose(out[0], dq[0] * 0.5)
    assert out[1].tobytes() == dq[1].tobytes() and out[2].tobytes() == dq[2].tobytes()
    np.testing.assert_allclose(one, dq[0] * 0.5)
