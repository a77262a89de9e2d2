"""Lean bakes: few keys, and Blender's playback of them within the tolerances."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path
from typing import Any

import bpy
import numpy as np
from blender_helpers import add_goal, chain_bones, make_armature, make_empty, override, tip
from test_bake import animate_target, fcurves

ROOT = Path(__file__).resolve().parents[2]


def smooth_rig(rotation_mode: str = "QUATERNION") -> tuple[Any, Any]:
    ob = make_armature("Arm", chain_bones(4))
    for pb in ob.pose.bones:
        pb.rotation_mode = rotation_mode
    target = make_empty("Target", (1.0, 2.5, 0.5))
    animate_target(
        target, {1: (1.0, 2.5, 0.5), 20: (-1.5, 1.5, 1.0), 40: (0.5, 2.0, -1.5), 60: (1, 2.5, 0.5)}
    )
    add_goal(ob, "b3", target, chain_length=3)
    return ob, target


def bake(ob: Any, **kw: Any) -> set[str]:
    with override(ob):
        return bpy.ops.jacobian_ik.bake(frame_start=1, frame_end=60, **kw)


def solved_tips(ob: Any) -> np.ndarray:
    scene = bpy.context.scene
    out = []
    for frame in range(1, 61):
        scene.frame_set(frame)
        out.append(np.array(tip(ob, "b3")))
    return np.array(out)


def bone_rotations(ob: Any) -> np.ndarray:
    """Every pose bone's local rotation (quaternion) at every frame, as Blender plays it back."""
    scene = bpy.context.scene
    out = []
    for frame in range(1, 61):
        scene.frame_set(frame)
        out.append([np.array(pb.matrix_basis.to_quaternion()) for pb in ob.pose.bones])
    return np.array(out)


def test_lean_bake_keeps_few_keys_within_tolerance(clean: Any) -> None:
    for mode in ("QUATERNION", "XYZ"):
        bpy.ops.wm.read_factory_settings(use_empty=True)
        ob, _ = smooth_rig(mode)
        assert bake(ob) == {"FINISHED"}
        full = ob.jacobian_ik.last_keys
        reference, rotations = solved_tips(ob), bone_rotations(ob)
        tolerance_deg, tolerance_pos = 0.2, 2e-3
        assert bake(
            ob, reduce_keys=True, key_tolerance=tolerance_deg, position_tolerance=tolerance_pos
        ) == {"FINISHED"}
        lean = ob.jacobian_ik.last_keys
        # 60 frames of a fast target (keys on most frames where it turns fastest): 4.5x here
        # (4.3x for Euler angles, 3 curves a bone; 3.1x and 3.0x with central slopes only,
        # bridge/reduce.py); on the demo and zoo rigs at the default tolerances:
        # benchmarks/lean_bake.py
        assert lean * (4 if mode == "QUATERNION" else 3.6) <= full, (mode, lean, full)
        # Blender's own playback of the lean curves: every bone and the effector in tolerance
        dot = np.abs(np.sum(bone_rotations(ob) * rotations, axis=2))
        turn = np.degrees(2 * np.arccos(np.clip(dot, 0.0, 1.0)))
        assert turn.max() <= tolerance_deg + 1e-3, (mode, turn.max())
        drift = np.linalg.norm(solved_tips(ob) - reference, axis=1)
        assert drift.max() <= tolerance_pos + 1e-5, (mode, drift.max())
        for fc in fcurves(ob.animation_data.action, ob):
            types = {k.handle_left_type for k in fc.keyframe_points}
            assert types | {k.handle_right_type for k in fc.keyframe_points} <= {"ALIGNED", "FREE"}
            assert all(k.interpolation == "BEZIER" for k in fc.keyframe_points)


def test_each_effectors_headroom_takes_keys_out(clean: Any, monkeypatch: Any) -> None:
    """The keys are chosen with each effector's share of the position tolerance loosened by
    the headroom the root-sum-square split leaves (``reduce.SPLIT``): fewer keys than with the
    split alone, and Blender's playback still within both tolerances."""
    reduce = importlib.import_module(f"{clean.__name__}.bridge.reduce")
    keys = {}
    for split in (1.0, reduce.SPLIT):
        monkeypatch.setattr(reduce, "SPLIT", split)
        bpy.ops.wm.read_factory_settings(use_empty=True)
        ob, _ = smooth_rig()
        assert bake(ob) == {"FINISHED"}
        reference, rotations = solved_tips(ob), bone_rotations(ob)
        assert bake(ob, reduce_keys=True) == {"FINISHED"}  # 0.1 degrees, 1 mm
        keys[split] = ob.jacobian_ik.last_keys
        dot = np.abs(np.sum(bone_rotations(ob) * rotations, axis=2))
        assert np.degrees(2 * np.arccos(np.clip(dot, 0.0, 1.0))).max() <= 0.1 + 1e-3
        assert np.linalg.norm(solved_tips(ob) - reference, axis=1).max() <= 1e-3 + 1e-5
    assert keys[reduce.SPLIT] < keys[1.0], keys


def test_lean_bake_of_a_stretching_chain_within_tolerance(clean: Any) -> None:
    """Scale channels (IK stretch) take their share of the position tolerance too: a target
    that leaves the chain's reach and comes back, baked lean, plays back within 1 mm of the
    full bake's effector and with fewer keys."""
    ob = make_armature("Arm", chain_bones(4))
    for pb in ob.pose.bones:
        pb.ik_stretch = 0.3
    target = make_empty("Target", (1.0, 2.5, 0.5))
    animate_target(target, {1: (1.0, 2.5, 0.5), 30: (0.0, 4.8, 0.8), 60: (-1.0, 2.0, 0.0)})
    add_goal(ob, "b3", target, chain_length=3)
    assert bake(ob) == {"FINISHED"}
    full, reference = ob.jacobian_ik.last_keys, solved_tips(ob)
    bpy.context.scene.frame_set(30)
    assert max(pb.scale.y for pb in ob.pose.bones) > 1.01  # it stretched out there
    assert bake(ob, reduce_keys=True) == {"FINISHED"}
    assert ob.jacobian_ik.last_keys * 2 <= full, (ob.jacobian_ik.last_keys, full)
    assert np.linalg.norm(solved_tips(ob) - reference, axis=1).max() <= 1e-3 + 1e-5


def test_blender_evaluates_the_curve_the_keys_are_chosen_by(clean: Any) -> None:
    """Keys on solved values with handles at thirds along the slopes bridge.reduce chose (ALIGNED
    where a key's two slopes are one, FREE at a corner): Blender's evaluation is the cubic
    Hermite curve bridge.reduce chooses the keys by."""
    from jacobian_ik.bridge import reduce

    ob, _ = smooth_rig()
    assert bake(ob, reduce_keys=True, key_tolerance=0.1) == {"FINISHED"}
    frames = np.arange(1.0, 61.0)
    corners = 0
    for fc in fcurves(ob.animation_data.action, ob):
        keys = np.array([round(k.co[0]) - 1 for k in fc.keyframe_points])
        values = np.array([fc.evaluate(f) for f in frames])
        leaving, arriving = np.zeros(60), np.zeros(60)
        for k, point in zip(keys, fc.keyframe_points, strict=True):
            leaving[k] = (point.handle_right[1] - point.co[1]) / (
                point.handle_right[0] - point.co[0]
            )
            arriving[k] = (point.co[1] - point.handle_left[1]) / (
                point.co[0] - point.handle_left[0]
            )
            aligned = point.handle_left_type == point.handle_right_type == "ALIGNED"
            if aligned:  # one slope (to the handles' float32 rounding)
                assert abs(leaving[k] - arriving[k]) < 1e-5, (fc.data_path, k)
            corners += not aligned
        assert len(keys) <= 50, (fc.data_path, len(keys))  # gaps to evaluate in between
        curve = reduce.hermite(frames, keys, values, leaving, arriving)
        assert np.abs(curve - values).max() < 1e-5, fc.data_path
    assert corners, "no key with two slopes: the FREE handles went untested"


def test_one_sided_slopes_are_exact_on_a_parabola() -> None:
    """``_slopes``' AHEAD and BEHIND rows: second order, so exact on a parabola whatever the
    frame spacing (first order on the frame next to the range's end)."""
    from jacobian_ik.bridge import reduce

    x = np.array([1.0, 2.0, 4.0, 5.0, 8.0, 9.0, 10.0, 13.0])
    m = reduce._slopes(x, 0.5 * x * x - 3.0 * x + 2.0)
    exact = x - 3.0
    np.testing.assert_allclose(m[reduce.AHEAD, :-2], exact[:-2], atol=1e-12)
    np.testing.assert_allclose(m[reduce.BEHIND, 2:], exact[2:], atol=1e-12)


def test_lean_bake_keeps_keys_outside_the_range(clean: Any) -> None:
    ob, _ = smooth_rig()
    for pb in ob.pose.bones:
        for frame, angle in ((-10, 0.3), (0, -0.2), (70, 0.4), (80, 0.1)):
            pb.rotation_quaternion = (math.cos(angle), math.sin(angle), 0.0, 0.0)
            pb.keyframe_insert("rotation_quaternion", frame=frame)
    for fc in fcurves(ob.animation_data.action, ob):
        for k in fc.keyframe_points:  # handles that Blender does not recompute
            k.handle_left_type = k.handle_right_type = "FREE"
            k.interpolation = "LINEAR" if k.co[0] < 0 else "BEZIER"
            k.handle_left = (k.co[0] - 2.0, k.co[1] + 0.05)
    before = {
        (fc.data_path, fc.array_index): outside(fc) for fc in fcurves(ob.animation_data.action, ob)
    }
    assert bake(ob, reduce_keys=True) == {"FINISHED"}
    for fc in fcurves(ob.animation_data.action, ob):
        assert outside(fc) == before[(fc.data_path, fc.array_index)], fc.data_path


def test_lean_bake_of_one_frame(clean: Any) -> None:
    ob, _ = smooth_rig()
    with override(ob):
        assert bpy.ops.jacobian_ik.bake(frame_start=7, frame_end=7, reduce_keys=True) == {
            "FINISHED"
        }
    curves = fcurves(ob.animation_data.action, ob)
    assert len(curves) == 12 and all(len(fc.keyframe_points) == 1 for fc in curves)
    assert ob.jacobian_ik.last_keys == 12


def outside(fc: Any) -> list[tuple[Any, ...]]:
    return [
        (tuple(k.co), tuple(k.handle_left), k.interpolation, k.handle_left_type)
        for k in fc.keyframe_points
        if not 1 <= k.co[0] <= 60
    ]


def test_run_reports_full_and_lean_keys(clean: Any) -> None:
    from jacobian_ik.bridge import run

    ob, _ = smooth_rig()
    report = run(ob, bpy.context.scene, range(1, 61), reduce_keys=True, key_tolerance=0.1)
    assert report.full_keys == 60 * 12
    assert 0 < report.keys < report.full_keys
    assert report.summary()["full_keys"] == 60 * 12


def test_benchmark_small_version_runs() -> None:
    spec = importlib.util.spec_from_file_location("lean_bake", ROOT / "benchmarks" / "lean_bake.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    rows = module.benchmark(frames=60, tolerances=[(0.1, 1e-3)])
    assert rows[0]["bake"] == "full" and rows[1]["ratio"] >= 4.0
    assert rows[1]["playback_error"] <= 1e-3 + 1e-5
