"""The solvers run with OpenBLAS on one thread and give its thread count back (solvers/blas.py)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from jacobian_ik.solvers import Goals, Pose, Settings, Solver, blas, flips, kernel, smooth, solve
from tests.rigs.skeletons import chain


@pytest.fixture
def two_threads() -> Iterator[Any]:
    """OpenBLAS set to two threads for the test (skipped where numpy has no OpenBLAS)."""
    found = blas.api()
    if found is None:
        pytest.skip("numpy has no OpenBLAS here")
    before = blas.threads()
    found[1](2)
    assert blas.threads() == 2
    yield found
    found[1](before)


def test_numpys_openblas_is_found_on_linux() -> None:
    """The CI's numpy wheels carry OpenBLAS: the helper must find it there, or it does nothing."""
    import sys

    if sys.platform.startswith("linux"):
        assert blas.api() is not None


def test_one_thread_inside_and_the_count_back_after(two_threads: Any) -> None:
    seen: list[int | None] = []

    @blas.one_thread
    def inner() -> None:
        seen.append(blas.threads())

    @blas.one_thread
    def outer() -> None:
        seen.append(blas.threads())
        inner()
        seen.append(blas.threads())  # the inner call leaves it to the outer one

    outer()
    assert seen == [1, 1, 1]
    assert blas.threads() == 2
    with pytest.raises(ZeroDivisionError):
        blas.one_thread(lambda: 1 / 0)()
    assert blas.threads() == 2  # given back when the call raises too


@pytest.mark.parametrize("entry", ["solve", "Solver.solve", "flips.repair", "smooth"])
def test_the_solvers_entry_points_run_on_one_thread(
    two_threads: Any, monkeypatch: pytest.MonkeyPatch, entry: str
) -> None:
    """Every entry point the bridge calls holds OpenBLAS at one thread while it runs: probes
    inside each (the numpy loops' forward kinematics, the compiled loops' calls) see 1."""
    skel = chain(3, 1.0 / 3)
    rng = np.random.default_rng(1)
    frames = 6
    position = rng.normal(scale=0.4, size=(frames, 1, 3))
    goals = Goals(position=position)
    settings = Settings()
    seen: list[int | None] = []
    forward = type(skel).forward_kinematics

    def probe(self: Any, pose: Pose) -> Any:
        seen.append(blas.threads())
        return forward(self, pose)

    call = kernel._call

    def probe_call(func: Any = None, *args: Any, **kw: Any) -> Any:
        seen.append(blas.threads())
        return func(*args, **kw)

    start = Pose.rest(skel.n_bones).broadcast(frames)
    result = solve(skel, goals, settings, start)
    monkeypatch.setattr(type(skel), "forward_kinematics", probe)
    monkeypatch.setattr(kernel, "_call", lambda *a, **kw: probe_call(call, *a, **kw))
    if entry == "solve":
        solve(skel, goals, settings, start)
    elif entry == "Solver.solve":
        Solver(skel, settings, one_frame_path=False).solve(goals, start)
    elif entry == "flips.repair":
        flips.repair(skel, goals, settings, start, result)
    else:
        prepare = smooth.prepare_goals  # (a 3-bone chain with one goal leaves nothing loose)
        monkeypatch.setattr(smooth, "prepare_goals", lambda *a: probe_call(prepare, *a))
        smooth.smooth(skel, goals, settings, result, 2)
    assert seen and set(seen) == {1}
    assert blas.threads() == 2
