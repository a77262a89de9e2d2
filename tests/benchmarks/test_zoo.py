"""The rig zoo: its generator (numpy only) and a small zoo run end to end in a subprocess (bpy
gets its own process), checked for its JSON schema and sanity, not for the targets."""

from __future__ import annotations

import importlib.util
import itertools
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from benchmarks.playback import detachment
from jacobian_ik.solvers import exp_so3
from tests.rigs.zoo_rigs import KINDS, Goal, geometry, humanoid, targets, zoo

ROOT = Path(__file__).resolve().parents[2]


def test_a_seed_gives_the_same_zoo_and_another_seed_another() -> None:
    a, b, c = zoo(5, 6), zoo(5, 6), zoo(6, 6)
    assert [r.bones for r in a] == [r.bones for r in b]
    assert [r.kind for r in a] == [*KINDS, KINDS[0]]
    assert [r.bones for r in a] != [r.bones for r in c]
    np.testing.assert_array_equal(
        targets(a[0], geometry(a[0]), 50), targets(b[0], geometry(b[0]), 50)
    )


def test_the_zoo_covers_the_kinds_and_mixes_reachable_and_out_of_reach_frames() -> None:
    rigs = zoo(11, 20)
    humanoids = [r for r in rigs if r.kind == "humanoid"]
    assert {len(r.goals) for r in humanoids} <= {4, 5, 6}
    assert all(4 <= len(r.goals) for r in humanoids)
    spiders = [r for r in rigs if r.kind == "spider"]
    assert all(6 <= len(r.goals) <= 8 for r in spiders)
    tentacles = [r for r in rigs if r.kind == "tentacle"]
    assert all(20 <= len(r.bones) <= 40 for r in tentacles)
    for r in rigs:
        geo = geometry(r)
        if r.kind != "humanoid":  # a humanoid's hands through the spine share it
            assert geo.independent == (r.kind != "tree"), r.name
        d = np.linalg.norm(targets(r, geo, 250) - geo.base[None], axis=2)
        out_of_reach = np.mean(d > geo.reach)
        assert 0.02 < out_of_reach < 0.5, (r.name, out_of_reach)
    assert {r.params["through_spine"] for r in humanoids} == {True, False}


def test_a_chain_carried_by_another_goals_chain_is_in_its_tree() -> None:
    """Hands of 3 sit on the chest: alone they are independent, with a head goal through the
    chest they ride on its chain, and their fixed base becomes the chest's head."""
    rig = humanoid(np.random.default_rng(0), "h", 0)
    heads = {b[0]: np.array(b[1]) for b in rig.bones}
    rig.goals = [Goal("hand.L", 3), Goal("foot.L", 3)]
    geo = geometry(rig)
    assert geo.independent
    np.testing.assert_allclose(geo.base[0], heads["upper_arm.L"])
    rig.goals.append(Goal("head", 3))  # head, neck, chest
    geo = geometry(rig)
    assert geo.tree[0] == geo.tree[2] != geo.tree[1]
    np.testing.assert_allclose(geo.base[0], heads["chest"])
    # reach: tip to wrist to elbow to shoulder joint, then the rigid link to the chest's head
    joints = [heads["hand.L"], heads["forearm.L"], heads["upper_arm.L"], heads["chest"]]
    tail = next(np.array(b[2]) for b in rig.bones if b[0] == "hand.L")
    expected = np.linalg.norm(tail - joints[0]) + sum(
        np.linalg.norm(a - b) for a, b in itertools.pairwise(joints)
    )
    assert geo.reach[0] == pytest.approx(expected)


def _matrix(rot: np.ndarray, loc: tuple[float, float, float]) -> np.ndarray:
    m = np.eye(4)
    m[:3, :3], m[:3, 3] = rot, loc
    return m


def test_detachment_is_how_far_a_bone_head_is_from_where_its_parent_holds_it() -> None:
    """A chain posed by rotations only stays on its parents (0) whatever the rotations and the
    object's transform; a location offset on one bone is measured in world units."""
    rng = np.random.default_rng(3)
    rest = np.array(
        [_matrix(exp_so3(rng.normal(size=3)), (0.1 * k, float(k), 0.2)) for k in range(4)]
    )
    parents = np.array([-1, 0, 1, 1])  # bones 2 and 3 both children of 1

    def pose(offset: np.ndarray, world: np.ndarray) -> np.ndarray:
        m = np.empty((4, 4, 4))
        for b in range(4):
            basis = _matrix(exp_so3(rng.normal(size=3)), tuple(offset[b]))
            at = rest[b] if parents[b] < 0 else m[parents[b]] @ np.linalg.inv(rest[parents[b]])
            m[b] = (at @ rest[b] if parents[b] >= 0 else at) @ basis
        return world @ m

    world = _matrix(2.0 * exp_so3(np.array([0.3, -0.2, 0.5])), (1.0, -2.0, 0.5))
    assert detachment(pose(np.zeros((4, 3)), world), rest, parents) < 1e-12
    assert detachment(pose(np.zeros((4, 3)), np.eye(4)), rest[:1], np.array([-1])) == 0.0
    offset = np.zeros((4, 3))
    offset[3] = (0.0, 0.3, 0.4)  # 0.5 in the bone's own axes, 1.0 in the world scaled by 2
    assert detachment(pose(offset, world), rest, parents) == pytest.approx(1.0)
    offset[0] = (5.0, 0.0, 0.0)  # a root's location moves the whole rig: nothing is detached
    assert detachment(pose(offset, world), rest, parents) == pytest.approx(1.0)
    # many poses (frames) at once: each its own
    poses = np.stack([pose(np.zeros((4, 3)), world), pose(offset, world)])
    np.testing.assert_allclose(detachment(poses, rest, parents), [0.0, 1.0], atol=1e-12)


@pytest.mark.skipif(importlib.util.find_spec("bpy") is None, reason="bpy is not installed")
def test_small_zoo_runs_and_reports(tmp_path: Path) -> None:
    cmd = [
        sys.executable,
        "-m",
        "benchmarks.zoo",
        "--seed",
        "3",
        "--count",
        "4",
        "--frames",
        "4",
        "--kinds",
        "humanoid,spider,tentacle,tree",
        "--json",
        "--out",
        str(tmp_path),
        "--name",
        "small",
    ]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads((tmp_path / "small.json").read_text())
    assert json.loads(proc.stdout) == out
    assert (out["seed"], out["count"], out["frames"]) == (3, 4, 4)
    assert "--seed 3" in out["command"]
    kinds = ["humanoid", "spider", "tentacle", "tree"]
    assert [r["kind"] for r in out["rigs"].values()] == kinds
    for name, r in out["rigs"].items():
        assert r["samples"] == 4 * len(r["goals"]) and 0 <= r["reachable_samples"] <= r["samples"]
        # Blender's bake played back again with its bones put back, where it left them off
        attached = r["methods"]["blender"]["detached_max"] > 1e-4
        assert set(r["methods"]) == {"blender", "ours"} | (
            {"blender_attached"} if attached else set()
        )
        assert (r["targets_attached"] is not None) == attached
        for label, m in r["methods"].items():
            assert m["ok"], (name, label)
            share = m["reachable_under_1e-3"]
            assert share is None or 0.0 <= share <= 1.0
            assert 0.0 <= m["rms"] <= m["max"] < 100.0
            assert m["jumps_over_10deg"] >= 0 and m["bake_time_median"] > 0
            assert m["keys"] > 0
            assert m["detached_max"] >= m["detached_mean"] >= 0.0
        # ours keys rotations only: every bone stays on its parent
        assert r["methods"]["ours"]["detached_max"] < 1e-6, name
        # our bake's time by part: the flip repair and the smoothing (both run on 4 frames) are
        # parts of the solve's time
        t = r["methods"]["ours"]["bake_split"]
        assert 0.0 < t["flip_repair"] and 0.0 < t["smoothing"], (name, t)
        assert t["flip_repair"] + t["smoothing"] <= t["solve"] <= t["bake"], (name, t)
        assert set(r["targets"]) >= {"reachable >= Blender", "rms <= Blender", "jumps <= Blender"}
        assert ("reachable >= 99.9 %" in r["targets"]) == (r["single_reachable_samples"] > 0)
        assert len(m["per_goal_reachable_under_1e-3"]) == len(r["goals"])
        # a tentacle's single chain: ours reaches what it can
        if r["kind"] == "tentacle" and r["reachable_samples"]:
            assert r["methods"]["ours"]["reachable_under_1e-3"] == 1.0
    table = (tmp_path / "small.md").read_text()
    assert "python -m benchmarks.zoo --seed 3" in table and table.count("\n| 0") == 4
    assert all(f"{kind}s " in table.split("Where our bake's time goes")[1] for kind in kinds)


@pytest.mark.skipif(importlib.util.find_spec("bpy") is None, reason="bpy is not installed")
def test_only_measures_the_rigs_asked_for_the_same_as_in_the_whole_zoo(tmp_path: Path) -> None:
    cmd = [sys.executable, "-m", "benchmarks.zoo", "--seed", "3", "--count", "4"]
    cmd += ["--frames", "3", "--kinds", "humanoid,spider,tentacle,tree", "--only", "1,3"]
    cmd += ["--out", str(tmp_path), "--json"]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads((tmp_path / "zoo_seed3_n4_01_03.json").read_text())
    assert list(out["rigs"]) == ["01_spider", "03_tree"] and out["only"] == [1, 3]
    assert out["summary"]["rigs"] == 2
    assert "(of them 01, 03)" in (tmp_path / "zoo_seed3_n4_01_03.md").read_text()
    bad = subprocess.run([*cmd[:7], "--only", "4"], cwd=ROOT, capture_output=True, text=True)
    assert bad.returncode == 2 and "--only" in bad.stderr
