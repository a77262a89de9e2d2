"""Smoke test of benchmarks/vs_blender.py: a few frames of the 30-bone chain, Blender's bake
against ours, in a subprocess (bpy gets its own process and a throwaway HOME)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("bpy") is None,
    reason="bpy (Blender as a Python module) is not installed",
)

FIELDS = [
    "time_median",
    "mean",
    "max",
    "reachable_under_1e-3",
    "unreachable_excess_mean",
    "keys",
    "jumps_over_10deg",
    "split_median",
]


def test_vs_blender_smoke(tmp_path: Path) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks.vs_blender",
            "--quick",
            "--frames",
            "4",
            "--rigs",
            "C",
            "--out",
            str(tmp_path),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    text = (tmp_path / "vs_blender.md").read_text()
    header = next(line for line in text.splitlines() if line.startswith("| rig | method"))
    for column in ("bake s", "mean err", "max err", "reachable < 1e-3", "keys", "jumps"):
        assert column in header
    assert "| C | Blender IK (Standard) |" in text
    assert "| C | ours LM converge |" in text
    assert "| rig | method |" in proc.stdout  # the table is printed too

    out = json.loads((tmp_path / "vs_blender.json").read_text())
    assert out["frames"] == 4
    methods = out["rigs"]["C"]["methods"]
    for label in ("Blender IK (Standard)", "ours LM converge"):
        for name in FIELDS:
            assert name in methods[label], (label, name)
        assert methods[label]["keys"] > 0
        assert methods[label]["time_median"] > 0
    ours = methods["ours LM converge"]
    assert {"read", "solve", "write"} <= set(ours["split_median"])
    assert ours["reachable_samples"] + ours["unreachable_samples"] == 4
    assert "C: >= 99 % reachable under 1e-3" in out["targets"]
