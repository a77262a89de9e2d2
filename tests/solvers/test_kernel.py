"""The compiled loop (solvers/kernel.py) against the numpy loop it replaces, on rigs built from
seeds: the same results to rounding, the same stops, and the numpy loop wherever the kernel does
not apply. Also the goals' lower-bound stop both loops share."""

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
    solve,
)
from jacobian_ik.solvers.so3 import exp_so3
from jacobian_ik.solvers.solve import SolveResult, ik_trees
from tests.rigs.skeletons import chain
from tests.solvers.test_trees import random_humanoid, targets

pytestmark = pytest.mark.skipif(not kernel.enabled(), reason="numba is not installed")

KERNEL_METHODS = ("lm", "dls", "lm_constant", "lm_chan_lawrence")


def _numpy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JACOBIAN_IK_KERNEL", "0")


def _base(rng: np.random.Generator) -> np.ndarray:
    """A rotated, uniformly scaled and moved armature."""
    a = rng.normal(size=3)
    k = np.array([[0, -a[2], a[1]], [a[2], 0, -a[0]], [-a[1], a[0], 0]])
    q, _ = np.linalg.qr(np.eye(3) + 0.3 * k)
    base = np.eye(4)
    base[:3, :3] = q * rng.uniform(0.5, 2.0)
    base[:3, 3] = rng.normal(size=3)
    return base


def _compare(a, b, tol: float = 1e-9) -> float:
    """The share of frames whose stop and pose agree to ``tol`` (poses of converged frames
    must agree; a frame that stops on a rounding-sensitive test may stop a step apart)."""
    same = (a.reason == b.reason) & (np.abs(a.iterations - b.iterations) <= 0)
    diff = np.abs(a.pose.rotations - b.pose.rotations).max(axis=(1, 2, 3))
    both = (a.reason == "converged") & (b.reason == "converged")
    assert np.all(diff[both] <= tol), diff[both].max()
    assert np.all(np.abs(a.position_error - b.position_error)[both] <= tol)
    return float(np.mean(same & (diff <= tol)))


@pytest.mark.parametrize("method", KERNEL_METHODS)
@pytest.mark.parametrize("seed", (1, 2))
def test_kernel_equals_numpy_loop(method, seed, monkeypatch):
    rng = np.random.default_rng(seed)
    skel = random_humanoid(rng, spine_chains=seed == 2)
    base = _base(rng)
    pos = targets(skel, rng, frames=40, far=1) @ base[:3, :3].T + base[:3, 3]
    goals = Goals(position=pos, base=base)
    settings = Settings(method=method, max_iterations=60)
    compiled = solve(skel, goals, settings)
    _numpy(monkeypatch)
    plain = solve(skel, goals, settings)
    assert _compare(compiled, plain) >= 0.95
    assert set(compiled.reason.tolist()) <= {"converged", "stationary", "max_iterations"}


def test_kernel_orientation_goals_and_two_axis_joints(monkeypatch):
    rng = np.random.default_rng(3)
    n = 5
    joints = [Joint("XZ") if b % 2 else Joint.ball(stiffness={"rot_y": 0.5}) for b in range(n)]
    rest = np.tile(np.eye(4), (n, 1, 1))
    rest[1:, 1, 3] = rng.uniform(0.3, 0.6, size=n - 1)
    skel = Skeleton(list(range(-1, n - 1)), rest, joints, [Effector(n - 1, (0.0, 0.4, 0.0))])
    start = skel.apply(Pose.rest(n), rng.normal(scale=0.3, size=(1, skel.n_dofs)))
    posed = skel.apply(start.broadcast(12), rng.normal(scale=0.4, size=(12, skel.n_dofs)))
    kin = skel.forward_kinematics(posed)
    base = _base(rng)
    goals = Goals(
        position=kin.points @ base[:3, :3].T + base[:3, 3],
        rotation=base[:3, :3] @ kin.frames_rot,
        rotation_weight=[0.5],
        base=base,
    )
    settings = Settings(max_iterations=80)
    compiled = solve(skel, goals, settings, start)
    _numpy(monkeypatch)
    plain = solve(skel, goals, settings, start)
    assert _compare(compiled, plain) >= 0.9
    assert np.mean(compiled.reason == "converged") >= 0.75


@pytest.mark.parametrize("seed", (11, 12, 13, 14, 15))
def test_solver_one_frame_equals_solve_bit_for_bit(seed):
    """``Solver``'s compiled one-frame path (live posing, ``api.solve_pose``) prepares each IK
    tree once and calls the compiled loop on the same arrays as ``solve``: the same result to
    the last bit, on humanoids of random proportions (hands through the spine or not, one
    tree or several), a scaled and rotated armature, orientation goals, targets in and out of
    reach, warm starts."""
    rng = np.random.default_rng(seed)
    if seed == 15:  # one IK tree: a chain of 8 (solved on the whole skeleton)
        skel = chain(8, 0.4, joint=Joint.ball())
        paths = targets(skel, rng, frames=6, far=0) * np.array([0.6, 1.0] * 3)[:, None, None]
    else:
        skel = random_humanoid(rng, spine_chains=seed % 2 == 0)
        paths = targets(skel, rng, frames=6, far=seed % 4)
    base = _base(rng) if seed > 12 else None
    settings = Settings(max_iterations=60)
    solver = Solver(skel, settings)
    pose = None
    for f, pos in enumerate(paths):
        if base is not None:
            pos = pos @ base[:3, :3].T + base[:3, 3]
        rot = exp_so3(rng.normal(scale=0.5, size=(skel.n_effectors, 3)))
        w_rot = np.where(np.arange(skel.n_effectors) == 0, 0.5 * (seed != 11), 0.0)
        goals = Goals(position=pos[None], rotation=rot[None], rotation_weight=w_rot, base=base)
        got = solver.solve(goals, pose=pose)
        want = solve(skel, goals, settings, pose=pose)
        for a, b in (
            (got.pose.rotations, want.pose.rotations),
            (got.position_error, want.position_error),
            (got.rotation_error, want.rotation_error),
            (got.history, want.history),
        ):
            np.testing.assert_array_equal(a, b)
        assert got.reason.tolist() == want.reason.tolist()
        assert got.iterations.tolist() == want.iterations.tolist()
        assert got.goal_status.tolist() == want.goal_status.tolist()
        tree_reason = None if want.tree_reason is None else want.tree_reason.tolist()
        assert (None if got.tree_reason is None else got.tree_reason.tolist()) == tree_reason
        assert [t.tolist() for t in got.trees] == [t.tolist() for t in want.trees]
        pose = got.pose if f % 2 else None
    assert any(v is not None for v in solver._compiled.values())  # the compiled path ran
    # after its first frame, straight into the loops numba loaded for its buffers' types
    assert all(v is None or v.batch.loaded for v in solver._compiled.values())
    # its trees' inputs and outputs, views of the buffers it keeps, are the array types the
    # loop was compiled for by ``solve`` (a view of another layout would compile it again)
    assert len(kernel._COMPILED[0].signatures) == 1


def test_what_the_kernel_does_not_cover_runs_the_numpy_loop():
    skel = random_humanoid(np.random.default_rng(4))
    assert kernel.covers(skel, Settings())
    assert not kernel.covers(skel, Settings(method="sdls"))
    assert not kernel.covers(skel, Settings(mode="track"))
    assert not kernel.covers(skel, Settings(max_step=0.1))
    assert not kernel.covers(skel, Settings(nullspace="exact", rest_weight=0.1))
    limited = chain(2, joint=Joint.ball(limits={"rot_x": (-0.5, 0.5)}))
    assert not kernel.covers(limited, Settings())  # not asked to take limits
    assert kernel.covers(limited, Settings(), limits=True)  # the main loop hands frames back


def _stretchy(skel: Skeleton, limit: float | None, weight: float = 0.1) -> Skeleton:
    """``skel`` with IK stretch on every bone that moves a goal (as the bridge reads Blender's
    ``ik_stretch``: the DOF's weight ``weight``, range 0..``limit`` when given)."""
    moving = set(skel.dof_bone[skel.dof_moves.any(axis=0)].tolist())
    joints = []
    for b, j in enumerate(skel.joints):
        if b in moving and j.rotation_axes:
            lim = dict(j.limits) | ({} if limit is None else {"stretch": (0.0, limit)})
            stiff = dict(j.stiffness) | {"stretch": 1.0 - weight}
            j = Joint(j.rotation_axes, j.location_axes, True, lim, stiff)
        joints.append(j)
    rest = np.tile(np.eye(4), (skel.n_bones, 1, 1))
    rest[:, :3, :3], rest[:, :3, 3] = skel.rest_rot, skel.rest_pos
    return Skeleton(skel.parents, rest, joints, skel.effectors, skel.names)


@pytest.mark.parametrize("limit", (None, 0.15))
@pytest.mark.parametrize("seed", (21, 22))
def test_the_kernel_solves_stretch_as_the_numpy_loop(limit, seed, monkeypatch):
    """IK stretch (a generated Rigify rig's limbs) runs the compiled loop: the same stops and
    poses, stretch included, as the numpy loop, to rounding; with the bridge's range 0..max the
    stretch is clamped into it and locked as the numpy loop does, and no frame ends outside
    it. Targets out of the rigid chains' reach are met by stretching."""
    rng = np.random.default_rng(seed)
    rigid = random_humanoid(rng, spine_chains=seed == 22)
    skel = _stretchy(rigid, limit)
    assert kernel.covers(skel, Settings(), limits=True, stretch=True)
    assert not kernel.covers(skel, Settings(), limits=True)  # (priority's, smoothing's loops)
    base = _base(rng)
    pos = targets(rigid, rng, frames=40, far=1) @ base[:3, :3].T + base[:3, 3]
    goals = Goals(position=pos, base=base)
    settings = Settings(max_iterations=80)
    calls = []
    real = kernel.iterate
    monkeypatch.setattr(kernel, "iterate", lambda *a, **k: calls.append(1) or real(*a, **k))
    compiled = solve(skel, goals, settings)
    assert calls  # the compiled loop ran
    _numpy(monkeypatch)
    plain = solve(skel, goals, settings)
    assert compiled.reason.tolist() == plain.reason.tolist()
    assert compiled.iterations.tolist() == plain.iterations.tolist()
    np.testing.assert_allclose(compiled.pose.rotations, plain.pose.rotations, atol=1e-9)
    np.testing.assert_allclose(compiled.pose.stretch, plain.pose.stretch, atol=1e-9)
    np.testing.assert_allclose(compiled.position_error, plain.position_error, atol=1e-9)
    assert not np.any(skel.violations(skel.coordinates(compiled.pose)))
    assert np.any(compiled.pose.stretch > 1e-3)  # the far hand stretches
    # out of the rigid chains' reach, within the stretching ones': met (a stretch held at its
    # rest length by an early step is free again once the goal pulls it out)
    assert np.all(compiled.position_error <= settings.tolerance)


@pytest.mark.parametrize("limit", (None, 0.15))
def test_one_frame_of_a_stretching_rig_equals_its_solve(limit):
    """Live posing on a stretching rig takes the compiled one-frame path: ``solve``'s result
    bit for bit, stretch included, warm starts too."""
    rng = np.random.default_rng(23)
    rigid = random_humanoid(rng)
    skel = _stretchy(rigid, limit)
    solver = Solver(skel, Settings())
    pose = None
    for pos in targets(rigid, rng, frames=6, far=1):
        goals = Goals(position=pos[None])
        got = solver.solve(goals, pose)
        want = solve(skel, goals, Settings(), None if pose is None else pose.copy())
        np.testing.assert_array_equal(got.pose.rotations, want.pose.rotations)
        np.testing.assert_array_equal(got.pose.stretch, want.pose.stretch)
        assert list(got.reason) == list(want.reason)
        pose = got.pose
    assert any(v is not None for v in solver._compiled.values())  # the compiled path ran


def _arm(limited: bool) -> Skeleton:
    """A 3-bone arm 1 long: ball shoulder, hinge elbow, ball wrist; ``limited``: the elbow
    bends one way only (0..2.4 rad about X), the wrist is limited in swing and twist."""
    joints = [Joint.ball(), Joint.hinge("X"), Joint.ball()]
    if limited:
        joints[1] = Joint.hinge("X", limits={"rot_x": (0.0, 2.4)})
        joints[2] = Joint.ball(
            limits={"rot_x": (-0.6, 0.6), "rot_y": (-0.4, 0.4), "rot_z": (-0.6, 0.6)}
        )
    length = 1.0 / 3
    rest = np.stack([np.eye(4)] + [np.eye(4) for _ in range(2)])
    rest[1:, 1, 3] = length
    return Skeleton([-1, 0, 1], rest, joints, [Effector(2, (0, length, 0), "tip")])


@pytest.mark.parametrize("seed", (3, 4))
def test_a_limited_rig_keeps_the_compiled_solve_where_it_ends_within_the_limits(seed, monkeypatch):
    """On a rig with joint limits the compiled loop solves every frame; a frame that ends
    within the limits keeps that solve (the same as the compiled loop on the rig without
    limits, bit for bit), one that ends outside them is solved by the numpy loop, which
    keeps the limits (the same as the numpy loop's solve of that frame). Every frame ends
    within its limits, in reach frames at their targets."""
    skel, loose = _arm(True), _arm(False)
    rng = np.random.default_rng(seed)
    frames = 40
    d = rng.normal(size=(frames, 3))
    d /= np.linalg.norm(d, axis=1, keepdims=True)
    goals = Goals(position=(d * rng.uniform(0.3, 0.95, (frames, 1)))[:, None])
    settings = Settings()
    got = solve(skel, goals, settings)
    unlimited = solve(loose, goals, settings)
    inside = ~np.any(skel.violations(skel.coordinates(unlimited.pose)), axis=1)
    assert 0 < inside.sum() < frames  # both kinds of frame
    assert np.array_equal(got.pose.rotations[inside], unlimited.pose.rotations[inside])
    assert not np.any(skel.violations(skel.coordinates(got.pose)))
    _numpy(monkeypatch)
    plain = solve(skel, Goals(position=goals.position[~inside]), settings)
    assert np.abs(got.pose.rotations[~inside] - plain.pose.rotations).max() <= 1e-9
    assert list(got.reason[~inside]) == list(plain.reason)


def test_one_frame_of_a_limited_rig_equals_its_solve():
    """The one-frame path (live posing, the API) on a limited rig: what ``solve`` gives, from a
    start outside the limits too (it starts at them)."""
    skel = _arm(True)
    rng = np.random.default_rng(7)
    solver = Solver(skel, Settings())
    pose = Pose.rest(skel.n_bones)
    pose.rotations[0, 1] = exp_so3(np.array([-0.5, 0.0, 0.0]))  # the elbow past its limit
    for _ in range(12):
        d = rng.normal(size=3)
        target = d / np.linalg.norm(d) * rng.uniform(0.3, 0.95)
        goals = Goals(position=target[None, None])
        got = solver.solve(goals, pose)
        want = solve(skel, goals, Settings(), pose.copy())
        assert np.abs(got.pose.rotations - want.pose.rotations).max() <= 1e-12
        assert list(got.reason) == list(want.reason)
        pose = got.pose


def test_a_frame_the_kernel_cannot_factor_goes_back_to_numpy(monkeypatch):
    # no damping and a straight chain: J J^T is singular, Cholesky fails, the numpy loop (with
    # its SVD fallback) solves that frame
    skel = chain(3)
    goals = Goals(position=np.array([[[0.0, 2.5, 0.0]], [[1.0, 1.5, 0.5]]]))
    settings = Settings(method="dls", params={"damping": 0.0}, max_iterations=30)
    compiled = solve(skel, goals, settings)
    _numpy(monkeypatch)
    plain = solve(skel, goals, settings)
    np.testing.assert_allclose(compiled.pose.rotations, plain.pose.rotations, atol=1e-9)
    assert list(compiled.reason) == list(plain.reason)


@pytest.mark.parametrize("compiled", (True, False))
def test_out_of_reach_goals_stop_at_their_lower_bound(compiled, monkeypatch):
    """A target beyond its chain's reach: the frame stops as soon as the error is within the
    tolerance of the distance beyond reach (no pose is better) or at a stationary point, most
    before the iteration cap; the goals of the other trees are met."""
    if not compiled:
        _numpy(monkeypatch)
    rng = np.random.default_rng(6)
    skel = random_humanoid(rng)
    pos = targets(skel, rng, frames=30, far=0)  # the first hand's targets at 1.3x its reach
    settings = Settings(max_iterations=200)
    res = solve(skel, Goals(position=pos), settings)
    reach, base, _ = skel.chain_reach()
    kin = skel.forward_kinematics(res.pose)
    d = np.linalg.norm(pos[:, 0] - kin.head[:, base[0]], axis=1)
    gap = res.position_error[:, 0] - (d - reach[0])
    assert np.all(d > reach[0])
    assert np.all(gap >= -1e-12) and np.all(gap <= 1e-4)
    # many stop by the bound, within 0.1 x the tolerance of it; the others at a stationary point
    assert np.mean(gap <= 0.1 * settings.tolerance + 1e-12) >= 0.5
    # (LM's damping E_k stays large when the target is far: some frames creep to the cap)
    assert np.mean(res.iterations < settings.max_iterations) >= 0.5
    assert np.all(res.goal_status[:, 0] == "out_of_reach")
    others = np.concatenate([t for t in ik_trees(skel) if 0 not in t])
    assert np.all(res.position_error[:, others] <= settings.tolerance)


def test_one_frame_and_many_frames_share_one_compiled_kernel():
    """numba compiles the kernel once per argument type: a one-frame solve of a one-goal chain
    (its broadcast (1, 1, 3, 3) orientation targets are contiguous and read-only) must not
    compile a second one (tens of seconds the first time: a bake's flip repair re-solves single
    frames of a tentacle)."""
    skel = chain(6, 0.5)
    pos = np.array([[[1.0, 1.5, 0.3]], [[1.2, 1.4, 0.2]], [[0.9, 1.6, 0.0]]])
    solve(skel, Goals(position=pos), Settings(max_iterations=20))
    before = len(kernel._kernel().signatures)
    solve(skel, Goals(position=pos[:1]), Settings(max_iterations=20))
    solve(skel, Goals(position=pos[1:2], base=np.eye(4)[None]), Settings(max_iterations=20))
    assert len(kernel._kernel().signatures) == before


def test_the_kernel_cache_is_stamped_with_every_file_it_is_made_of(tmp_path) -> None:
    """numba stamps a cache with its function's own file; the loop's constants come from
    solvers/stops.py and are frozen into it, so a change there must make the cache stale."""
    import os

    for name in kernel.SOURCES:
        (tmp_path / name).write_text(f"# {name}\nX = 1\n")
    before = kernel.source_stamp(str(tmp_path))
    assert kernel.source_stamp(str(tmp_path)) == before
    (tmp_path / "stops.py").write_text("# stops.py\nX = 2\n")
    assert kernel.source_stamp(str(tmp_path)) != before
    assert set(kernel.SOURCES) <= set(os.listdir(os.path.dirname(kernel.__file__)))


@pytest.mark.parametrize("compiled", (True, False))
def test_a_straight_chain_turned_away_from_a_target_out_of_reach_turns_to_it(
    compiled: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A straight chain whose target lies behind it, beyond its reach: the gradient vanishes
    there (the farthest pose, |t| + L off), and the lower bound of a goal out of reach used to
    let the loops stop on it after two steps (the race's 10-link chain, one target of 200).
    It is a saddle (solve.pointing_away): every loop bends the chain and ends at |t| - L, the
    batched loop and the one-frame path alike."""
    if not compiled:
        _numpy(monkeypatch)
    skel = chain(3, 0.5, joint=Joint.ball())  # along +Y, reach 1.5
    target = np.array([[[0.0, -2.0, 0.0]], [[0.01, -2.5, 0.0]]])
    settings = Settings(max_iterations=200)
    batched = solve(skel, Goals(target), settings)
    np.testing.assert_allclose(batched.position_error[:, 0], [0.5, 1.0], atol=1e-4)
    assert set(batched.goal_status[:, 0].tolist()) == {"out_of_reach"}
    for f in range(2):
        one = Solver(skel, settings).solve(Goals(target[f : f + 1]))
        np.testing.assert_allclose(one.position_error, batched.position_error[f : f + 1])
    # two bones 0.6 and 0.4 (inner reach 0.2), straight: a target at the base (0.2 off at
    # best: folded) and one 0.1 in front of it (0.1), where the gradient vanishes too
    rest = np.stack([np.eye(4), np.eye(4)])
    rest[1, 1, 3] = 0.6
    folded = Skeleton([-1, 0], rest, [Joint.ball(), Joint.ball()], [Effector(1, (0, 0.4, 0))])
    near = np.array([[[0.0, 0.0, 0.0]], [[0.0, 0.1, 0.0]]])
    res = solve(folded, Goals(near), settings)
    np.testing.assert_allclose(res.position_error[:, 0], [0.2, 0.1], atol=1e-4)


def test_prepare_goals_memo_gives_the_same_goals_and_stays_small() -> None:
    """``prepare_goals`` with a memo (``Solver``'s one-frame path) gives what it gives without,
    array for array, shares the unchanging parts read-only, and keeps at most MEMO_SIZE value
    sets (an armature object moving every frame of a playback adds one each frame)."""
    from jacobian_ik.solvers import goals as goals_module

    rng = np.random.default_rng(3)
    memo: dict = {}
    for i in range(3 * goals_module.MEMO_SIZE):
        base = np.eye(4)
        base[:3, 3] = [0.01 * i, 0.0, 0.0]
        g = Goals(
            position=rng.normal(size=(1, 2, 3)),
            rotation=exp_so3(rng.normal(size=(1, 2, 3))),
            rotation_weight=[0.5, 0.0],
            base=base,
        )
        plain = goals_module.prepare_goals(g, 2)
        kept = goals_module.prepare_goals(g, 2, memo)
        for name in ("position", "rotation_model", "w_pos", "w_rot", "lin", "trans", "lin_inv"):
            np.testing.assert_array_equal(getattr(kept, name), getattr(plain, name))
        assert not kept.lin.flags.writeable
        assert len(memo) <= goals_module.MEMO_SIZE
    again = goals_module.prepare_goals(g, 2, memo)
    assert again.lin is kept.lin  # the same value set: the kept arrays


def _plain_cholesky(normal: np.ndarray, low: np.ndarray) -> bool:
    """The row-by-row loop the blocked factor must equal bit for bit."""
    return all(kernel._cholesky_row(normal, low, i, 0) for i in range(normal.shape[0]))


@pytest.mark.parametrize("seed", range(6))
def test_the_blocked_cholesky_is_the_plain_loop_bit_for_bit(seed: int) -> None:
    """``kernel._cholesky_rows`` (eight entries of a row summed side by side, above 8 rows)
    against the plain loop: the same factor bit for bit, in place too, and the same verdict on
    matrices that are not positive definite."""
    rng = np.random.default_rng(seed)
    for n in (1, 5, 8, 9, 16, 17, int(rng.integers(18, 70))):
        a = rng.normal(size=(n, n))
        for m in (a @ a.T + 0.1 * np.eye(n), a + a.T + rng.uniform(0.0, 2.0 * n**0.5) * np.eye(n)):
            want, got = np.zeros((n, n)), np.zeros((n, n))
            ok = _plain_cholesky(m, want)
            assert kernel._cholesky_rows(m, got) == ok
            if ok:
                inplace = m.copy()
                assert kernel._cholesky_rows(inplace, inplace)
                assert np.array_equal(np.tril(got), np.tril(want))
                assert np.array_equal(np.tril(inplace), np.tril(want))


def test_the_loops_divide_as_ieee_not_python() -> None:
    """The loops are compiled with numba's numpy error model (``kernel.JIT``): a division by
    zero gives inf (the loops' finite checks catch it), not Python's ZeroDivisionError, which
    would switch the kernel off for the session; and the divisor is not tested before each
    division, which kept the loops slower."""
    x = np.zeros(2)
    kernel._triangular_solves(np.zeros((2, 2)), np.ones(2), x)  # L y = b with L = 0
    assert not np.any(np.isfinite(x))
    assert kernel.JIT["error_model"] == "numpy"


def test_the_frame_loop_runs_without_reference_counts() -> None:
    """``_frame`` (a frame's whole iteration), goal priority's and the smoothing's per-frame
    functions are compiled without numba's runtime (``kernel._lean``): numba counted a
    reference, atomically, on every array a piece took from the loop's tuples, about half of
    a short chain's time. Such a function must not make or copy arrays; the conftest fails
    every test if one stopped compiling (the kernel would be switched off)."""
    for func in (kernel._frame, kernel._hold_frame, kernel._smooth_frame):
        assert func.targetoptions["_nrt"] is False
    skel = chain(3)
    goals = Goals(position=np.array([[[1.0, 1.5, 0.5]], [[0.5, 2.0, 1.0]]]))
    res = solve(skel, goals, Settings())
    assert list(res.reason) == ["converged", "converged"]
    assert not kernel.BROKEN


def test_one_frame_solves_from_two_threads_give_their_own_results():
    """A render solves its frames from its own thread (the frame-change handler) while live
    posing solves in Blender's: one ``Solver``'s one-frame path keeps its trees' buffers, so two
    threads solving at once must each get the result it gets alone."""
    import threading

    rng = np.random.default_rng(31)
    skel = random_humanoid(rng)
    solver = Solver(skel, Settings())
    frames = [targets(skel, rng, frames=40, far=1), targets(skel, rng, frames=40, far=1)]
    alone = [[solver.solve(Goals(position=p[None])) for p in f] for f in frames]
    got: list[list[SolveResult]] = [[], []]

    def run(k: int) -> None:
        for _ in range(5):
            got[k] = [solver.solve(Goals(position=p[None])) for p in frames[k]]

    threads = [threading.Thread(target=run, args=(k,)) for k in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert any(v is not None for v in solver._compiled.values())  # the compiled path ran
    for k in (0, 1):
        for a, b in zip(alone[k], got[k], strict=True):
            np.testing.assert_array_equal(a.pose.rotations, b.pose.rotations)
            np.testing.assert_array_equal(a.position_error, b.position_error)
            assert a.iterations.tolist() == b.iterations.tolist()


def test_a_batch_split_across_threads_gives_the_same_numbers_bit_for_bit(monkeypatch):
    """The compiled loop hands a long batch's frames to threads in chunks (``THREADS``); frames
    are independent, so every count gives what one thread gives, residual history included
    (each chunk's is its own and is copied back)."""
    rng = np.random.default_rng(41)
    skel = random_humanoid(rng, spine_chains=True)
    goals = Goals(position=targets(skel, rng, frames=90, far=1))
    settings = Settings(max_iterations=80)
    monkeypatch.setattr(kernel, "THREADS", 1)
    one = solve(skel, goals, settings)
    used: list[int] = []
    split = kernel._call_frames

    def spy(*args):
        used.append(split(*args))
        return used[-1]

    monkeypatch.setattr(kernel, "_call_frames", spy)
    monkeypatch.setattr(kernel, "THREADS", 3)
    monkeypatch.setattr(kernel, "SPLIT", 0)
    monkeypatch.setattr(kernel, "SPLIT_SECONDS", 0.0)
    many = solve(skel, goals, settings)
    assert used and all(u == 3 for u in used)
    assert len(set(one.reason.tolist())) > 1  # (frames of different lengths in one batch)
    np.testing.assert_array_equal(one.pose.rotations, many.pose.rotations)
    np.testing.assert_array_equal(one.pose.stretch, many.pose.stretch)
    np.testing.assert_array_equal(one.position_error, many.position_error)
    np.testing.assert_array_equal(one.rotation_error, many.rotation_error)
    np.testing.assert_array_equal(one.iterations, many.iterations)
    np.testing.assert_array_equal(one.reason, many.reason)
    np.testing.assert_array_equal(one.history, many.history)


def test_a_pool_that_refuses_the_chunks_sends_the_batch_to_numpy(monkeypatch):
    """The add-on's unregister lets the pool go, maybe while another thread bakes: a batch whose
    chunks the pool refuses is solved by the numpy loop from its start poses, not lost."""
    from concurrent.futures import ThreadPoolExecutor

    rng = np.random.default_rng(43)
    skel = random_humanoid(rng)
    goals = Goals(position=targets(skel, rng, frames=40, far=1))
    settings = Settings(max_iterations=60)
    solve(skel, goals, settings)  # (the loop loaded on this thread)
    closed = ThreadPoolExecutor(1)
    closed.shutdown()
    monkeypatch.setattr(kernel, "_executor", lambda threads: closed)
    monkeypatch.setattr(kernel, "THREADS", 2)
    monkeypatch.setattr(kernel, "SPLIT", 0)
    monkeypatch.setattr(kernel, "SPLIT_SECONDS", 0.0)
    refused = solve(skel, goals, settings)
    _numpy(monkeypatch)
    plain = solve(skel, goals, settings)
    np.testing.assert_array_equal(refused.pose.rotations, plain.pose.rotations)
    np.testing.assert_array_equal(refused.iterations, plain.iterations)
