"""Jitter-free bakes (solvers/smooth.py): after the solve and the flip repair, the motion is
smoothed in the null space of the goals, then along the valley of goals in conflict
(``settle``). The jitter falls, no goal ends farther off than the solve put it (a met goal
stays met; where ``settle`` re-solved a tree, its unmet goals are judged together), no bone
jumps where it did not, a tree of one goal keeps the solve's pose where it is met (a tree of
several goals is smoothed at every frame), and the result is bit-identical run to run.

Rigs: the flip repair's humanoids (hands through the spine: one tree of two conflicting goals,
targets in and out of reach; tests/solvers/test_flips.py) and a double-Y tree of four goals
through one trunk, once with stretching bones (the correction step moves them too)."""

from __future__ import annotations

import math
import sys

import numpy as np
import pytest

from benchmarks import common
from jacobian_ik.solvers import (
    Effector,
    Goals,
    Joint,
    Pose,
    Settings,
    SettingsError,
    Skeleton,
    SolveResult,
    flips,
    kernel,
    solve,
)
from jacobian_ik.solvers import smooth as smooth_module
from jacobian_ik.solvers.rotations import quaternion_from_matrix
from jacobian_ik.solvers.smooth import SINGLE, smooth
from jacobian_ik.solvers.so3 import exp_so3
from jacobian_ik.solvers.solve import carry_groups
from tests.solvers.test_flips import smooth_targets
from tests.solvers.test_trees import random_humanoid

ANGLE = math.radians(10.0)
FRAMES = 150  # at 60 the targets move so fast that no cubic follows them at 0.1 degree
PASSES = Settings().smooth_passes


def rough(skel: Skeleton, rotations: np.ndarray, bones: np.ndarray | None = None) -> float:
    """benchmarks/common.py's jitter measure over ``bones`` (the solved bones)."""
    bones = np.unique(skel.dof_bone) if bones is None else bones
    return common.rough(quaternion_from_matrix(rotations[:, bones]))


def humanoid(seed: int, carried: bool = False) -> tuple[Skeleton, Goals, Settings]:
    """Hands through the spine; ``carried``: a chest goal's chain holds the spine and each limb
    is its own chain of 3, so the hands' trees ride on the chest's."""
    rng = np.random.default_rng(700 + seed)
    skel = random_humanoid(rng, spine_chains=not carried, chest_goal=carried)
    return skel, Goals(position=smooth_targets(skel, rng, FRAMES)), Settings()


def double_y(seed: int, stretch: bool = False) -> tuple[Skeleton, Goals, Settings]:
    """A trunk of 3, two arms of 2 and four fingers of 2 (ball joints), a goal on each
    fingertip with its chain to the root: four goals pulling one trunk apart. With ``stretch``
    the trunk's upper bones also stretch (up to 5 cm)."""
    rng = np.random.default_rng(900 + seed)
    parents, heads, tails = [-1], [np.zeros(3)], [np.array([0.0, 0.0, 0.4])]

    def add(parent: int, direction: np.ndarray, length: float) -> int:
        head = tails[parent]
        parents.append(parent)
        heads.append(head)
        tails.append(head + length * direction / np.linalg.norm(direction))
        return len(parents) - 1

    b = add(add(0, np.array([0, 0, 1.0]), 0.35), np.array([0, 0, 1.0]), 0.3)
    tips = []
    for side in (-1.0, 1.0):
        arm = add(add(b, np.array([side, 0, 0.6]), 0.3), np.array([side, 0, 0.3]), 0.25)
        for f in (-1.0, 1.0):
            d = np.array([side, 0.4 * f, 0.2]) + 0.1 * rng.normal(size=3)
            tips.append(add(add(arm, d, 0.15), d, 0.12))
    model = np.zeros((len(parents), 4, 4))  # each bone's rest frame in model space, Y along it
    for i, (h, t) in enumerate(zip(heads, tails, strict=True)):
        y = (t - h) / np.linalg.norm(t - h)
        x = np.cross(y, [0.3, 0.5, 0.8])
        x /= np.linalg.norm(x)
        model[i, :3, :3] = np.stack([x, y, np.cross(x, y)], axis=1)
        model[i, :3, 3] = h
        model[i, 3, 3] = 1.0
    rest = np.array(
        [model[i] if p < 0 else np.linalg.inv(model[p]) @ model[i] for i, p in enumerate(parents)]
    )
    length = [float(np.linalg.norm(t - h)) for h, t in zip(heads, tails, strict=True)]
    effectors = [Effector(t, (0.0, length[t], 0.0)) for t in tips]
    skel = Skeleton(parents, rest, [Joint.ball()] * len(parents), effectors)
    goals = Goals(position=smooth_targets(skel, rng, FRAMES))  # around the reach without stretch
    if stretch:
        joints = [Joint.ball()] * len(parents)
        for bone in (1, 2):
            joints[bone] = Joint.ball(stretch=True, limits={"stretch": (0.0, 0.05)})
        skel = Skeleton(parents, rest, joints, effectors)
    return skel, goals, Settings()


CASES = [("humanoid", s) for s in range(3)] + [("double_y", s) for s in range(2)]
CASES += [("stretch", 0), ("carried", 0), ("carried", 1)]


@pytest.fixture(scope="module")
def solved() -> dict:
    out = {}
    for kind, seed in CASES:
        if kind in ("humanoid", "carried"):
            skel, goals, st = humanoid(seed, carried=kind == "carried")
        else:
            skel, goals, st = double_y(seed, stretch=kind == "stretch")
        start = Pose.rest(skel.n_bones, FRAMES)
        repaired, _ = flips.repair(skel, goals, st, start, solve(skel, goals, st))
        out[kind, seed] = (skel, goals, st, repaired, smooth(skel, goals, st, repaired, PASSES))
    return out


def test_the_jitter_falls(solved: dict) -> None:
    """On these rigs (conflicting goals, targets in and out of reach) the share of samples off
    their cubic falls by a fifth or more in total (measured: 21 %, from 3.00 to 2.37 summed
    over the rigs; 27 % from 4.02 to 2.92 while the saddle kick also fired where goals
    conflict, which left the solves rougher), and on every rig."""
    before = after = 0.0
    for skel, _, _, repaired, (smoothed, report) in solved.values():
        b, a = rough(skel, repaired.pose.rotations), rough(skel, smoothed.pose.rotations)
        assert a < b, (b, a)
        assert report.changed.any()
        before, after = before + b, after + a
    assert after < 0.8 * before, (before, after)


def test_steps_over_the_flip_angle_among_slow_ones_are_taken_out(solved: dict) -> None:
    """A bone that steps a little over ``flip_angle`` between frames that move slowly is moved
    too (solvers/smooth.py WINDOW, 15 degrees), where that adds no jump: the joint jumps over 10
    degrees fall on these rigs by 3 % or more in all and rise on none (measured: 583 -> 555;
    573 with a 5-degree window, which left such bones alone)."""
    before = after = 0
    for skel, _, _, repaired, (smoothed, _) in solved.values():
        bones = np.unique(skel.dof_bone)
        b = flips.count_jumps(repaired.pose.rotations[:, bones], ANGLE)
        a = flips.count_jumps(smoothed.pose.rotations[:, bones], ANGLE)
        assert a <= b, (b, a)
        before, after = before + b, after + a
    assert after < 0.97 * before, (before, after)


def test_single_chains_out_of_reach_are_smoothed(solved: dict) -> None:
    """The trees of one goal (the feet's chains of 3): where a target is out of reach the chain
    lies straight toward it and turns freely about that line; the smoothing takes that jitter
    out too (solvers/smooth.py SINGLE)."""
    before = after = 0.0
    for kind, seed in [("humanoid", s) for s in range(3)]:
        skel, _, _, repaired, (smoothed, _) = solved[kind, seed]
        single = [t for t in repaired.trees if len(t) == 1]
        bones = np.unique(skel.dof_bone[skel.dof_moves[np.concatenate(single)].any(axis=0)])
        before += rough(skel, repaired.pose.rotations, bones)
        after += rough(skel, smoothed.pose.rotations, bones)
    assert after < 0.75 * before, (before, after)


def as_good(
    skel: Skeleton, st: Settings, repaired: SolveResult, smoothed: SolveResult, settled: np.ndarray
) -> np.ndarray:
    """(F, E) each goal within the bound the smoothing keeps to: the null-space passes keep
    every goal as near as the solve put it (a met goal within the tolerance, another within
    its error plus a tenth of the tolerance); at a frame ``settle`` re-solved (``settled``),
    the goals of a tree (with the trees it carries) are judged together: the met ones stay
    met, the others' root-sum-square error grows by at most a tenth of the tolerance a goal."""
    own, now, tol = repaired.position_error, smoothed.position_error, st.tolerance
    met = own <= tol
    each = now <= np.where(met, tol, own + 0.1 * tol)
    for tree in carry_groups(skel, repaired.trees or []):
        m, e, o = met[:, tree], now[:, tree], own[:, tree]
        together = np.sqrt(np.sum(np.where(m, 0.0, e**2), axis=1))
        bound = np.sqrt(np.sum(np.where(m, 0.0, o**2), axis=1))
        bound += 0.1 * tol * np.sqrt(np.sum(~m, axis=1))
        tree_ok = np.all(~m | (e <= tol), axis=1) & (together <= bound) & settled
        each[:, tree] |= tree_ok[:, None]
    return each


@pytest.mark.parametrize("case", CASES)
def test_goals_stay_where_the_solve_put_them(solved: dict, case: tuple[str, int]) -> None:
    skel, goals, st, repaired, (smoothed, report) = solved[case]
    assert np.all(as_good(skel, st, repaired, smoothed, report.settled))
    met = repaired.position_error <= st.tolerance
    assert np.array_equal(smoothed.goal_status, solve_status(skel, goals, st, smoothed))
    # the errors reported are the pose's
    kin = skel.forward_kinematics(smoothed.pose)
    err = np.linalg.norm(np.asarray(goals.position) - kin.points, axis=-1)
    np.testing.assert_allclose(smoothed.position_error, err, atol=1e-12)
    # where the goal of a tree of one goal was met, its bones keep the solve's pose (a tree
    # with the trees it carries counting as one); every frame of it unless SINGLE
    assert report.changed.any()
    groups = carry_groups(skel, repaired.trees)
    assert len(groups) == len(repaired.trees) - 2 * (case[0] == "carried")
    singles = [tree for tree in groups if len(tree) == 1]
    assert singles or case[0] != "humanoid"
    for tree in singles:
        bones = np.unique(skel.dof_bone[skel.dof_moves[tree].any(axis=0)])
        kept = met[:, tree[0]] | (not SINGLE)
        assert kept.any()
        same = smoothed.pose.rotations[kept][:, bones] == repaired.pose.rotations[kept][:, bones]
        assert np.all(same)


def test_trees_of_several_goals_are_smoothed_where_every_goal_is_met(solved: dict) -> None:
    """A tree of several goals has a large null space (a trunk under four fingers, a spine
    under two hands): where every goal is met the trunk still stops wherever the frame's start
    led it, so those frames are smoothed too (solvers/smooth.py MET_FRAMES): their goals stay
    met, and their samples off the cubic through their neighbours fall, summed over the rigs
    (measured: 563 -> 404 samples more than 0.1 degree off; 563 -> 568 without MET_FRAMES)."""
    count = {"before": 0, "after": 0}
    for skel, _, st, repaired, (smoothed, _) in solved.values():
        met = repaired.position_error <= st.tolerance
        for tree in carry_groups(skel, repaired.trees):
            if len(tree) < 2:
                continue
            bones = np.unique(skel.dof_bone[skel.dof_moves[tree].any(axis=0)])
            every = np.all(met[:, tree], axis=1)
            assert np.all(smoothed.position_error[every][:, tree] <= st.tolerance)
            at = np.flatnonzero(every[2:-2])  # the stencil's rows: frames 2 .. F - 3
            for result, total in ((repaired, "before"), (smoothed, "after")):
                off = common.off_cubic(quaternion_from_matrix(result.pose.rotations[:, bones]))
                count[total] += int(np.sum(off[at] > 0.1))
    assert count["before"] > 0
    assert count["after"] < 0.9 * count["before"], count


def solve_status(skel: Skeleton, goals: Goals, st: Settings, result: object) -> np.ndarray:
    from jacobian_ik.solvers.goals import prepare_goals
    from jacobian_ik.solvers.solve import goal_status

    return goal_status(skel, prepare_goals(goals, skel.n_effectors), result, st)  # type: ignore[arg-type]


@pytest.mark.parametrize("case", CASES)
def test_no_bone_jumps_where_it_did_not(solved: dict, case: tuple[str, int]) -> None:
    _, _, _, repaired, (smoothed, _) = solved[case]

    was = flips.joint_steps(repaired.pose.rotations) > ANGLE
    now = flips.joint_steps(smoothed.pose.rotations) > ANGLE
    assert not np.any(now & ~was)


@pytest.mark.parametrize("case", [("humanoid", 2), ("double_y", 0)])
def test_settling_takes_the_jitter_out_along_the_valley(
    case: tuple[str, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Goals in conflict (hands through the spine, a double-Y tree), targets moving slowly (400
    frames): where the solve stops along their valley jitters by hundredths of a degree, which
    the null-space passes cannot take out and ``settle`` does. Measured: samples more than
    0.01 degree off their cubic 0.42 -> 0.20 and 0.33 -> 0.28 (without -> with), those more
    than 0.1 degree 0.068 -> 0.056 and 0.112 -> 0.101."""
    kind, seed = case
    monkeypatch.setattr(sys.modules[__name__], "FRAMES", 400)
    skel, goals, st = humanoid(seed) if kind == "humanoid" else double_y(seed)
    start = Pose.rest(skel.n_bones, 400)
    repaired, _ = flips.repair(skel, goals, st, start, solve(skel, goals, st))
    settled, report = smooth(skel, goals, st, repaired, PASSES)
    with monkeypatch.context() as m:
        m.setattr(smooth_module, "SETTLE_PASSES", 0)
        passes_only, alone = smooth(skel, goals, st, repaired, PASSES)
    assert report.settled.any() and not alone.settled.any()
    bones = np.unique(skel.dof_bone)
    for tolerance, share in ((0.01, 0.9), (0.1, 0.95)):
        q = [quaternion_from_matrix(r.pose.rotations[:, bones]) for r in (settled, passes_only)]
        after, before = (common.rough(x, tolerance) for x in q)
        assert after < share * before, (tolerance, before, after)
    assert np.all(as_good(skel, st, repaired, settled, report.settled))
    was = flips.joint_steps(repaired.pose.rotations) > ANGLE
    assert not np.any((flips.joint_steps(settled.pose.rotations) > ANGLE) & ~was)


def test_settling_leaves_trees_with_a_pole_alone(
    solved: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A tree with a pole among its goals is not settled (the compiled loop does not cover
    secondary goals, and numpy's re-solves took 14.5 s on such a double-Y tree): the same
    repaired double-Y with its fourth fingertip's goal made a pole is not re-solved at all,
    where with four goals ``settle`` re-solves."""
    skel, goals, st, repaired, (_, report) = solved["double_y", 0]
    assert report.settled.any()
    calls = []
    for name in ("solve", "solve_tree"):
        real = getattr(smooth_module, name)
        monkeypatch.setattr(
            smooth_module, name, lambda *a, real=real, **k: calls.append(1) or real(*a, **k)
        )
    smooth(skel, goals, st, repaired, PASSES)
    assert calls
    calls.clear()
    pole = Goals(position=goals.position, secondary=[False, False, False, True])
    _, with_pole = smooth(skel, pole, st, repaired, PASSES)
    assert not with_pole.settled.any() and not calls


def test_bit_identical_run_to_run_and_off_at_zero() -> None:
    skel, goals, st = double_y(5)
    result = solve(skel, goals, st)
    a, _ = smooth(skel, goals, st, result, PASSES)
    b, _ = smooth(skel, goals, st, result, PASSES)
    assert a.pose.rotations.tobytes() == b.pose.rotations.tobytes()
    assert a.position_error.tobytes() == b.position_error.tobytes()
    off, report = smooth(skel, goals, st, result, 0)
    assert off is result and not report.changed.any()


def test_a_negative_pass_count_is_refused() -> None:
    with pytest.raises(SettingsError, match="smooth_passes"):
        Settings(smooth_passes=-1)


def _turned(skel: Skeleton, goals: Goals, seed: int) -> Goals:
    """``goals`` on an armature turned, scaled by 1.7 and moved (the targets with it)."""
    base = np.eye(4)
    base[:3, :3] = exp_so3(np.array([0.3, -0.2, 0.5])) * 1.7
    base[:3, 3] = (0.5, -1.0, 0.2)
    position = np.asarray(goals.position) @ base[:3, :3].T + base[:3, 3]
    return Goals(position=position, base=base)


def _numpy_passes(m: pytest.MonkeyPatch) -> None:
    m.setattr(kernel, "covers_smooth", lambda problem, g: False)


@pytest.mark.skipif(not kernel.enabled(), reason="numba is not installed")
@pytest.mark.parametrize("case", [("humanoid", 0), ("double_y", 1), ("carried", 0), ("turned", 0)])
def test_the_compiled_passes_equal_numpys(
    case: tuple[str, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The passes in the compiled loop (solvers/kernel.py ``smooth_passes``) give numpy's
    smoothing to rounding, on an armature turned, scaled and moved too."""
    kind, seed = case
    if kind == "double_y":
        skel, goals, st = double_y(seed)
    else:
        skel, goals, st = humanoid(seed, carried=kind == "carried")
        if kind == "turned":
            goals = _turned(skel, goals, seed)
    start = Pose.rest(skel.n_bones, FRAMES)
    repaired, _ = flips.repair(skel, goals, st, start, solve(skel, goals, st))
    ran = []
    passes = kernel.smooth_passes

    def spy(*args: object) -> None:
        passes(*args)  # type: ignore[arg-type]
        ran.append(True)

    with monkeypatch.context() as m:
        m.setattr(kernel, "smooth_passes", spy)
        compiled, c_report = smooth(skel, goals, st, repaired, PASSES)
    with monkeypatch.context() as m:
        _numpy_passes(m)
        plain, p_report = smooth(skel, goals, st, repaired, PASSES)
    assert ran and c_report.changed.any()  # the compiled passes ran and moved frames
    assert np.array_equal(c_report.changed, p_report.changed)
    assert np.allclose(compiled.pose.rotations, plain.pose.rotations, atol=1e-9, rtol=0)
    # the errors follow the rotations: 1e-10 radians off at a lever of 1 m moves a tip 1e-10
    # (measured: up to 7e-11 and 2e-12 with the 15-degree WINDOW, 2e-11 and 2e-13 before)
    assert np.allclose(compiled.position_error, plain.position_error, atol=1e-10, rtol=0)


def test_without_the_compiled_loop_the_passes_run_in_numpy(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    skel, goals, st = double_y(2)
    result = solve(skel, goals, st)

    def unavailable(*args: object) -> None:
        raise kernel.KernelUnavailable("test")

    with monkeypatch.context() as m:
        m.setattr(kernel, "smooth_passes", unavailable)
        broken, _ = smooth(skel, goals, st, result, PASSES)
    with monkeypatch.context() as m:
        _numpy_passes(m)
        plain, report = smooth(skel, goals, st, result, PASSES)
    assert report.changed.any()
    assert np.array_equal(broken.pose.rotations, plain.pose.rotations)
    assert np.array_equal(broken.position_error, plain.position_error)


def test_a_limited_rig_is_smoothed_within_its_limits(monkeypatch: pytest.MonkeyPatch) -> None:
    """The compiled passes run on a rig with joint limits; a frame they would leave outside the
    limits keeps its pose (numpy's passes clamp), so every frame ends within them."""
    from jacobian_ik.solvers import Effector, Joint, Skeleton, flips, kernel, smooth

    box = {"rot_x": (-0.3, 0.3), "rot_z": (-0.3, 0.3)}
    rest = np.stack([np.eye(4)] * 4)
    rest[1:, 1, 3] = 0.25
    joints = [Joint.ball(), Joint.ball(limits=box), Joint.ball(limits=box), Joint.ball()]
    skel = Skeleton([-1, 0, 1, 2], rest, joints, [Effector(3, (0, 0.25, 0), "tip")])
    frames = 60
    t = np.linspace(0.0, 2 * np.pi, frames)
    # out of reach now and then (the chain is 1 long): where a goal is unmet the passes run
    position = np.stack([0.7 * np.sin(t), 0.7 + 0.3 * np.cos(2 * t), 0.4 * np.cos(t)], axis=1)
    goals = Goals(position=position[:, None])
    settings = Settings()
    result = flips.solve(skel, goals, settings)
    calls = []
    passes = kernel.smooth_passes
    monkeypatch.setattr(
        kernel,
        "smooth_passes",
        lambda *a: calls.append(1) or passes(*a),  # type: ignore[func-returns-value]
    )
    smoothed, report = smooth.smooth(skel, goals, settings, result, settings.smooth_passes)
    assert calls and report.changed.any()
    assert not np.any(skel.violations(skel.coordinates(smoothed.pose)))
