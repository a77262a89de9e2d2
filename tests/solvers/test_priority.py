"""Goal priority inside an IK tree (solvers/priority.py): where a head's chain (chest, neck,
head) shares the chest with the hands' chains through the spine, the head wins, as in Blender
(its tree, rooted deeper, is solved last), and the hands get as near as they can with the head
met. Humanoids of random proportions from seeds, targets in and out of reach."""

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
    kernel,
    priority,
    solve,
)
from jacobian_ik.solvers.so3 import exp_so3
from jacobian_ik.solvers.solve import ik_trees
from tests.solvers.test_trees import _frame


def _v(*x: float) -> np.ndarray:
    return np.array(x, dtype=float)


def head_and_hands(rng: np.random.Generator, chest_goal: bool = False) -> Skeleton:
    """Hips (fixed), spine0-2, neck, head, two arms of shoulder, upper arm, forearm, hand;
    random lengths. The hands' chains run through the spine (spine0 to the hand: 7 bones), the
    head's is (spine2, neck, head); with ``chest_goal`` a goal at spine2's tail with the chain
    (spine0, spine1, spine2)."""
    height = rng.uniform(1.4, 2.0)
    spine = height * rng.uniform(0.25, 0.32) / 3
    bones: list[tuple[str, np.ndarray, np.ndarray, str | None]] = []
    hip = np.array([0.0, 0.0, 1.0])
    bones.append(("hips", hip, hip + _v(0, 0, 0.1), None))
    top, parent = hip + _v(0, 0, 0.1), "hips"
    for i in range(3):
        tail = top + _v(0, 0.01 * i, spine)
        bones.append((f"spine{i}", top, tail, parent))
        top, parent = tail, f"spine{i}"
    neck = top + _v(0, 0.02, height * rng.uniform(0.05, 0.07))
    bones.append(("neck", top, neck, "spine2"))
    bones.append(("head", neck, neck + _v(0, 0.03, height * rng.uniform(0.09, 0.12)), "neck"))
    arm = height * rng.uniform(0.28, 0.36) * rng.dirichlet([4, 4, 1.5])
    for side, k in (("L", 1.0), ("R", -1.0)):
        p, parent = top, "spine2"
        q = p + _v(0.15 * k * height / 1.7, 0, -0.04)
        bones.append((f"shoulder.{side}", p, q, parent))
        p, parent = q, f"shoulder.{side}"
        for name, length in zip(("upper_arm", "forearm", "hand"), arm, strict=True):
            d = np.array([k, rng.uniform(-0.1, 0.1), rng.uniform(-0.15, 0.0)])
            q = p + length * d / np.linalg.norm(d)
            bones.append((f"{name}.{side}", p, q, parent))
            p, parent = q, f"{name}.{side}"
    names = [b[0] for b in bones]
    world = {n: _frame(np.asarray(h), np.asarray(t)) for n, h, t, _ in bones}
    parents, rest = [], []
    for n, _, _, parent in bones:
        parents.append(names.index(parent) if parent else -1)
        rest.append(np.linalg.inv(world[parent]) @ world[n] if parent else world[n])
    joints = [Joint.fixed() if n == "hips" else Joint.ball() for n in names]

    def tip(name: str) -> tuple[float, float, float]:
        h, t = next((h, t) for n, h, t, _ in bones if n == name)
        return (0.0, float(np.linalg.norm(np.subtract(t, h))), 0.0)

    def chain(*bone_names: str) -> tuple[int, ...]:
        return tuple(names.index(b) for b in bone_names)

    spine_bones = ("spine0", "spine1", "spine2")
    effectors = [
        Effector(names.index("head"), tip("head"), "head", chain("spine2", "neck", "head")),
        *(
            Effector(
                names.index(f"hand.{s}"),
                tip(f"hand.{s}"),
                f"hand.{s}",
                chain(
                    *spine_bones,
                    *(f"{b}.{s}" for b in ("shoulder", "upper_arm", "forearm", "hand")),
                ),
            )
            for s in "LR"
        ),
    ]
    if chest_goal:
        effectors.append(
            Effector(names.index("spine2"), tip("spine2"), "chest", chain(*spine_bones))
        )
    return Skeleton(parents, np.array(rest), joints, effectors, names=names)


def targets(skel: Skeleton, rng: np.random.Generator, frames: int) -> np.ndarray:
    """Each goal's target at 55-95 % of its own chain's reach from its chain's root, in random
    directions (upward for the head): each reachable alone, often not together."""
    pose = Pose.rest(skel.n_bones)
    kin = skel.forward_kinematics(pose)
    out = np.zeros((frames, skel.n_effectors, 3))
    for e, eff in enumerate(skel.effectors):
        assert eff.chain is not None
        root = min(eff.chain, key=lambda b: skel.depth[b])
        base = kin.head[0, root]
        path, b = 0.0, int(eff.bone)
        while True:  # the chain's length held straight
            path += float(np.linalg.norm(skel.rest_pos[b])) if b != root else 0.0
            if b == root:
                break
            b = int(skel.parents[b])
        reach = path + float(np.linalg.norm(skel.eff_offset[e]))
        d = rng.normal(size=(frames, 3))
        if eff.name == "head":
            d[:, 2] = np.abs(d[:, 2]) + 1.0
        d /= np.linalg.norm(d, axis=1, keepdims=True)
        out[:, e] = base + d * (rng.uniform(0.55, 0.95, frames) * reach)[:, None]
    return out


def without_priority(monkeypatch: pytest.MonkeyPatch) -> None:
    empty = np.zeros(0, dtype=np.intp)
    monkeypatch.setattr(priority, "split", lambda problem, g: (empty, empty))


def test_the_chain_rooted_deepest_is_primary() -> None:
    skel = head_and_hands(np.random.default_rng(1), chest_goal=True)
    (tree,) = ik_trees(skel)
    names = [skel.effectors[e].name for e in tree]
    primary = priority.levels(skel, tree)
    assert dict(zip(names, primary.tolist(), strict=True)) == {
        "head": True,
        "hand.L": False,
        "hand.R": False,
        "chest": False,
    }
    assert priority.has_levels(skel, ik_trees(skel))
    # chains from one root: one level, no priority
    assert priority.levels(skel, tree[[1, 2]]).all()


def blender_order(skel: Skeleton, goals: Goals, st: Settings) -> np.ndarray:
    """(F, E) the goals' errors in Blender's order: the hands' tree alone, then the head's on its
    own chain from that pose."""
    names = [e.name for e in skel.effectors]
    frames = len(goals.position)
    pose = Pose.rest(skel.n_bones).broadcast(frames)
    for group in ([i for i, n in enumerate(names) if n != "head"], [names.index("head")]):
        sub, bones, solved = skel.subtree(np.array(group))
        part = solve(sub, Goals(position=goals.position[:, group]), st, pose.of_bones(bones))
        pose.put_solved(bones, solved, part.pose)
    world = skel.forward_kinematics(pose).points
    return np.asarray(np.linalg.norm(world - goals.position, axis=-1))


@pytest.mark.parametrize(("seed", "chest_goal"), [(1, False), (3, False), (2, True), (4, True)])
def test_the_head_wins_and_the_others_lose_no_more_than_in_blenders_order(
    seed: int, chest_goal: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = np.random.default_rng(seed)
    skel = head_and_hands(rng, chest_goal)
    goals = Goals(position=targets(skel, rng, 24))
    st = Settings()
    ours = solve(skel, goals, st).position_error
    with monkeypatch.context() as m:
        without_priority(m)
        compromise = solve(skel, goals, st).position_error
    blender = blender_order(skel, goals, st)
    head = [e.name for e in skel.effectors].index("head")
    others = [i for i in range(skel.n_effectors) if i != head]
    tol = st.tolerance
    # the head: met more often than by the compromise of one weighted solve, and on every
    # frame where Blender's order meets it (with a chest goal, which pulls at the head chain's
    # root, the compromise's spine can leave the head out of its chain's reach: there (A2)
    # takes Blender's order)
    met = ours[:, head] <= tol
    assert np.sum(met) > np.sum(compromise[:, head] <= tol)
    assert np.all(met[blender[:, head] <= tol])
    # the others: nearer than in Blender's order, where the head's chest throws them off
    assert np.sqrt(np.mean(ours[:, others] ** 2)) <= np.sqrt(np.mean(blender[:, others] ** 2))
    assert np.sum(ours[:, others] <= 1e-3) >= np.sum(blender[:, others] <= 1e-3)


def test_the_null_space_steps_bring_the_others_back(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(6)
    skel = head_and_hands(rng)
    goals = Goals(position=targets(skel, rng, 24))
    # the steps (B) from (A) on the compromise: (A0) off (its second solve is the first)
    monkeypatch.setattr(priority, "PRIMARY_WEIGHT", 1.0)
    ours = solve(skel, goals, Settings())
    with monkeypatch.context() as m:
        m.setattr(priority, "STEPS", 0)  # (A) alone
        first = solve(skel, goals, Settings())
    head = [e.name for e in skel.effectors].index("head")
    others = [i for i in range(skel.n_effectors) if i != head]
    # the primaries held: the head as near as (A) left it (+ a tenth of the tolerance)
    tol = Settings().tolerance
    assert np.all(
        ours.position_error[:, head] <= np.maximum(first.position_error[:, head], tol) + 0.1 * tol
    )
    # the others nearer on every frame by the steps' own measure (their summed squared
    # errors, equal weights here: never larger), by far in the rms
    assert np.all(
        (ours.position_error[:, others] ** 2).sum(1)
        <= (first.position_error[:, others] ** 2).sum(1) + 1e-12
    )
    rms = [np.sqrt(np.mean(r.position_error[:, others] ** 2)) for r in (ours, first)]
    assert rms[0] < 0.8 * rms[1]


@pytest.mark.parametrize("chest_goal", [False, True])
def test_the_primaries_weighing_more_first_meet_them_more_often(
    monkeypatch: pytest.MonkeyPatch, chest_goal: bool
) -> None:
    """(A0): the tree solved again from the compromise with the head weighing
    ``PRIMARY_WEIGHT`` times more moves the spine too, so (A)'s chain of three reaches the head
    on frames where it cannot from the compromise's spine: on these rigs the head is met on
    more frames than with (A) from the compromise (``PRIMARY_WEIGHT`` 1), never on fewer."""
    more = 0
    for seed in range(4):
        rng = np.random.default_rng(seed)
        skel = head_and_hands(rng, chest_goal=chest_goal)
        goals = Goals(position=targets(skel, rng, 24))
        head = [e.name for e in skel.effectors].index("head")
        ours = solve(skel, goals, Settings()).position_error[:, head]
        with monkeypatch.context() as m:
            m.setattr(priority, "PRIMARY_WEIGHT", 1.0)
            plain = solve(skel, goals, Settings()).position_error[:, head]
        tol = Settings().tolerance
        assert np.sum(ours <= tol) >= np.sum(plain <= tol)
        more += int(np.sum(ours <= tol) - np.sum(plain <= tol))
    assert more >= 4 * 24 // 2, more


def test_nothing_changes_where_every_goal_can_be_met(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(7)
    skel = head_and_hands(rng, chest_goal=True)
    pose = Pose.rest(skel.n_bones).broadcast(8)
    dq = rng.normal(scale=0.2, size=(8, skel.n_dofs))
    met = skel.forward_kinematics(skel.apply(pose, dq)).points
    goals = Goals(position=met)
    result = solve(skel, goals, Settings())
    with monkeypatch.context() as m:
        without_priority(m)
        plain = solve(skel, goals, Settings())
    assert np.array_equal(result.pose.rotations, plain.pose.rotations)
    assert np.all(result.position_error <= Settings().tolerance)


@pytest.mark.parametrize("chest_goal", [False, True])
def test_a_range_equals_its_frames_solved_one_by_one(chest_goal: bool) -> None:
    rng = np.random.default_rng(11)
    skel = head_and_hands(rng, chest_goal)
    goals = Goals(position=targets(skel, rng, 6))
    st = Settings()
    whole = solve(skel, goals, st)
    for f in range(6):
        alone = solve(skel, Goals(position=goals.position[f : f + 1]), st)
        assert np.allclose(alone.pose.rotations[0], whole.pose.rotations[f], atol=1e-9, rtol=0)
        assert np.allclose(alone.position_error[0], whole.position_error[f], atol=1e-9, rtol=0)


def test_one_frame_through_the_solver_equals_solve() -> None:
    rng = np.random.default_rng(5)
    skel = head_and_hands(rng, chest_goal=True)
    goals = Goals(position=targets(skel, rng, 1))
    st = Settings()
    ours = Solver(skel, st).solve(goals)
    ref = solve(skel, goals, st)
    assert np.array_equal(ours.pose.rotations, ref.pose.rotations)
    assert np.array_equal(ours.position_error, ref.position_error)
    assert list(ours.goal_status[0]) == list(ref.goal_status[0])


def _numpy_steps(m: pytest.MonkeyPatch) -> None:
    m.setattr(kernel, "covers_hold", lambda problem, g: False)


@pytest.mark.skipif(not kernel.enabled(), reason="numba is not installed")
@pytest.mark.parametrize(("seed", "chest_goal", "turned"), [(1, False, False), (2, True, True)])
def test_the_compiled_null_space_steps_equal_numpys(
    seed: int, chest_goal: bool, turned: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = np.random.default_rng(seed)
    skel = head_and_hands(rng, chest_goal)
    frames = 16
    position = targets(skel, rng, frames)
    rotation = weight = base = None
    if turned:  # an orientation goal on the head, the armature turned, scaled and moved
        head = [e.name for e in skel.effectors].index("head")
        rotation = np.tile(np.eye(3), (frames, skel.n_effectors, 1, 1))
        rotation[:, head] = exp_so3(rng.normal(scale=0.3, size=(frames, 3)))
        weight = np.where(np.arange(skel.n_effectors) == head, 0.3, 0.0)
        base = np.eye(4)
        base[:3, :3] = exp_so3(np.array([0.3, -0.2, 0.5])) * 1.7
        base[:3, 3] = (0.5, -1.0, 0.2)
        position = position @ base[:3, :3].T + base[:3, 3]
    goals = Goals(position=position, rotation=rotation, rotation_weight=weight, base=base)
    st = Settings()
    taken = []
    hold = kernel.hold

    def spy(*args: object) -> kernel.HeldOut:
        out = hold(*args)  # type: ignore[arg-type]
        taken.append(out.taken)
        return out

    with monkeypatch.context() as m:
        m.setattr(kernel, "hold", spy)
        compiled = solve(skel, goals, st)
    with monkeypatch.context() as m:
        _numpy_steps(m)
        plain = solve(skel, goals, st)
    assert taken and np.concatenate(taken).sum() > 0  # the compiled steps ran and stepped
    assert np.allclose(compiled.pose.rotations, plain.pose.rotations, atol=1e-9, rtol=0)
    assert np.allclose(compiled.position_error, plain.position_error, atol=1e-9, rtol=0)
    assert np.array_equal(compiled.iterations, plain.iterations)
    assert list(compiled.reason) == list(plain.reason)


def test_without_the_compiled_loop_the_steps_run_in_numpy(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(3)
    skel = head_and_hands(rng, chest_goal=True)
    goals = Goals(position=targets(skel, rng, 8))

    def unavailable(*args: object) -> None:
        raise kernel.KernelUnavailable("test")

    with monkeypatch.context() as m:
        m.setattr(kernel, "hold", unavailable)
        broken = solve(skel, goals, Settings())
    with monkeypatch.context() as m:
        _numpy_steps(m)
        plain = solve(skel, goals, Settings())
    assert np.array_equal(broken.pose.rotations, plain.pose.rotations)
    assert np.array_equal(broken.position_error, plain.position_error)


def test_a_limited_rig_takes_the_compiled_steps_within_its_limits(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Joint limits on the spine and the forearms (some binding): the compiled null-space steps
    run (the compiled loops have no limits: a frame they leave outside them is stepped by
    numpy, which keeps them), and every frame ends within its limits."""
    rng = np.random.default_rng(5)
    loose = head_and_hands(rng, chest_goal=True)
    box = {"rot_x": (-0.35, 0.35), "rot_y": (-0.2, 0.2), "rot_z": (-0.35, 0.35)}
    joints = [
        Joint.ball(limits=box) if n in ("spine1", "forearm.L", "forearm.R") else j
        for n, j in zip(loose.names, loose.joints, strict=True)
    ]
    rest = np.tile(np.eye(4), (loose.n_bones, 1, 1))
    rest[:, :3, :3], rest[:, :3, 3] = loose.rest_rot, loose.rest_pos
    skel = Skeleton(loose.parents, rest, joints, loose.effectors, names=loose.names)
    goals = Goals(position=targets(skel, rng, 24))
    outs: list[kernel.HeldOut] = []
    hold = kernel.hold

    def spy(*args: object) -> kernel.HeldOut:
        out = hold(*args)  # type: ignore[arg-type]
        outs.append(out)
        return out

    monkeypatch.setattr(kernel, "hold", spy)
    result = solve(skel, goals, Settings())
    assert outs and sum(int(o.taken.sum()) for o in outs) > 0  # the compiled steps stepped
    assert not np.any(skel.violations(skel.coordinates(result.pose)))
    free = solve(loose, goals, Settings())
    assert np.any(skel.violations(skel.coordinates(free.pose)))  # the limits bind


@pytest.mark.skipif(not kernel.enabled(), reason="numba is not installed")
def test_the_null_space_steps_split_across_threads_give_the_same_numbers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The null-space steps' frames are independent, so the compiled loop hands them to
    threads in chunks (``kernel._call_frames`` with ``held``): three threads give what one
    gives, bit for bit, and the steps ran in more than one chunk."""
    rng = np.random.default_rng(6)
    skel = head_and_hands(rng, chest_goal=True)
    goals = Goals(position=targets(skel, rng, 40))
    monkeypatch.setattr(kernel, "THREADS", 1)
    one = solve(skel, goals, Settings())
    used: list[int] = []
    split = kernel._call_frames

    def spy(*args: object) -> int:
        used.append(split(*args))  # type: ignore[arg-type]
        return used[-1]

    monkeypatch.setattr(kernel, "_call_frames", spy)
    monkeypatch.setattr(kernel, "THREADS", 3)
    hold = kernel.hold
    taken: list[np.ndarray] = []

    def steps(*args: object) -> kernel.HeldOut:
        held = len(used)
        out = hold(*args)  # type: ignore[arg-type]
        assert used[held:] and used[-1] > 1, used  # (its frames went to threads)
        taken.append(out.taken)
        return out

    monkeypatch.setattr(kernel, "hold", steps)
    many = solve(skel, goals, Settings())
    assert taken and np.concatenate(taken).sum() > 0  # the steps ran and stepped
    for a, b in (
        (one.pose.rotations, many.pose.rotations),
        (one.position_error, many.position_error),
        (one.rotation_error, many.rotation_error),
        (one.iterations, many.iterations),
    ):
        np.testing.assert_array_equal(a, b)
    assert list(one.reason) == list(many.reason)
