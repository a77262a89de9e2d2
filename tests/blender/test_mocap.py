"""The mocap script on a short piece of the CMU walk: it runs, tracks and writes its report."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
CLIP = ROOT.parent / "shared" / "data" / "cmu-131-01-walk.bvh"


@pytest.mark.skipif(not CLIP.exists(), reason="the CMU clip is not beside the checkout")
def test_mocap_script_on_a_short_piece(clean: Any, tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location("mocap", ROOT / "scripts" / "mocap.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.main(["--frames", "60", "--out", str(tmp_path)]) == 0
    report = json.loads((tmp_path / "mocap_report.json").read_text())
    assert report["frames"] == 60
    assert set(report["goals"]) == {"foot.L", "foot.R", "hand.L", "hand.R", "spine.006"}
    for name in ("foot.L", "foot.R"):
        assert report["goals"][name]["p95"] < 0.02  # metres, on playback
    assert 0 < report["keys_written"] < report["keys_full_bake"]
    png = tmp_path / "mocap_error.png"
    assert png.exists() and png.stat().st_size < 300_000
    assert (tmp_path / "mocap_report.md").read_text().startswith("# Mocap")
