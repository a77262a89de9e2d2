"""Small versions of every benchmark, so that the benchmarks cannot rot. Peer parts are skipped
when roboticstoolbox / pybullet are not installed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from benchmarks import buss_kim, deo_walker, peers, race, speed, sugihara, tabaczynski
from jacobian_ik.solvers import Goals, Pose, Settings, solve
from tests.rigs.skeletons import buss_kim_targets, sugihara_arm

ROOT = Path(__file__).resolve().parents[2]


def test_sugihara_json_cli():
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks.sugihara",
            "--seed",
            "3",
            "--count",
            "5",
            "--json",
            "--max-iterations",
            "200",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    data = json.loads(out)
    assert data["seed"] == 3 and data["count"] == 5
    assert np.asarray(data["goals"]).shape == (5, 7)
    assert set(data["methods"]) == set(sugihara.METHODS)
    for m in data["methods"].values():
        assert set(m) == {"success", "mean_us", "median_us", "mean_iterations", "residuals"}
        assert 0 <= m["success"] <= 5 and len(m["residuals"]) == 5
        assert m["mean_us"] > 0 and np.all(np.isfinite(m["residuals"]))
    assert max(m["success"] for m in data["methods"].values()) >= 1


def test_sugihara_arm_and_lm_solves_reachable_goals():
    skel = sugihara_arm()
    assert skel.n_dofs == 12
    # goals made from random poses are solvable: LM reaches them to 1e-9
    rng = np.random.default_rng(0)
    pose = Pose.rest(12, 4)
    from jacobian_ik.solvers import exp_so3

    v = np.zeros((4, 12, 3))
    v[:, np.arange(12), skel.dof_axis] = rng.uniform(-1, 1, (4, 12))
    pose.rotations = exp_so3(v)
    kin = skel.forward_kinematics(pose)
    goals = Goals(kin.points, kin.frames_rot, rotation_weight=[1.0])
    res = solve(skel, goals, sugihara.paper_settings("lm", {"w_bar": 1e-3}, 500))
    assert np.all(res.position_error < 1e-9) and np.all(res.rotation_error < 1e-9)


def test_sweep_reports_every_method():
    sw = sugihara.sweep_test(0.3, 0.7, 3, max_iterations=50)
    assert set(sw["methods"]) == set(sugihara.METHODS)
    # x_d = 0.7 is out of reach (0.5): the best residual is at least 0.2
    best = min(m["residuals"][-1] for m in sw["methods"].values())
    assert best >= 0.2 - 1e-9


def test_convergence_driver_matches_solve():
    """The Fig. 4 driver takes the same steps as solve's loop (adaptive clamp included): after
    k driver steps the distances equal those of solve(max_iterations=k) with every stop off.
    (Not solve(mode="track"): its adaptive clamp loses d_i between frames, see the README.)"""
    shape = "double_y_shape"
    skel = buss_kim.buss_kim(shape)
    target = buss_kim_targets(shape, np.array([1.7]))
    for name in ("DLS'", "SDLS", "Deo-Walker (ours)"):
        v = buss_kim.variants(shape)[name]
        drv = buss_kim.ConvergenceDriver(skel, v)
        pose, carry = Pose.rest(skel.n_bones), drv.start(1)
        for k in range(1, 4):
            pose = drv.step(pose, target, carry)
            st = v.settings(tolerance=0.0, stagnation=0.0, divergence_count=100, max_iterations=k)
            ref = solve(skel, Goals(target), st)
            np.testing.assert_allclose(drv.distances(pose, target), ref.position_error, atol=1e-9)


def test_buss_kim_small():
    tr = buss_kim.tracking("double_y_shape", warmup=5, measured=10)
    for hist in tr["histograms"].values():
        assert hist.shape == (5,) and abs(hist.sum() - 100.0) < 1e-9
    runs = buss_kim.convergence("y_shape", streams=2, trials=2, max_steps=60)
    tables, reachable = buss_kim.fig4_tables(runs)
    assert len(reachable) == 4
    for name, r in runs.items():
        assert np.all(np.isfinite(r["finals"])) and len(r["histories"]) == 4
        assert name in tables["reachable"] and name in tables["unreachable"]


def test_tabaczynski_small():
    res = tabaczynski.run(40)
    assert len(res) == 2 * 3 * 3
    r = res[("2 links", "reachable", "DLS")]
    assert r["error"][-1] < r["error"][0]
    assert r["iterations"][0.01] is not None


def test_deo_walker_bounds_the_joint_speed():
    res = deo_walker.run()
    od = res["optimal damping"]
    assert od["speed"].max() <= deo_walker.DELTA * (1 + 1e-4)
    assert res["pseudoinverse"]["speed"].max() > deo_walker.DELTA
    assert 1 <= od["newton_mean_damped"] <= 10


def test_speed_small():
    rows = speed.run(iterations=2, repeats=1, batch=3)
    assert all(v > 0 for v in rows.values())


def test_chain_race_ours_and_optional_peers():
    out = race.chain_race(count=3, single_count=1)
    for split in ("reachable", "unreachable"):
        rows = out["rows"][split]
        if split == "reachable":
            assert rows["ours LM, batched"][0] == 3  # every reachable target solved
        for how in ("solve", "a prepared Solver"):
            assert rows[f"ours LM, one goal per call of {how}"][1] > 0
        if peers.rtb_version()[0]:
            assert "roboticstoolbox ik_LM sugihara, ilimit=100" in rows
        if peers.pybullet_version()[0]:
            assert "pybullet calculateInverseKinematics, 100 iterations" in rows


def test_sugihara_race_with_peers():
    if not (peers.rtb_version()[0] or peers.pybullet_version()[0]):
        pytest.skip("no peer installed")
    data = sugihara.random_test(1, 3, ["sugihara"], max_iterations=200)
    out = race.sugihara_race(data, single_count=1, rtb_limits=(30,), max_iterations=200)
    assert all(row["success"] <= row["count"] for row in out["rows"].values())


def test_report_quick(tmp_path):
    from benchmarks import run

    assert run.main(["--quick", "--out", str(tmp_path), "--only", "tabaczynski,deo_walker"]) == 0
    report = (tmp_path / "report.md").read_text()
    assert "Tabaczynski" in report and "Deo-Walker" in report
    for png in tmp_path.glob("*.png"):
        assert png.stat().st_size < 300_000
    assert Settings  # the solver API the benchmarks use is importable
