"""The compiled loops built after install in a child process (solvers/warmup.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from jacobian_ik.solvers import kernel, warmup

ROOT = Path(__file__).resolve().parents[2]

# A later session: this checkout imported under the same name, the cache folder the child built,
# then a bake's passes and a live solve on another rig than the child's (the hands and the head
# through the spine with a chest goal, a hand with an orientation goal). Prints, per loop, the
# signatures numba loaded from the cache and those it had to compile.
LATER = """
import json, sys
import numpy as np
sys.path.insert(0, sys.argv[2])
from scripts.checkout import load_checkout
load_checkout(register=False)
from jacobian_ik.solvers import Goals, Pose, Settings, Solver, flips, kernel, solve
from jacobian_ik.solvers.smooth import smooth
from tests.solvers.test_priority import head_and_hands, targets
kernel.CACHE_DIR = sys.argv[1]
rng = np.random.default_rng(4)
skel = head_and_hands(rng, chest_goal=True)
rotation = np.broadcast_to(np.eye(3), (20, skel.n_effectors, 3, 3)).copy()
goals = Goals(position=targets(skel, rng, 20), rotation=rotation,
              rotation_weight=np.array([0.0, 0.5, 0.0, 0.0]))
st = Settings()
start = Pose.rest(skel.n_bones, 20)
result, _ = flips.repair(skel, goals, st, start, solve(skel, goals, st, start))
smooth(skel, goals, st, result, st.smooth_passes)
Solver(skel, st).solve(Goals(position=targets(skel, rng, 1)))
print(json.dumps({str(k): [sum(d.stats.cache_hits.values()), sum(d.stats.cache_misses.values())]
                  for k, d in kernel._COMPILED.items()}))
"""


@pytest.mark.skipif(not kernel.enabled(), reason="numba is not installed")
@pytest.mark.skipif(
    os.environ.get("JIK_LINE") in ("4.2", "4.5"),
    reason="the same Python 3.11 and numba as line 5.0, where it runs (about 2.5 minutes)",
)
def test_the_children_build_every_loop_and_a_later_session_only_loads_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = str(tmp_path / "numba")
    os.makedirs(cache)
    monkeypatch.setattr(warmup, "_CHILDREN", {})
    assert warmup.start(cache, "jacobian_ik", str(ROOT))
    assert sorted(warmup._CHILDREN) == [0, 1, 2] and warmup.running()
    assert not warmup.start(cache, "jacobian_ik", str(ROOT))  # one child per loop
    warmup.wait(timeout=900)
    assert not warmup.running()
    for loop, child in warmup._CHILDREN.items():
        assert child.returncode == 0, loop
        marker = warmup.marker_path(cache, loop)
        assert marker is not None
        with open(marker, encoding="utf-8") as f:
            done = json.load(f)
        assert done["built"] is True and done["error"] is None, done
    assert not warmup.start(cache, "jacobian_ik", str(ROOT))  # built: nothing to do

    later = subprocess.run(
        [sys.executable, "-c", LATER, cache, str(ROOT)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
        check=False,
    )
    assert later.returncode == 0, later.stderr
    loaded = json.loads(later.stdout.strip().splitlines()[-1])
    assert sorted(loaded) == ["0", "1", "2"]
    for loop, (hits, misses) in loaded.items():
        assert (hits, misses) == (1, 0), f"loop {loop}: {hits} loaded, {misses} compiled"


def test_nothing_starts_without_a_cache_folder_or_with_the_kernel_off(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(warmup, "_CHILDREN", {})
    assert not warmup.start(None, "jacobian_ik", str(ROOT))
    monkeypatch.setenv("JACOBIAN_IK_KERNEL", "0")
    assert not warmup.start(str(tmp_path), "jacobian_ik", str(ROOT))
    assert not warmup.running()
    warmup.wait()  # returns at once


@pytest.mark.skipif(not kernel.enabled(), reason="numba is not installed")
def test_the_childs_rig_runs_every_loop() -> None:
    """``run`` itself, in this process (the loops compiled or loaded here): all three, or one
    of them with the others in numpy (a child's share)."""
    assert warmup.run() == [0, 1, 2]
    assert [warmup.run(only=k) for k in range(3)] == [[0], [1], [2]]
    skel = warmup.rig()
    assert skel.n_effectors == 3 and warmup.targets(skel, 12).shape == (12, 3, 3)
