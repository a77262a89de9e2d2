"""Baking a frame range: one batched solve, keys only inside the range, nothing else touched."""

from __future__ import annotations

import math
from typing import Any

import bpy
import numpy as np
import pytest
from blender_helpers import add_goal, chain_bones, make_armature, make_empty, override, tip


def fcurves(action: Any, ob: Any) -> Any:
    """The F-curves ``ob`` uses (the product's own helper: slot's channelbag or action.fcurves)."""
    from jacobian_ik.bridge.write import object_fcurves

    return object_fcurves(ob, action)


def snapshot_curve(fc: Any) -> list[tuple[Any, ...]]:
    return [
        (
            tuple(k.co),
            tuple(k.handle_left),
            tuple(k.handle_right),
            k.interpolation,
            k.handle_left_type,
            k.handle_right_type,
            k.type,
        )
        for k in fc.keyframe_points
    ]


def animate_target(empty: Any, frames: dict[int, tuple[float, float, float]]) -> None:
    for frame, location in frames.items():
        empty.location = location
        empty.keyframe_insert("location", frame=frame)


@pytest.fixture
def rig(clean: Any) -> tuple[Any, Any]:
    ob = make_armature("Arm", chain_bones(4))
    target = make_empty("Target", (1.0, 2.5, 0.5))
    animate_target(target, {1: (1.0, 2.5, 0.5), 10: (-1.5, 1.5, 1.0), 20: (0.5, 2.0, -1.5)})
    add_goal(ob, "b3", target, chain_length=3)
    return ob, target


def bake(ob: Any, **kw: Any) -> set[str]:
    with override(ob):
        return bpy.ops.jacobian_ik.bake(**kw)


def test_bake_creates_action_and_reaches_targets(rig: tuple[Any, Any], capsys: Any) -> None:
    ob, target = rig
    assert bake(ob, frame_start=1, frame_end=20) == {"FINISHED"}
    assert "100 %" in capsys.readouterr().out  # progress lines in background mode
    curves = fcurves(ob.animation_data.action, ob)
    assert curves, "no F-curves written"
    for fc in curves:  # each bone's channels in a group of its name, on every Blender line
        assert (
            fc.group is not None
            and fc.data_path == f'pose.bones["{fc.group.name}"].rotation_quaternion'
        ), (fc.data_path, fc.group)
    action = ob.animation_data.action
    curves = fcurves(action, ob)
    paths = sorted({(fc.data_path, fc.array_index) for fc in curves})
    assert paths == sorted(
        (f'pose.bones["b{i}"].rotation_quaternion', j) for i in (1, 2, 3) for j in range(4)
    )
    for fc in curves:
        assert [k.co.x for k in fc.keyframe_points] == list(range(1, 21))
        assert fc.group is not None and fc.group.name in fc.data_path
    assert ob.jacobian_ik.last_frames == 20
    assert ob.jacobian_ik.last_keys == 20 * 12
    scene = bpy.context.scene
    for frame in range(1, 21):
        scene.frame_set(frame)
        assert (tip(ob, "b3") - target.matrix_world.translation).length < 1e-4, frame


def test_bake_replaces_keys_only_in_range(rig: tuple[Any, Any]) -> None:
    ob, _ = rig
    pb = ob.pose.bones["b2"]
    for frame, angle in [(1, 0.1), (4, 0.2), (8, 0.3), (12, 0.4), (30, 0.5)]:
        pb.rotation_quaternion = (math.cos(angle), math.sin(angle), 0.0, 0.0)
        pb.keyframe_insert("rotation_quaternion", frame=frame)
        ob.pose.bones["b0"].location = (angle, 0.0, 0.0)
        ob.pose.bones["b0"].keyframe_insert("location", frame=frame)
    other = bpy.data.actions.new("Other")
    other_ob = make_empty("Other", (0.0, 0.0, 0.0))
    other_ob.animation_data_create()
    other_ob.animation_data.action = other
    other_ob.keyframe_insert("location", frame=3)
    other_ob.keyframe_insert("location", frame=9)
    action = ob.animation_data.action
    before = {(fc.data_path, fc.array_index): snapshot_curve(fc) for fc in fcurves(action, ob)}
    before_other = [snapshot_curve(fc) for fc in fcurves(other, other_ob)]

    assert bake(ob, frame_start=5, frame_end=10) == {"FINISHED"}

    assert ob.animation_data.action == action
    assert [snapshot_curve(fc) for fc in fcurves(other, other_ob)] == before_other
    after = {(fc.data_path, fc.array_index): snapshot_curve(fc) for fc in fcurves(action, ob)}
    for key, keys in before.items():
        if "b0" in key[0]:  # another channel: untouched
            assert after[key] == keys
        else:  # a baked channel: the same keys outside 5..10, one per frame inside
            outside_before = [k[0] for k in keys if not 5 <= k[0][0] <= 10]
            outside_after = [k[0] for k in after[key] if not 5 <= k[0][0] <= 10]
            assert outside_after == outside_before
            assert [k[0][0] for k in after[key] if 5 <= k[0][0] <= 10] == list(range(5, 11))
    new = {k for k in after if k not in before}
    assert {p for p, _ in new} == {f'pose.bones["b{i}"].rotation_quaternion' for i in (1, 3)}


def test_bake_track_mode(rig: tuple[Any, Any]) -> None:
    ob, _ = rig
    ob.jacobian_ik.track_steps = 5
    assert bake(ob, frame_start=1, frame_end=20, mode="TRACK") == {"FINISHED"}
    assert ob.jacobian_ik.last_frames == 20


def test_bake_euler_continuous(clean: Any) -> None:
    """A target circling a bone turns it about Z by two full turns: no 2 pi jumps in the keys."""
    ob = make_armature("Arm", chain_bones(1))
    target = make_empty("Target", (0.0, 1.5, 0.0))
    n = 48
    frames = {
        f + 1: (math.cos(a), math.sin(a), 0.0)
        for f, a in enumerate(np.linspace(0.0, 4 * math.pi, n))
    }
    animate_target(target, frames)
    for fc in fcurves(target.animation_data.action, target):
        for k in fc.keyframe_points:
            k.interpolation = "LINEAR"
    add_goal(ob, "b0", target)
    for pb in ob.pose.bones:
        pb.rotation_mode = "XYZ"
        pb.lock_ik_x = pb.lock_ik_y = True  # a hinge about Z
    assert bake(ob, frame_start=1, frame_end=n) == {"FINISHED"}
    for fc in fcurves(ob.animation_data.action, ob):
        values = np.array([k.co.y for k in fc.keyframe_points])
        assert np.max(np.abs(np.diff(values))) < 1.0, fc.data_path
        if fc.array_index == 2:  # Z turned two full turns
            assert abs(values[-1] - values[0]) > 3.5 * math.pi


def test_bake_empty_range_changes_nothing(rig: tuple[Any, Any]) -> None:
    ob, _ = rig
    with override(ob), pytest.raises(RuntimeError, match="Empty frame range"):
        bpy.ops.jacobian_ik.bake(frame_start=10, frame_end=5)
    assert ob.animation_data is None


def test_bake_missing_target_changes_nothing(rig: tuple[Any, Any]) -> None:
    ob, target = rig
    bpy.data.objects.remove(target)
    with override(ob), pytest.raises(RuntimeError, match="no target"):
        bpy.ops.jacobian_ik.bake(frame_start=1, frame_end=5)
    assert ob.animation_data is None
    assert bpy.context.scene.frame_current == 1


def test_scene_range_is_default(rig: tuple[Any, Any]) -> None:
    ob, _ = rig
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 3, 6
    assert bake(ob) == {"FINISHED"}
    assert ob.jacobian_ik.last_frames == 4


@pytest.mark.parametrize("mode", ["XYZ", "ZYX", "YZX", "AXIS_ANGLE"])
def test_bake_rotation_modes(rig: tuple[Any, Any], mode: str) -> None:
    ob, target = rig
    for pb in ob.pose.bones:
        pb.rotation_mode = mode
    assert bake(ob, frame_start=1, frame_end=20) == {"FINISHED"}
    attr = "rotation_axis_angle" if mode == "AXIS_ANGLE" else "rotation_euler"
    curves = fcurves(ob.animation_data.action, ob)
    assert {fc.data_path for fc in curves} == {f'pose.bones["b{i}"].{attr}' for i in (1, 2, 3)}
    scene = bpy.context.scene
    for frame in range(1, 21):
        scene.frame_set(frame)
        assert (tip(ob, "b3") - target.matrix_world.translation).length < 1e-4, frame


def test_the_report_says_why_a_goal_is_not_met(clean: Any, capsys: Any) -> None:
    """Each goal not met on every frame gets a line: frames met, out of reach (how far off at
    most), in reach but held; the run's summary counts them per goal."""
    from jacobian_ik.bridge import run

    ob = make_armature("Arm", [*chain_bones(3), *chain_bones(3, prefix="c")])
    far, near = make_empty("Far", (0.0, 0.0, 0.0)), make_empty("Near", (0.5, 1.5, 0.5))
    animate_target(far, {1: (0.5, 2.0, 0.5), 10: (0.5, 4.0, 0.5)})  # beyond 3 from frame 6
    add_goal(ob, "b2", far, chain_length=3)
    add_goal(ob, "c2", near, chain_length=3)
    assert bake(ob, frame_start=1, frame_end=10) == {"FINISHED"}
    text = capsys.readouterr().out
    report = run(ob, bpy.context.scene, range(1, 11))
    out = int(np.sum(report.goal_status[:, 0] == "out_of_reach"))
    assert 3 <= out <= 6 and np.all(report.goal_status[:, 1] == "met")
    worst = report.position_error[:, 0].max()
    line = f"goal 1 (b2): met on {10 - out} of 10 frames, out of reach on {out} ({worst:.3g}"
    assert line in text, text
    assert "goal 2" not in text
    goals = report.summary()["goals"]
    assert goals["1:b2"]["frames_out_of_reach"] == out and goals["2:c2"]["frames_met"] == 10


def test_a_bake_over_nla_tracks_plays_back_its_keys(rig: tuple[Any, Any]) -> None:
    """The chain's bones animated by an NLA strip (a walk pushed down), a fresh action on top:
    the baked keys play back (they override the strip). The keys are written in bulk, which
    tags nothing: the depsgraph kept evaluating the channels the action had before, and the
    chain played the strip's motion, 2.2 m off the target, until something else tagged it."""
    import math

    ob, target = rig
    for name in ("b1", "b2"):
        pb = ob.pose.bones[name]
        pb.rotation_quaternion = (math.cos(0.3), math.sin(0.3), 0.0, 0.0)
        pb.keyframe_insert("rotation_quaternion", frame=1)
    ad = ob.animation_data
    ad.nla_tracks.new().strips.new("walk", 1, ad.action)
    ad.action = bpy.data.actions.new("Baked")
    assert bake(ob, frame_start=1, frame_end=20) == {"FINISHED"}
    for frame in (1, 10, 20):
        bpy.context.scene.frame_set(frame)
        assert (tip(ob, "b3") - target.matrix_world.translation).length < 1e-4, frame


def test_a_bake_runs_on_the_scenes_threads_and_keys_the_same_on_any_count(
    rig: tuple[Any, Any], monkeypatch: Any
) -> None:
    """The compiled loop takes Blender's thread count (the Performance panel, ``blender -t``)
    and splits long batches across it; the keys are the same bit for bit on one thread."""
    from jacobian_ik.solvers import kernel

    ob, _ = rig
    monkeypatch.setattr(kernel, "THREADS", kernel.THREADS)  # (put back after the test)
    monkeypatch.setattr(kernel, "SPLIT", 0)  # every batch split, however short
    monkeypatch.setattr(kernel, "SPLIT_SECONDS", 0.0)
    render = bpy.context.scene.render
    render.threads_mode = "FIXED"
    keys = []
    for count in (1, 3):
        render.threads = count
        assert bake(ob, frame_start=1, frame_end=20) == {"FINISHED"}
        assert kernel.THREADS == count
        values = []
        for fc in fcurves(ob.animation_data.action, ob):
            co = np.zeros(2 * len(fc.keyframe_points))
            fc.keyframe_points.foreach_get("co", co)
            values.append(co)
        keys.append(np.concatenate(values))
    np.testing.assert_array_equal(keys[0], keys[1])
