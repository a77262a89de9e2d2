"""Baking into a new action: the source action is copied, kept (fake user) and untouched."""

from __future__ import annotations

from typing import Any

import bpy
from blender_helpers import override, tip
from test_bake import fcurves, snapshot_curve
from test_bake import rig as rig  # a fixture


def test_bake_into_a_new_action_keeps_the_source(rig: tuple[Any, Any]) -> None:
    ob, target = rig
    pb = ob.pose.bones["b0"]
    pb.location = (0.0, 0.0, 0.0)
    pb.keyframe_insert("location", frame=1)
    pb.location = (0.1, 0.0, 0.0)
    pb.keyframe_insert("location", frame=20)
    source = ob.animation_data.action
    before = {(fc.data_path, fc.array_index): snapshot_curve(fc) for fc in fcurves(source, ob)}
    with override(ob):
        assert bpy.ops.jacobian_ik.bake(frame_start=1, frame_end=20, new_action=True) == {
            "FINISHED"
        }
    action = ob.animation_data.action
    assert action != source and action.name == f"{source.name}_jik"
    assert source.use_fake_user and bpy.data.actions.get(source.name) is source
    after = {(fc.data_path, fc.array_index): snapshot_curve(fc) for fc in fcurves(source, ob)}
    assert after == before  # untouched
    baked = {(fc.data_path, fc.array_index) for fc in fcurves(action, ob)}
    assert ('pose.bones["b0"].location', 0) in baked  # the copy keeps the source's channels
    assert ('pose.bones["b3"].rotation_quaternion', 0) in baked
    scene = bpy.context.scene
    for frame in (1, 10, 20):
        scene.frame_set(frame)
        assert (tip(ob, "b3") - target.matrix_world.translation).length < 1e-4


def test_new_action_from_a_copy_is_numbered(rig: tuple[Any, Any]) -> None:
    """Baking the copy into a new action again: ``<action>_jik.001``, then ``.002`` (they were
    ``<action>_jik_jik``, ``<action>_jik_jik_jik``)."""
    ob, _ = rig
    with override(ob):
        bpy.ops.jacobian_ik.bake(frame_start=1, frame_end=5)
        source = ob.animation_data.action.name
        names = []
        for _ in range(3):
            bpy.ops.jacobian_ik.bake(frame_start=1, frame_end=5, new_action=True)
            names.append(ob.animation_data.action.name)
    assert names == [f"{source}_jik", f"{source}_jik.001", f"{source}_jik.002"]


def test_new_action_without_a_source(rig: tuple[Any, Any]) -> None:
    ob, _ = rig
    with override(ob):
        bpy.ops.jacobian_ik.bake(frame_start=1, frame_end=5, new_action=True)
    assert ob.animation_data.action.name == f"{ob.name}_jik"


def test_lean_bake_into_a_new_action(rig: tuple[Any, Any]) -> None:
    ob, _ = rig
    with override(ob):
        bpy.ops.jacobian_ik.bake(frame_start=1, frame_end=20)
    source = ob.animation_data.action
    full = ob.jacobian_ik.last_keys
    with override(ob):
        bpy.ops.jacobian_ik.bake(frame_start=1, frame_end=20, new_action=True, reduce_keys=True)
    assert ob.animation_data.action != source
    assert ob.jacobian_ik.last_keys < full
    assert all(len(fc.keyframe_points) == 20 for fc in fcurves(source, ob))


def _share_action(ob: Any) -> Any:
    """Another armature animated by ``ob``'s action (its slot too, Blender 4.4+)."""
    from blender_helpers import chain_bones, make_armature

    pb = ob.pose.bones["b0"]
    pb.keyframe_insert("rotation_quaternion", frame=1)
    other = make_armature("Crowd", chain_bones(4))
    other.animation_data_create()
    other.animation_data.action = ob.animation_data.action
    slot = getattr(ob.animation_data, "action_slot", None)
    if slot is not None:
        other.animation_data.action_slot = slot
    return other


def test_a_bake_into_a_shared_action_names_who_else_it_animates(rig: tuple[Any, Any]) -> None:
    """An action that animates another armature too (a crowd's shared action): the keys change
    it there as well, said in the report; with New Action the other keeps its animation."""
    from jacobian_ik.bridge import run

    ob, _ = rig
    other = _share_action(ob)
    scene = bpy.context.scene
    report = run(ob, scene, range(1, 21), view_layer=bpy.context.view_layer)
    assert any("also animates Crowd" in w for w in report.warnings), report.warnings
    scene.frame_set(10)
    assert tuple(other.pose.bones["b3"].rotation_quaternion) != (1.0, 0.0, 0.0, 0.0)

    again = _share_action(ob)  # a second crowd member, then a bake into a copy
    report = run(ob, scene, range(1, 21), view_layer=bpy.context.view_layer, new_action=True)
    assert not any("also animates" in w for w in report.warnings)
    scene.frame_set(10)
    assert ob.animation_data.action != again.animation_data.action
