"""The mocap pipeline (scripts/mocap.py) on a clip the test writes (a BVH with the CMU
skeleton's joint names, stepping in place), and on a short piece of the CMU walk."""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
CLIP = ROOT.parent / "shared" / "data" / "cmu-131-01-walk.bvh"
GOALS = {"foot.L", "foot.R", "hand.L", "hand.R", "spine.006"}

# joint, parent, offset (metres, Y up as in the CMU files); End Sites where a chain ends
JOINTS = [
    ("Hips", None, (0, 0, 0)),
    ("LHipJoint", "Hips", (0, 0, 0)),
    ("LeftHip", "LHipJoint", (0.09, -0.09, 0.0)),
    ("LeftKnee", "LeftHip", (0.0, -0.42, 0.0)),
    ("LeftAnkle", "LeftKnee", (0.0, -0.40, 0.0)),
    ("LeftToe", "LeftAnkle", (0.0, -0.04, 0.12)),
    ("RHipJoint", "Hips", (0, 0, 0)),
    ("RightHip", "RHipJoint", (-0.09, -0.09, 0.0)),
    ("RightKnee", "RightHip", (0.0, -0.42, 0.0)),
    ("RightAnkle", "RightKnee", (0.0, -0.40, 0.0)),
    ("RightToe", "RightAnkle", (0.0, -0.04, 0.12)),
    ("lowerback", "Hips", (0, 0, 0)),
    ("Chest", "lowerback", (0.0, 0.12, 0.0)),
    ("Chest2", "Chest", (0.0, 0.12, 0.0)),
    ("lowerneck", "Chest2", (0.0, 0.10, 0.0)),
    ("Neck", "lowerneck", (0.0, 0.09, 0.0)),
    ("Head", "Neck", (0.0, 0.09, 0.0)),
    ("LeftCollar", "Chest2", (0.0, 0.10, 0.0)),
    ("LeftShoulder", "LeftCollar", (0.17, 0.0, 0.0)),
    ("LeftElbow", "LeftShoulder", (0.0, -0.26, 0.0)),
    ("LeftWrist", "LeftElbow", (0.0, -0.24, 0.0)),
    ("RightCollar", "Chest2", (0.0, 0.10, 0.0)),
    ("RightShoulder", "RightCollar", (-0.17, 0.0, 0.0)),
    ("RightElbow", "RightShoulder", (0.0, -0.26, 0.0)),
    ("RightWrist", "RightElbow", (0.0, -0.24, 0.0)),
]
END = {"LeftToe": (0, 0, 0.05), "RightToe": (0, 0, 0.05), "Head": (0, 0.1, 0)}
END |= {"LeftWrist": (0, -0.08, 0), "RightWrist": (0, -0.08, 0)}


def _angles(joint: str, t: float) -> tuple[float, float, float]:
    """(z, y, x) degrees: steps in place, each leg lifted in turn (hip and knee bend), the
    other planted; arms swing and bend; the head nods."""
    lift = [max(0.0, math.sin(2 * math.pi * t / 1.0 + p)) ** 2 for p in (0.0, math.pi)]
    side = 0 if joint.startswith("Left") else 1
    if joint.endswith("Hip"):
        return (0.0, 0.0, -40.0 * lift[side])
    if joint.endswith("Knee"):
        return (0.0, 0.0, 70.0 * lift[side])
    if joint.endswith("Ankle"):
        return (0.0, 0.0, -30.0 * lift[side])
    if joint.endswith("Shoulder"):
        return (10.0 * (1 if side else -1) * lift[side], 0.0, 30.0 * (lift[1 - side] - 0.5))
    if joint.endswith("Elbow"):
        return (0.0, 0.0, -50.0 * lift[side])
    if joint == "Neck":
        return (0.0, 0.0, 10.0 * math.sin(2 * math.pi * t))
    return (0.0, 0.0, 0.0)


def write_bvh(path: Path, frames: int = 48, fps: float = 24.0) -> None:
    lines = ["HIERARCHY"]
    children: dict[str | None, list[str]] = {}
    offsets = {}
    for name, parent, offset in JOINTS:
        children.setdefault(parent, []).append(name)
        offsets[name] = offset

    def emit(name: str, depth: int) -> None:
        pad = "  " * depth
        lines.append(f"{pad}{'ROOT' if depth == 0 else 'JOINT'} {name}")
        lines.append(pad + "{")
        lines.append(f"{pad}  OFFSET {' '.join(f'{v:.6f}' for v in offsets[name])}")
        if depth == 0:
            lines.append(
                f"{pad}  CHANNELS 6 Xposition Yposition Zposition Zrotation Yrotation Xrotation"
            )
        else:
            lines.append(f"{pad}  CHANNELS 3 Zrotation Yrotation Xrotation")
        for child in children.get(name, []):
            emit(child, depth + 1)
        if name in END:
            lines.extend(
                [
                    f"{pad}  End Site",
                    pad + "  {",
                    f"{pad}    OFFSET {' '.join(f'{v:.6f}' for v in END[name])}",
                    pad + "  }",
                ]
            )
        lines.append(pad + "}")

    emit("Hips", 0)
    lines += ["MOTION", f"Frames: {frames}", f"Frame Time: {1.0 / fps:.6f}"]
    order = [name for name, _, _ in JOINTS]
    for f in range(frames):
        t = f / fps
        values = [0.0, 0.95, 0.0, 0.0, 0.0, 0.0]  # the hips hold still: a planted foot too
        for name in order[1:]:
            values += _angles(name, t)
        lines.append(" ".join(f"{v:.5f}" for v in values))
    path.write_text("\n".join(lines) + "\n")


def _mocap() -> Any:
    spec = importlib.util.spec_from_file_location("mocap", ROOT / "scripts" / "mocap.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _check(report: dict[str, Any], frames: int) -> None:
    assert report["frames"] == frames
    assert set(report["goals"]) == GOALS
    for name, g in report["goals"].items():
        assert g["mean"] < 0.005 and g["p95"] < 0.015, name  # metres, on playback
    # every frame converged or its reason is given
    reasons = report["not_converged"]["reasons"]
    assert sum(reasons.values()) >= frames - report["converged_frames"]
    assert 0 < report["keys_written"] < report["keys_full_bake"]


def test_mocap_on_a_clip_the_test_writes(clean: Any, tmp_path: Path) -> None:
    bvh = tmp_path / "steps.bvh"
    write_bvh(bvh)
    out = tmp_path / "out"
    assert _mocap().main(["--bvh", str(bvh), "--out", str(out)]) == 0
    report = json.loads((out / "mocap_report.json").read_text())
    _check(report, 48)
    feet = report["foot_sliding"]
    assert all(feet[f]["contacts"] >= 1 for f in ("foot.L", "foot.R"))  # the planted foot
    for foot in feet.values():
        assert foot["max"] < 0.002  # pinned: no sliding during contacts
    for png in ("mocap_error.png", "mocap_feet.png"):
        assert 0 < (out / png).stat().st_size < 300_000
    assert (out / "mocap_report.md").read_text().startswith("# Mocap")


def test_pinning_holds_a_point_the_leg_reaches() -> None:
    import numpy as np

    mocap = _mocap()
    fps, n = 24.0, 40
    f = np.arange(n)
    # a foot sliding 10 cm forward during a contact (frames 10-29) while the hip moves 20 cm:
    # the path is within a 0.58 reach of the hip, the contact's mean position is not at its start
    path = np.stack([0.005 * f, np.zeros(n), np.zeros(n)], axis=1)
    hips = np.stack([0.01 * (f - 20), np.zeros(n), np.full(n, 0.55)], axis=1)
    assert np.linalg.norm(path[8:32] - hips[8:32], axis=1).max() <= 0.58  # the contact, blends
    plain, moved = mocap.pin(path, [(10, 30)], fps)
    assert moved == [] and np.allclose(plain[10:30], path[10:30].mean(axis=0))
    assert np.linalg.norm(plain[10:30] - hips[10:30], axis=1).max() > 0.58
    pinned, moved = mocap.pin(path, [(10, 30)], fps, hips, 0.58)
    assert np.ptp(pinned[10:30], axis=0).max() == 0.0  # still held
    ramp = round(mocap.BLEND * fps)
    near = slice(10 - ramp, 30 + ramp)
    assert np.linalg.norm(pinned[near] - hips[near], axis=1).max() <= 0.58
    assert 0.0 < moved[0] == pytest.approx(np.linalg.norm(pinned[20] - plain[20]))
    assert moved[0] < 0.05  # moved as little as it takes


@pytest.mark.skipif(not CLIP.exists(), reason="the CMU clip is not beside the checkout")
def test_mocap_script_on_a_short_piece_of_the_cmu_walk(clean: Any, tmp_path: Path) -> None:
    assert _mocap().main(["--frames", "60", "--out", str(tmp_path)]) == 0
    _check(json.loads((tmp_path / "mocap_report.json").read_text()), 60)
