"""A goal out of reach starts where it ends: its chain straight, aimed at the target
(solvers/straight.py)."""

from __future__ import annotations

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
    flips,
    solve,
    straight,
)
from jacobian_ik.solvers.goals import prepare_goals
from tests.rigs.skeletons import chain, translation
from tests.solvers.test_curvature import _curled_tentacle
from tests.solvers.test_flips import assert_each_frame_is_its_solve_alone


def mixed(rng: np.random.Generator, frames: int) -> np.ndarray:
    """Targets of a chain of length 1 from the origin: every other frame out of reach."""
    direction = rng.normal(size=(frames, 3))
    direction /= np.linalg.norm(direction, axis=1, keepdims=True)
    distance = np.where(np.arange(frames) % 2 == 0, rng.uniform(1.05, 1.6, frames), 0.6)
    return direction * distance[:, None]


def test_out_of_reach_a_chain_starts_at_its_bound_in_line_keeping_each_roll() -> None:
    """30 bones curled at random, targets beyond reach: the solve stops at once (no iteration)
    at the bound (the target's distance less the chain's length), every segment in line with
    the target, each bone turned by a swing only (no turn about its own length)."""
    rng = np.random.default_rng(30)
    skel, start, far = _curled_tentacle(rng, 30)
    st = Settings()
    res = solve(skel, Goals(far[:, None]), st, pose=start.broadcast(len(far)))
    bound = np.linalg.norm(far, axis=1) - 1.0
    assert np.all(res.iterations == 0), res.iterations
    assert np.all(res.reason == "stationary")
    np.testing.assert_allclose(res.position_error[:, 0], bound, atol=1e-12)
    kin = skel.forward_kinematics(res.pose)
    ends = np.concatenate([kin.head[:, 1:], kin.points], axis=1) - kin.head
    ends /= np.linalg.norm(ends, axis=2, keepdims=True)
    u = far / np.linalg.norm(far, axis=1, keepdims=True)
    np.testing.assert_allclose(ends, np.broadcast_to(u[:, None], ends.shape), atol=1e-12)
    # the turn of each bone from its start, in the world: about an axis across its length
    before = skel.forward_kinematics(start.broadcast(len(far)))
    turn = kin.rot @ np.swapaxes(before.rot, -1, -2)
    axis = np.stack(
        [
            turn[..., 2, 1] - turn[..., 1, 2],
            turn[..., 0, 2] - turn[..., 2, 0],
            turn[..., 1, 0] - turn[..., 0, 1],
        ],
        axis=-1,
    )
    along = np.abs(np.sum(axis * before.rot[..., :, 1], axis=-1))
    assert along.max() < 1e-9, along.max()


def test_frames_in_reach_and_other_goals_start_as_given(monkeypatch: pytest.MonkeyPatch) -> None:
    """Frames in reach are the loop's own solve bit for bit (straightening switched off for
    the comparison); frames out of reach end at their bound, no farther off than the loop
    alone gets (to the loop's stop slack)."""
    rng = np.random.default_rng(3)
    skel = chain(12, 1.0 / 12)
    start = skel.apply(Pose.rest(12), rng.normal(scale=0.15, size=(1, skel.n_dofs)))
    pos = mixed(rng, 10)
    st = Settings()
    got = solve(skel, Goals(pos[:, None]), st, pose=start)
    monkeypatch.setattr(straight, "MIN_BONES", 10**6)
    plain = solve(chain(12, 1.0 / 12), Goals(pos[:, None]), st, pose=start)
    inside = np.arange(10) % 2 == 1
    assert got.pose.rotations[inside].tobytes() == plain.pose.rotations[inside].tobytes()
    bound = np.linalg.norm(pos[~inside], axis=1) - 1.0
    np.testing.assert_allclose(got.position_error[~inside, 0], bound, atol=1e-12)
    assert np.all(got.position_error[~inside, 0] <= plain.position_error[~inside, 0] + 1e-12)
    assert np.all(got.iterations[~inside] == 0) and np.all(plain.iterations[~inside] > 5)


def with_effectors(n: int, effectors: list[Effector]) -> Skeleton:
    """``chain(n, 1.0)`` with these effectors."""
    rest = np.stack([np.eye(4) if b == 0 else translation(0, 1.0, 0) for b in range(n)])
    return Skeleton(list(range(-1, n - 1)), rest, [Joint.ball() for _ in range(n)], effectors)


@pytest.mark.parametrize(
    "case",
    ["short", "limits", "two goals", "rotation", "hinge", "carried"],
)
def test_only_a_lone_position_goal_on_a_long_chain_of_free_ball_joints(case: str) -> None:
    """Where the straight chain is not the answer, or not one to reach this way, the goal keeps
    its start: a chain under MIN_BONES, one with limits, a second goal on the chain, an
    orientation goal, a hinge, a DOF above the chain."""
    n = straight.MIN_BONES
    joint = Joint.ball()
    goals = Goals(position=np.array([[[0.0, 5.0, 0.0]]]))
    if case == "short":
        n -= 1
    if case == "limits":
        joint = Joint.ball(limits={"rot_x": (-1.0, 1.0)})
    if case == "hinge":
        joint = Joint.hinge("X")
    skel = chain(n, 1.0, joint)
    if case == "two goals":
        skel = with_effectors(
            n, [Effector(n - 1, (0, 1.0, 0), "tip"), Effector(n - 2, (0, 1.0, 0), "mid")]
        )
        goals = Goals(position=np.array([[[0.0, 5.0, 0.0], [0.0, 3.0, 0.0]]]))
    if case == "rotation":
        goals = Goals(
            position=np.array([[[0.0, 5.0, 0.0]]]),
            rotation=np.eye(3)[None, None],
            rotation_weight=np.ones(1),
        )
    if case == "carried":  # the chain's root bone hangs under a bone another goal turns
        skel = with_effectors(
            n + 1, [Effector(n, (0, 1.0, 0), "tip"), Effector(0, (0, 1.0, 0), "root")]
        )
        goals = Goals(position=np.array([[[0.0, 50.0, 0.0], [0.0, 1.0, 0.0]]]))
    g = prepare_goals(goals, skel.n_effectors)
    assert straight.chains(skel, g) == []
    start = Pose.rest(skel.n_bones)
    assert straight.straighten(skel, g, start) is start
    lone = Goals(position=np.array([[[0.0, 50.0, 0.0]]]))
    assert straight.chains(chain(straight.MIN_BONES, 1.0), prepare_goals(lone, 1))  # it does


@pytest.mark.parametrize("compiled", ["1", "0"])
def test_one_frame_at_a_time_and_the_repair_start_alike(
    compiled: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``Solver`` frame by frame (the compiled loop, or the one-frame path without it) gives
    the batched solve's poses, and a repaired frame still equals its solve alone from the start
    the repair records."""
    monkeypatch.setenv("JACOBIAN_IK_KERNEL", compiled)
    rng = np.random.default_rng(7)
    skel = chain(10, 0.1)
    pos = mixed(rng, 12)
    st = Settings()
    want = solve(skel, Goals(pos[:, None]), st)
    solver = Solver(skel, st)
    got = [solver.solve(Goals(pos[f : f + 1, None])) for f in range(len(pos))]
    np.testing.assert_array_equal([x.iterations[0] for x in got], want.iterations)
    np.testing.assert_allclose(
        np.concatenate([x.pose.rotations for x in got]), want.pose.rotations, atol=1e-9
    )
    start = Pose.rest(skel.n_bones, len(pos))
    fixed, report = flips.repair(skel, Goals(pos[:, None]), st, start, want)
    assert_each_frame_is_its_solve_alone(skel, Goals(pos[:, None]), st, fixed, report)


@pytest.mark.parametrize("path", ["solve", "Solver"])
def test_each_frame_from_the_last_one_keeps_its_bones_rotations(path: str) -> None:
    """A tentacle posed frame by frame, each frame from the pose the frame before ended at (as
    a script chaining ``Solver`` calls does), its target going in and out of reach: the bones stay
    rotations to rounding, each frame out of reach ends at its bound and each in reach is met.
    Before, straightening inverted each start's bone frames by their transpose, so a start a
    little off a rotation came out about the chain's length times farther off: 10x a frame,
    the bound missed by 6 cm after 40 frames, then NaN."""
    rng = np.random.default_rng(13)
    skel, start, _ = _curled_tentacle(rng, 36)
    t = np.linspace(0.0, 2.0 * np.pi, 60)
    u = np.stack([np.cos(t), np.sin(t) * np.cos(2 * t), np.sin(t) * np.sin(2 * t)], axis=1)
    pos = u / np.linalg.norm(u, axis=1, keepdims=True) * (0.9 + 0.25 * np.sin(3 * t + 13))[:, None]
    st = Settings()
    solver = Solver(skel, st)
    pose = start
    for f in range(len(pos)):
        goals = Goals(pos[f : f + 1, None])
        res = solve(skel, goals, st, pose=pose) if path == "solve" else solver.solve(goals, pose)
        rot = res.pose.rotations
        off = np.abs(np.swapaxes(rot, -1, -2) @ rot - np.eye(3)).max()
        assert off < 1e-12, (f, off)
        bound = max(np.linalg.norm(pos[f]) - 1.0, 0.0)
        assert res.position_error[0, 0] <= bound + st.tolerance, (f, res.position_error, bound)
        pose = res.pose
