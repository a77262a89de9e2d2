"""Property-based: whatever the tree, joints, limits, start pose and targets, a solve returns
finite poses and errors and keeps the limits."""

import os

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jacobian_ik.solvers import (
    METHODS,
    Effector,
    Goals,
    Joint,
    Pose,
    Settings,
    Skeleton,
    exp_so3,
    solve,
)

JOINTS = ["XYZ", "X", "Y", "Z", "XZ", "XY", "YZ", ""]
finite = st.floats(-50, 50, allow_nan=False, allow_infinity=False)


@st.composite
def problems(draw):
    n = draw(st.integers(1, 7))
    parents = [-1] + [draw(st.integers(0, b - 1)) for b in range(1, n)]
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    rest = np.tile(np.eye(4), (n, 1, 1))
    rest[:, :3, :3] = exp_so3(rng.normal(size=(n, 3)) * draw(st.sampled_from([0.0, 1.0])))
    rest[1:, 1, 3] = draw(st.sampled_from([0.0, 1e-9, 0.5, 1.0]))  # zero-length bones too
    joints = []
    for _ in range(n):
        axes = draw(st.sampled_from(JOINTS))
        limits = {}
        if axes and draw(st.booleans()):
            # Blender's IK limits: min in [-pi, 0], max in [0, pi]
            limits = {
                f"rot_{a.lower()}": (draw(st.floats(-3.0, 0.0)), draw(st.floats(0.0, 3.0)))
                for a in axes
            }
        stretch = draw(st.booleans())
        if stretch and draw(st.booleans()):  # the bridge's range: 0 .. (max_stretch - 1) L
            limits["stretch"] = (0.0, draw(st.floats(0.0, 1.0)))
        joints.append(
            Joint(
                axes,
                location_axes=draw(st.sampled_from(["", "XYZ"])),
                stretch=stretch,
                limits=limits,
            )
        )
    n_eff = draw(st.integers(1, 3))
    effectors = [
        Effector(draw(st.integers(0, n - 1)), (0.0, draw(st.sampled_from([0.0, 0.5])), 0.0))
        for _ in range(n_eff)
    ]
    skel = Skeleton(parents, rest, joints, effectors)
    frames = draw(st.integers(1, 3))
    targets = np.array(
        draw(st.lists(finite, min_size=frames * n_eff * 3, max_size=frames * n_eff * 3))
    ).reshape(frames, n_eff, 3)
    start = Pose.rest(n, frames)
    if skel.n_dofs:
        start = skel.apply(
            start, rng.normal(size=(frames, skel.n_dofs)) * draw(st.sampled_from([0.0, 0.1, 3.0]))
        )
    rotation_weight = draw(st.sampled_from([0.0, 1.0]))
    rotations = exp_so3(rng.normal(size=(frames, n_eff, 3)) * 2)
    goals = Goals(position=targets, rotation=rotations, rotation_weight=[rotation_weight] * n_eff)
    return skel, goals, start


@settings(
    max_examples=int(os.environ.get("HYPOTHESIS_EXAMPLES", 150)),
    deadline=None,
    derandomize=not os.environ.get("HYPOTHESIS_RANDOM"),
    suppress_health_check=[HealthCheck.too_slow],
)
@given(
    problems(),
    st.sampled_from(sorted(METHODS)),
    st.sampled_from([None, 0.3]),
    st.sampled_from(["converge", "track"]),
)
def test_solve_is_always_finite_and_within_limits(problem, method, clamp, mode):
    skel, goals, start = problem
    settings_ = Settings(
        method=method, max_iterations=25, clamp_distance=clamp, mode=mode, max_step=0.5
    )
    result = solve(skel, goals, settings_, start)
    for arr in (
        result.pose.rotations,
        result.pose.locations,
        result.pose.stretch,
        result.position_error,
        result.rotation_error,
        result.history,
    ):
        assert np.all(np.isfinite(arr))
    r = result.pose.rotations
    assert np.allclose(r @ np.swapaxes(r, -1, -2), np.eye(3), atol=1e-9)
    _within_limits(skel, result.pose)


def _within_limits(skel: Skeleton, pose: Pose) -> None:
    """The limited DOFs' coordinates within their ranges (``coordinates(limited=True)`` gives
    the same ones as the full coordinates, up to round-off: numpy's vector loops may round a
    swing-twist of the same rotations differently in another array, by 2e-19 in one run)."""
    if skel.n_dofs and np.any(skel.dof_limited):
        coords = skel.coordinates(pose)
        limited = skel.dof_limited
        np.testing.assert_allclose(
            skel.coordinates(pose, limited=True)[:, limited], coords[:, limited], rtol=0, atol=1e-14
        )
        assert np.all(coords[:, limited] >= skel.dof_min[limited] - 1e-6)
        assert np.all(coords[:, limited] <= skel.dof_max[limited] + 1e-6)


@settings(
    max_examples=int(os.environ.get("HYPOTHESIS_EXAMPLES", 60)),
    deadline=None,
    derandomize=not os.environ.get("HYPOTHESIS_RANDOM"),
    suppress_health_check=[HealthCheck.too_slow],
)
@given(problems(), st.sampled_from(["lm", "dls", "lm_constant", "lm_chan_lawrence"]))
def test_compiled_solve_is_always_finite_and_within_limits(problem, method):
    """The settings the compiled loop covers (converge mode, no clamps): stretch DOFs with
    their ranges run there, the frames it ends outside rotation limits in the numpy loop."""
    skel, goals, start = problem
    result = solve(skel, goals, Settings(method=method, max_iterations=25), start)
    for arr in (result.pose.rotations, result.pose.stretch, result.position_error):
        assert np.all(np.isfinite(arr))
    _within_limits(skel, result.pose)
