"""Flip-free bakes (solvers/flips.py): frames whose joints jump are re-solved from their solved
neighbours; the jumps, weighed by their size, never rise (nor, on these rigs, their number),
goals met stay met, each frame equals its solve alone from the start the repair chose, and the
result is bit-identical run to run.

Rigs are humanoids of random proportions from seeds (tests/solvers/test_trees.py), hands
through the spine (one tree of two conflicting goals) and feet alone, with targets moving
smoothly around each chain's fixed base between 50 % and 130 % of its reach."""

from __future__ import annotations

import itertools
import math
from dataclasses import replace

import numpy as np
import pytest

from jacobian_ik.solvers import (
    Goals,
    Joint,
    Pose,
    Settings,
    SettingsError,
    Skeleton,
    SolveResult,
    flips,
    smooth,
    solve,
)
from jacobian_ik.solvers.goals import no_worse, prepare_goals
from jacobian_ik.solvers.so3 import exp_so3
from jacobian_ik.solvers.solve import carry_groups, goal_status, goal_status_at
from tests.rigs.skeletons import chain
from tests.solvers.test_trees import random_humanoid

ANGLE = math.radians(10.0)
FRAMES = 60


def smooth_targets(skel: Skeleton, rng: np.random.Generator, frames: int) -> np.ndarray:
    """Each goal's target circles its chain's fixed base at 0.5-1.3 x its reach: a few
    sinusoids on the direction and on the distance (in and out of reach)."""
    reach, base, _ = skel.chain_reach()
    heads = skel.forward_kinematics(Pose.rest(skel.n_bones)).head[0, base]
    tips = skel.forward_kinematics(Pose.rest(skel.n_bones)).points[0]
    t = np.linspace(0.0, 1.0, frames)[:, None]
    out = np.empty((frames, skel.n_effectors, 3))
    for e in range(skel.n_effectors):
        rest_dir = (tips[e] - heads[e]) / np.linalg.norm(tips[e] - heads[e])
        wobble = sum(
            rng.uniform(0.3, 0.9)
            * np.sin(2 * np.pi * (rng.uniform(0.5, 2.0) * t + rng.uniform()))
            * rng.normal(size=3)
            for _ in range(3)
        )
        d = rest_dir + wobble
        d /= np.linalg.norm(d, axis=1, keepdims=True)
        rho = 0.9 + 0.4 * np.sin(2 * np.pi * (rng.uniform(1.0, 2.5) * t[:, 0] + rng.uniform()))
        out[:, e] = heads[e] + d * (rho * reach[e])[:, None]
    return out


def problem(seed: int, carried: bool = False) -> tuple[Skeleton, Goals, Settings]:
    """Hands through the spine; ``carried``: a chest goal's chain holds the spine and each limb
    is its own chain of 3 (the chest's IK tree carries the hands' trees)."""
    rng = np.random.default_rng(700 + seed)
    skel = random_humanoid(rng, spine_chains=not carried, chest_goal=carried)
    return skel, Goals(position=smooth_targets(skel, rng, FRAMES)), Settings()


def jumps(skel: Skeleton, result: SolveResult) -> list[int]:
    """Bone steps over 10 degrees per IK tree."""
    out = []
    for tree in result.trees:
        bones = np.unique(skel.dof_bone[skel.dof_moves[tree].any(axis=0)])
        out.append(flips.count_jumps(result.pose.rotations[:, bones], ANGLE))
    return out


def path_cost(
    result: SolveResult, bones: np.ndarray | slice = slice(None), tree: np.ndarray | None = None
) -> float:
    """What the repair's path minimises over the frames (``flips._costs``, without the 1e-9 a
    frame taken from a neighbour), of ``bones``: each bone step over 10 degrees 1 plus
    ``OVER_WEIGHT`` per squared radian beyond, each radian ``SMOOTH_WEIGHT``; and with the
    goals ``tree``, ``MISS_COST`` for each of them unmet on a frame (position goals)."""
    step = flips.joint_steps(result.pose.rotations[:, bones])
    over = np.maximum(step - ANGLE, 0.0)
    unmet = 0 if tree is None else np.sum(result.position_error[:, tree] > Settings().tolerance)
    return float(
        np.sum(step > ANGLE)
        + flips.OVER_WEIGHT * np.sum(over * over)
        + flips.SMOOTH_WEIGHT * np.sum(step)
        + flips.MISS_COST * unmet
    )


def assert_as_good(
    skel: Skeleton, st: Settings, plain: SolveResult, fixed: SolveResult, share: float
) -> None:
    """What the repair's path keeps to against the frames' own solves (``flips._Tree.as_good``,
    written apart from it), per unit of IK trees repaired as one: a goal met stays met, and per
    frame the goals not met end, together, no farther off than ``share`` of their
    root-sum-square (or tolerance / 10 a goal, root-sum-squared, where that is more)."""
    tol = st.tolerance
    met = plain.position_error <= tol
    assert np.all(fixed.position_error[met] <= tol)
    for unit in carry_groups(skel, plain.trees):
        off = np.where(met[:, unit], 0.0, 1.0)  # equal weights in these tests
        own = np.sqrt(np.sum((off * plain.position_error[:, unit]) ** 2, axis=1))
        rss = np.sqrt(np.sum((off * fixed.position_error[:, unit]) ** 2, axis=1))
        slack = np.maximum(0.1 * tol * np.sqrt(off.sum(axis=1)), share * own)
        assert np.all(rss <= own + slack + 1e-12), np.max(rss - own - slack)


def assert_each_frame_is_its_solve_alone(
    skel: Skeleton, goals: Goals, st: Settings, fixed: SolveResult, report: flips.FlipRepair
) -> None:
    """Each frame the repair changed, solved alone from the start it records, gives the repaired
    frame: pose and errors to 1e-9, the same reason."""
    for f in np.flatnonzero(report.changed):
        alone = solve(skel, flips.take_frames(goals, np.array([f])), st, report.start[int(f)])
        assert np.allclose(alone.pose.rotations[0], fixed.pose.rotations[f], atol=1e-9)
        assert np.allclose(alone.position_error[0], fixed.position_error[f], atol=1e-9)
        assert alone.reason[0] == fixed.reason[f]


SEEDS = range(4)


@pytest.fixture(scope="module")
def solved() -> dict[int, tuple[Skeleton, Goals, Settings, SolveResult, tuple]]:
    out = {}
    for seed in SEEDS:
        skel, goals, st = problem(seed)
        plain = solve(skel, goals, st)
        start = Pose.rest(skel.n_bones, FRAMES)
        out[seed] = (skel, goals, st, plain, flips.repair(skel, goals, st, start, plain))
    return out


def test_the_repair_removes_jumps(solved: dict) -> None:
    """Without the repair these rigs jump more: fewer bone steps over 10 degrees in total, and
    on most rigs."""
    before = after = fewer = 0
    for skel, _, _, plain, (fixed, report) in solved.values():
        b, a = sum(jumps(skel, plain)), sum(jumps(skel, fixed))
        assert (report.before, report.after) == (b, a)
        before, after, fewer = before + b, after + a, fewer + (a < b)
    assert before > 0
    assert after < 0.9 * before, (before, after)
    assert fewer >= len(SEEDS) // 2, fewer


@pytest.mark.parametrize("seed", SEEDS)
def test_no_tree_jumps_more_and_goals_stay_met(solved: dict, seed: int) -> None:
    """Per tree the path's cost never rises (its own solves are a path it could keep), and on
    these rigs neither do the jumps (a half-turn weighs more than one jump: ``OVER_WEIGHT``)."""
    skel, _, st, plain, (fixed, report) = solved[seed]
    for tree in fixed.trees:
        bones = np.unique(skel.dof_bone[skel.dof_moves[tree].any(axis=0)])
        assert path_cost(fixed, bones, tree) <= path_cost(plain, bones, tree) + 1e-6
    assert all(a <= b for a, b in zip(jumps(skel, fixed), jumps(skel, plain), strict=True))
    # a met goal stays within tolerance, the ones the solve did not meet end together at most
    # CHOICE_SHARE farther off (goals in conflict: another compromise): the met share holds,
    # the rms moves by no more than that share
    share = flips.CHOICE_SHARE
    assert_as_good(skel, st, plain, fixed, share)
    assert (
        np.sqrt(np.mean(fixed.position_error**2))
        <= (1 + share) * np.sqrt(np.mean(plain.position_error**2)) + 0.1 * st.tolerance
    )
    unchanged = ~report.changed
    assert np.array_equal(fixed.pose.rotations[unchanged], plain.pose.rotations[unchanged])
    assert np.any(fixed.goal_status == "out_of_reach")  # targets out of reach are in the test


@pytest.mark.parametrize("seed", SEEDS)
def test_the_goals_status_of_a_few_frames_changed(solved: dict, seed: int) -> None:
    """``solve.goal_status_at`` (the repair's: only the frames it changed again) gives what
    ``goal_status`` gives the whole result, strings and dtype; so do the repair and smoothing."""
    skel, goals, st, plain, (fixed, _) = solved[seed]
    g = prepare_goals(goals, skel.n_effectors)
    some = np.arange(3, FRAMES, 4)
    mixed = flips.take_result(plain, np.arange(FRAMES))
    mixed.pose.put(some, fixed.pose.take(some))
    mixed.position_error[some] = fixed.position_error[some]
    mixed.rotation_error[some] = fixed.rotation_error[some]
    for before, result in ((plain, mixed), (fixed, fixed)):
        got = goal_status_at(skel, g, result, st, before.goal_status, some)
        want = goal_status(skel, g, result, st)
        assert got.tolist() == want.tolist() and got.dtype == want.dtype
    assert fixed.goal_status.tolist() == goal_status(skel, g, fixed, st).tolist()
    smoothed, _ = smooth.smooth(skel, goals, st, fixed, st.smooth_passes)
    assert smoothed.goal_status.tolist() == goal_status(skel, g, smoothed, st).tolist()
    met = flips.take_result(mixed, np.arange(FRAMES))
    met.position_error[:], met.rotation_error[:] = 0.0, 0.0  # every goal met: "met" as U3
    want = goal_status(skel, g, met, st)
    got = goal_status_at(skel, g, met, st, plain.goal_status, np.arange(FRAMES))
    assert got.tolist() == want.tolist() and got.dtype == want.dtype
    got = goal_status_at(skel, g, mixed, st, want, np.arange(FRAMES))  # from "met" (U3)
    assert got.tolist() == goal_status(skel, g, mixed, st).tolist()


def repair_again(solved: dict) -> list[tuple[int, float]]:
    """Each rig of ``solved`` repaired again (under what the caller patched): jumps, path cost."""
    out = []
    for skel, goals, st, plain, _ in solved.values():
        fixed = flips.repair(skel, goals, st, Pose.rest(skel.n_bones, FRAMES), plain)[0]
        out.append((sum(jumps(skel, fixed)), path_cost(fixed)))
    return out


def assert_fewer_jumps_at_no_more_cost(solved: dict, other: list[tuple[int, float]]) -> None:
    """The fixture's repairs against ``other`` (``repair_again``'s): each path costs no more,
    and the jumps fall in all."""
    ours = [(sum(jumps(skel, fixed)), path_cost(fixed)) for skel, *_, (fixed, _) in solved.values()]
    assert all(a[1] <= b[1] + 1e-6 for a, b in zip(ours, other, strict=True))
    assert sum(a[0] for a in ours) < sum(b[0] for b in other), (ours, other)


def test_candidates_within_a_share_of_the_error_take_out_more_jumps(
    solved: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Hands pulling at one spine: a solve from a neighbour's pose ends at another compromise,
    a little farther from one goal; held to the own solve's error, the repair refused it. The
    same candidates are solved either way (waves start only from those as good as the own
    solve), so with more of them to choose from each path costs no more, and the jumps fall."""
    with monkeypatch.context() as m:
        m.setattr(flips, "CHOICE_SHARE", 0.0)
        strict = repair_again(solved)
    assert_fewer_jumps_at_no_more_cost(solved, strict)


def test_compromises_as_good_for_the_tree_take_out_more_jumps(
    solved: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Hands pulling at one spine, out of reach: a solve from a neighbour's pose ends at another
    compromise, nearer one hand and farther from the other. Judged goal by goal (each within
    CHOICE_SHARE of the own solve's error) most were refused and the spine kept jumping; judged
    for the tree (the unmet goals' errors together) they are taken (and flips as good for the
    tree carry waves, ``FLIP_ANGLE``), so each path costs no more than the goal-by-goal one,
    the jumps fall, and some goal does end farther off than the goal-by-goal bound (the trade
    is really made)."""
    with monkeypatch.context() as m:
        m.setattr(flips._Tree, "as_good", flips._Tree.admissible)
        apart = repair_again(solved)
    assert_fewer_jumps_at_no_more_cost(solved, apart)
    traded = [
        np.any(fixed.position_error > no_worse(plain.position_error, st.tolerance, 0.01))
        for _, _, st, plain, (fixed, _) in solved.values()
    ]
    assert any(traded)


def test_as_good_for_the_tree_is_the_solves_own_measure_of_the_goals_not_met() -> None:
    """The path's rule on one frame of two goals (position and rotation), candidate by
    candidate against the own solve (row 0): a compromise nearer one goal and farther from the
    other is taken when the weighted root-sum-square of the unmet errors (what the solve
    minimises) does not grow beyond 1 %, rotations counted in radians with their weight as the
    solve counts them; never when a met goal ends unmet. ``admissible`` (goal by goal) refuses
    every trade."""
    st = Settings()
    tol = st.tolerance
    own_pos, own_rot = [0.233, 0.237], [0.0254, 0.0012]
    cases = {  # candidate: (position errors, rotation errors, as good for the tree)
        "own": (own_pos, own_rot, True),
        "hands nearer, a hand's turn farther (zoo 3737/05)": (
            [0.218, 0.217],
            [0.0136, 0.0126],
            True,
        ),
        "6 mm nearer one, 4 mm farther the other": ([0.227, 0.241], own_rot, True),
        "2 % farther in all": ([0.2377, 0.2417], own_rot, False),
        "the other turned far off": ([0.218, 0.217], [0.0136, 0.4], False),
    }
    tree = object.__new__(flips._Tree)
    tree.tree = np.array([0, 1])
    tree.frame = np.zeros(len(cases), dtype=np.intp)
    tree.source = np.array([-1] + [0] * (len(cases) - 1))
    tree.pos = np.array([c[0] for c in cases.values()])
    tree.ori = np.array([c[1] for c in cases.values()])
    tree.weight = (np.ones(2), np.full(2, 0.5))
    free = (np.zeros(2, dtype=bool), np.zeros(2, dtype=bool))
    want = [c[2] for c in cases.values()]
    assert tree.as_good(st, free, flips.CHOICE_SHARE).tolist() == want
    assert tree.admissible(st, free, flips.CHOICE_SHARE).tolist() == [True] + [False] * 4
    # a goal met (within tolerance) stays met, whatever the others gain
    tree.pos[:, 0] = [0.5 * tol, 2 * tol, 0.5 * tol, 0.5 * tol, 0.5 * tol]
    tree.pos[1:3, 1] = 0.1, 0.230  # the other goal much nearer, a little nearer
    assert tree.as_good(st, free, flips.CHOICE_SHARE).tolist() == [True, False, True, False, False]
    # weights as the solve's: the goal it moves away from weighing 9 makes the 6/4 mm trade a
    # loss of 1.3 % (0.748 -> 0.758)
    tree.pos, tree.weight = (
        np.array([c[0] for c in cases.values()]),
        (np.array([1.0, 9.0]), np.zeros(2)),
    )
    assert not tree.as_good(st, free, flips.CHOICE_SHARE)[2]


@pytest.mark.parametrize("seed", SEEDS)
def test_each_frame_equals_its_solve_alone_from_its_start(solved: dict, seed: int) -> None:
    """A range still equals its frames solved one by one: each frame, solved alone from the
    start the repair records (its own, or a solved neighbour's), gives the repaired frame."""
    skel, goals, st, _, (fixed, report) = solved[seed]
    assert np.flatnonzero(report.changed).size or seed != 0
    assert_each_frame_is_its_solve_alone(skel, goals, st, fixed, report)


@pytest.mark.parametrize("seed", range(3))
def test_a_carrier_is_repaired_with_the_trees_it_carries(seed: int) -> None:
    """A tree carried by another's bones (a hand's chain under the chest's) is repaired with its
    carrier as one (the carried goals judge the carrier's candidates too), then on its own on
    the carrier's repaired pose: each frame still equals its solve alone from the start the
    repair records; the unit's bones jump no more than before; and no goal of the unit ends
    worse than the frame's own solve (repairing the carrier alone left carried hands farther
    off than they were)."""
    skel, goals, st = problem(seed, carried=True)
    start = Pose.rest(skel.n_bones, FRAMES)
    plain = solve(skel, goals, st, start)
    assert [t.tolist() for t in plain.trees][2:] == [[4], [0], [1]]
    fixed, report = flips.repair(skel, goals, st, start, plain)
    unit = sum(jumps(skel, fixed)[2:]), sum(jumps(skel, plain)[2:])
    assert unit[0] <= unit[1], unit
    # the carried trees' second pass holds to what the first pass left: the share twice over
    assert_as_good(skel, st, plain, fixed, (1 + flips.CHOICE_SHARE) ** 2 - 1)
    assert np.flatnonzero(report.changed).size
    assert_each_frame_is_its_solve_alone(skel, goals, st, fixed, report)
    again_too = flips.repair(skel, goals, st, start, plain)[0]
    assert again_too.pose.rotations.tobytes() == fixed.pose.rotations.tobytes()


def test_a_solve_without_the_goals_status_is_the_same_solve() -> None:
    """``solve(..., status=False)`` (the repair's candidates: it sets the status of the frames
    it changes once) leaves ``goal_status`` None and everything else bit for bit as with it."""
    skel, goals, st = problem(0, carried=True)
    start = Pose.rest(skel.n_bones, FRAMES)
    full = solve(skel, goals, st, start)
    bare = solve(skel, goals, st, start, status=False)
    assert bare.goal_status is None and full.goal_status is not None
    assert bare.pose.rotations.tobytes() == full.pose.rotations.tobytes()
    assert bare.position_error.tobytes() == full.position_error.tobytes()
    assert bare.reason.tolist() == full.reason.tolist()


def far_hands_with_orientations(seed: int) -> tuple[Skeleton, Goals, Settings]:
    """Hands through the spine, their targets at 1.4-1.8 x their reach, each with an orientation
    goal (weight 0.25) turning smoothly: the compromises of the spine form a flat valley (its
    twist held only by the orientations), where the own solves land anywhere along it."""
    rng = np.random.default_rng(900 + seed)
    skel = random_humanoid(rng, spine_chains=True)
    position = smooth_targets(skel, rng, FRAMES)
    reach, base, _ = skel.chain_reach()
    heads = skel.forward_kinematics(Pose.rest(skel.n_bones)).head[0, base]
    far = 1.6 + 0.2 * np.sin(np.linspace(0.0, 6.0, FRAMES))[:, None]
    for e in range(2):
        d = position[:, e] - heads[e]
        position[:, e] = heads[e] + d / np.linalg.norm(d, axis=1, keepdims=True) * reach[e] * far
    t = np.linspace(0.0, 1.0, FRAMES)[:, None]
    turn = [
        sum(
            rng.normal(size=3) * np.sin(2 * np.pi * (rng.uniform(0.3, 1.0) * t + rng.uniform()))
            for _ in range(2)
        )
        for _ in range(skel.n_effectors)
    ]
    rotation = exp_so3(np.stack(turn, axis=1).reshape(-1, 3)).reshape(FRAMES, -1, 3, 3)
    weight = np.array([0.25, 0.25, 0.0, 0.0])
    return skel, Goals(position=position, rotation=rotation, rotation_weight=weight), Settings()


def test_a_flip_along_a_flat_valley_of_compromises_is_carried_away(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Where the spine's compromises form a flat valley, a neighbour's start ends as near for
    the tree but a little farther from one hand: ``admissible`` refuses it, and without its
    wave the spine turned by more than 60 degrees in one frame wherever two own solves landed
    far apart along the valley. Carried on from such flips (``FLIP_ANGLE``), the steps over 60
    degrees fall on every rig and by more than half in all; the goals stay as good for the
    tree as the repair's path allows."""

    def tree_error(r: SolveResult) -> np.ndarray:
        """Per frame, the hands' errors together (positions, rotations at weight 0.25)."""
        return np.sqrt(
            np.sum(r.position_error[:, :2] ** 2 + 0.25 * r.rotation_error[:, :2] ** 2, axis=1)
        )

    ours, without = [], []
    for seed in range(4):
        skel, goals, st = far_hands_with_orientations(seed)
        plain = solve(skel, goals, st)
        start = Pose.rest(skel.n_bones, FRAMES)
        full = flips.repair(skel, goals, st, start, plain)[0]
        with monkeypatch.context() as m:
            m.setattr(flips, "BRIDGE", 0)  # the waves alone (the bridges, 8, come after them)
            fixed = flips.repair(skel, goals, st, start, plain)[0]
            m.setattr(flips, "FLIP_ANGLE", math.inf)
            before = flips.repair(skel, goals, st, start, plain)[0]
        big = math.radians(60.0)
        ours.append(flips.count_jumps(fixed.pose.rotations, big))
        without.append(flips.count_jumps(before.pose.rotations, big))
        # the hands (never within reach): as near for the tree as the own solves, within the
        # path's share; an orientation met stays met
        for r in (fixed, full):
            assert np.all(tree_error(r) <= (1 + flips.CHOICE_SHARE) * tree_error(plain) + 1e-9)
            met = plain.rotation_error[:, :2] <= st.rotation_tolerance
            assert np.all(r.rotation_error[:, :2][met] <= st.rotation_tolerance)
    assert all(a <= b for a, b in zip(ours, without, strict=True)), (ours, without)
    assert sum(ours) < 0.5 * sum(without), (ours, without)


def chain_in_and_out_of_reach(n: int, seed: int) -> tuple[Skeleton, Goals, Settings]:
    """A chain of ``n`` ball joints whose target sweeps an arc from beyond its reach (1.15 x)
    to well inside it (0.35 x) and out again. Near the reach the chain has one pose, nearly
    straight; inside it, many poses meet the target: the branch the animation enters on and
    the one it leaves on are different poses in between, and the path over the frames' solves
    has to cross from one to the other somewhere."""
    rng = np.random.default_rng(seed)
    skel = chain(n, length=1.0)
    t = np.linspace(0.0, 1.0, FRAMES)
    rho = 0.75 + 0.4 * np.cos(2 * np.pi * t)
    a0, a1 = rng.uniform(-1.5, 1.5, 2)
    turn = a0 + (a1 - a0) * t
    rise = rng.uniform(-0.5, 0.5)
    direction = np.stack(
        [np.cos(rise) * np.sin(turn), np.cos(rise) * np.cos(turn), np.full(FRAMES, np.sin(rise))],
        axis=1,
    )
    return skel, Goals(position=(rho * n)[:, None, None] * direction[:, None, :]), Settings()


def test_the_jumps_left_are_bridged_over_frames(monkeypatch: pytest.MonkeyPatch) -> None:
    """Step 8: where the path still crosses between two branches in one frame, the frames
    either side solved from poses turned part way from one branch to the other spread the
    crossing: on these chains (a jump left on 9 of 12 without the bridges) 30 % fewer jumps
    or more, the path's cost never higher, the goals as good as the frames' own solves, and
    each frame still equals its solve alone from the start the repair records (a bridged
    frame's start is its turned pose)."""
    bridged, waves = [], []
    for n, seed in itertools.product((8, 12), range(6)):
        skel, goals, st = chain_in_and_out_of_reach(n, seed)
        plain = solve(skel, goals, st)
        start = Pose.rest(skel.n_bones, FRAMES)
        fixed, report = flips.repair(skel, goals, st, start, plain)
        with monkeypatch.context() as m:
            m.setattr(flips, "BRIDGE", 0)
            before = flips.repair(skel, goals, st, start, plain)[0]
        bridged.append(flips.count_jumps(fixed.pose.rotations, ANGLE))
        waves.append(flips.count_jumps(before.pose.rotations, ANGLE))
        tree = np.array([0])
        assert path_cost(fixed, tree=tree) <= path_cost(before, tree=tree) + 1e-6
        assert_as_good(skel, st, plain, fixed, flips.CHOICE_SHARE)
        assert_each_frame_is_its_solve_alone(skel, goals, st, fixed, report)
    assert sum(w > 0 for w in waves) >= 9, waves
    assert sum(bridged) <= 0.7 * sum(waves), (bridged, waves)


def replace_weights(goals: Goals, weight: np.ndarray) -> Goals:
    from dataclasses import replace

    return replace(goals, position_weight=weight)


def test_bit_identical_run_to_run() -> None:
    skel, goals, st = problem(1)
    a, b = flips.solve(skel, goals, st), flips.solve(skel, goals, st)
    assert a.pose.rotations.tobytes() == b.pose.rotations.tobytes()
    assert a.position_error.tobytes() == b.position_error.tobytes()


def test_off_and_track_mode_are_the_plain_solve() -> None:
    skel, goals, _ = problem(2)
    off = Settings(flip_angle=0.0)
    assert np.array_equal(
        flips.solve(skel, goals, off).pose.rotations, solve(skel, goals, off).pose.rotations
    )
    track = Settings(mode="track")
    assert np.array_equal(
        flips.solve(skel, goals, track).pose.rotations, solve(skel, goals, track).pose.rotations
    )


@pytest.mark.parametrize("bad", [-0.1, math.nan, math.inf])
def test_a_bad_flip_angle_is_refused(bad: float) -> None:
    skel, goals, _ = problem(0)
    with pytest.raises(SettingsError, match="flip_angle"):
        flips.solve(skel, goals, Settings(flip_angle=bad))


def test_chunks_joined_then_repaired_equal_one_repair() -> None:
    """A bake solves its range in chunks and repairs the joined range once (bridge/run.py):
    the result does not depend on where the chunks end (bit-identical to one solve + repair)."""
    skel, goals, st = problem(0)
    start = Pose.rest(skel.n_bones, FRAMES)
    whole, report = flips.repair(skel, goals, st, start, solve(skel, goals, st, start))
    assert report.changed.any()
    cuts = [0, 7, 29, 30, FRAMES]
    parts = [
        solve(skel, flips.take_frames(goals, np.arange(a, b)), st, start.take(np.arange(a, b)))
        for a, b in itertools.pairwise(cuts)
    ]
    joined = flips.join_results(parts)
    chunked, _ = flips.repair(skel, goals, st, start, joined)
    assert chunked.pose.rotations.tobytes() == whole.pose.rotations.tobytes()
    assert chunked.position_error.tobytes() == whole.position_error.tobytes()
    assert np.array_equal(chunked.reason, whole.reason)
    goals_joined = flips.join_goals(
        [flips.take_frames(goals, np.arange(a, b)) for a, b in itertools.pairwise(cuts)]
    )
    assert np.array_equal(np.asarray(goals_joined.position), np.asarray(goals.position))
    back = flips.take_result(whole, np.arange(7, 29))
    assert np.array_equal(back.pose.rotations, whole.pose.rotations[7:29])


@pytest.mark.parametrize("seed", range(4))
def test_the_shortest_paths_walked_side_by_side_are_each_the_cheapest(seed: int) -> None:
    """``_viterbi`` walks segments of different lengths and widths together (padded): each
    path costs the least of all paths through its own segment (every path enumerated), and it
    is the path the segment walked alone gives."""
    rng = np.random.default_rng(seed)
    nodes, transitions = [], []
    for _ in range(5):
        rows, width = int(rng.integers(1, 6)), int(rng.integers(1, 4))
        node = np.where(rng.random((rows, width)) < 0.2, np.inf, rng.integers(0, 3, (rows, width)))
        node[:, 0] = 0.0  # a frame's own solve is always there
        nodes.append(node)
        transitions.append(rng.integers(0, 3, (rows - 1, width, width)).astype(float))
    paths = flips._viterbi(nodes, transitions)
    for node, trans, path in zip(nodes, transitions, paths, strict=True):
        rows, width = node.shape

        def cost(p: tuple[int, ...], node: np.ndarray = node, trans: np.ndarray = trans) -> float:
            steps = sum(trans[k, p[k], p[k + 1]] for k in range(len(p) - 1))
            return float(sum(node[k, p[k]] for k in range(len(p))) + steps)

        every = list(itertools.product(range(width), repeat=rows))
        best = min(every, key=cost)
        assert cost(tuple(path)) == cost(best)
        assert tuple(path) == tuple(flips._viterbi([node], [trans])[0])


def test_a_frame_stuck_off_a_target_in_reach_is_solved_from_a_pose_a_few_frames_off() -> None:
    """One bone, a hinge. Every frame's target sits at -115 degrees; frames 0-7 start at -100
    and meet it, frames 8-39 start at +65, pointing straight away from it: there the error runs
    through the joint, the gradient is zero, and each own solve stops where it started (the
    goal unmet in reach). With jumps counted only
    over 180 degrees (none) only the search from other frames' poses finds it: the frames of
    such a run are solved (every ``REACH_EVERY``-th from its first) from the chosen poses
    ``REACH_STARTS`` frames off too, and the path takes a pose found for the goal it meets.
    Frame 8, solved from frame 0's pose, meets its goal; the frames solved only from stuck
    poses stay where they were; each frame equals its solve alone from the start the repair
    gives; and a range joined from chunks (no goal status: the bake's) is repaired the same."""
    skel, frames = chain(1, joint=Joint.hinge("Z")), 40
    late = np.arange(frames) >= 8
    angle = math.radians(-115.0)
    target = np.tile([-math.sin(angle), math.cos(angle), 0.0], (frames, 1))
    goals, st = Goals(position=target[:, None]), Settings(flip_angle=math.pi)
    start = Pose.rest(skel.n_bones, frames)
    turn = np.radians(np.where(late, 65.0, -100.0))[:, None] * np.array([0.0, 0.0, 1.0])
    start.rotations[:, 0] = exp_so3(turn)
    plain = solve(skel, goals, st, start)
    assert np.all(plain.position_error[:8] <= st.tolerance)
    assert np.all(plain.position_error[8:] > 1.9) and np.all(plain.goal_status[8:] == "conflict")
    fixed, report = flips.repair(skel, goals, st, start, plain)
    met = fixed.position_error[:, 0] <= st.tolerance
    assert met[:9].all() and not met[9:].any(), np.flatnonzero(met)
    assert report.changed.tolist() == [f == 8 for f in range(frames)]
    alone = solve(skel, goals, st, report.start)
    assert np.allclose(alone.pose.rotations, fixed.pose.rotations, atol=1e-9)
    joined, _ = flips.repair(skel, goals, st, start, replace(plain, goal_status=None))
    assert joined.pose.rotations.tobytes() == fixed.pose.rotations.tobytes()


def test_one_half_turn_costs_more_than_two_smaller_jumps() -> None:
    """A bone that ends a half-turn away two frames later: its own solves hold still, then turn
    180 degrees in one step; a candidate solved from a neighbour turns it 90 and 90. Counted
    alone the half-turn is one jump against two; weighed by the size beyond the angle
    (``OVER_WEIGHT``), the path takes the two quarter-turns."""

    def about_z(deg: float) -> np.ndarray:
        c, s = math.cos(math.radians(deg)), math.sin(math.radians(deg))
        return np.array([[[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]]])

    # candidates: the three frames' own solves (0, 0, 180 degrees), then frame 1 from frame 0
    tree = type("Candidates", (), {})()
    tree.rot = np.stack([about_z(0), about_z(0), about_z(180), about_z(90)])
    tree.source = np.array([-1, -1, -1, 0])
    table = np.array([[0, 0], [1, 3], [2, 2]])
    valid = np.array([[True, False], [True, True], [True, False]])
    node, trans = flips._costs(tree, table, valid, ANGLE, np.zeros(table.shape))
    path = flips._viterbi([node], [trans])[0]
    assert list(table[np.arange(3), path]) == [0, 3, 2]
