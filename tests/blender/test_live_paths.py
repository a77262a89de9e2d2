"""A frame solved live is the same however it was reached, on rigs nobody tuned to.

Seeded zoo rigs (tests/rigs/zoo_rigs.py: humanoids, spiders, tentacles of random proportions;
position goals, targets keyed along smooth paths that leave the reach on some frames) are played
forward, backward and entered by jumps (benchmarks/live_paths.py). Playing starts each frame from
the neighbouring frame's solution, a jump from the animated pose: every reachable goal (its IK
tree alone, the target within 95 % of the reach) is met every way, so its tip agrees within
1e-4 whichever way the frame was reached."""

from __future__ import annotations

from types import ModuleType

import pytest

from benchmarks import live_paths
from tests.rigs.zoo_rigs import zoo


@pytest.mark.parametrize("seed", [11, 12])
def test_reachable_goals_agree_whichever_way_a_frame_is_reached(
    clean: ModuleType, seed: int
) -> None:
    for rig in zoo(seed, 3, ("humanoid", "spider", "tentacle")):
        res = live_paths.measure(rig, 30)
        assert res["reachable_samples"] > 0, rig.name
        assert res["unmet"] == 0, res
        assert res["tip"] < 1e-4, res
        assert res["solves_per_frame"] >= 1.0
    assert clean.bridge.live_model.FRAME_START == "previous"
