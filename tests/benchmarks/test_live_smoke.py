"""Smoke test of benchmarks/live.py --playback: a few frames of both rigs, live solving beside
Blender's IK constraints, in a subprocess (bpy gets its own process and a throwaway HOME)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("bpy") is None,
    reason="bpy (Blender as a Python module) is not installed",
)


def test_live_playback_smoke(tmp_path: Path) -> None:
    out = tmp_path / "live.json"
    proc = subprocess.run(
        [sys.executable, "benchmarks/live.py", "--playback", "5", "--repeats", "1", "--json", out],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "HOME": str(tmp_path)},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "frame_set, Blender IK constraints" in proc.stdout
    results = json.loads(out.read_text())
    assert [r["rig"] for r in results] == ["humanoid", "metarig"]
    for res in results:
        for key in ("ours", "blender", "none", "ours_cpu", "blender_cpu", "ours_update"):
            assert res[key]["median"] > 0 and res[key]["p95"] >= res[key]["median"]
        assert res["ours_max_error"] < 1e-4  # live solving follows every frame
        assert res["blender_max_error"] < 1e-2
        assert res["ratio_cpu"] > 0
