"""Goal operators: add_goal, remove_goal, import_constraints."""

from __future__ import annotations

from typing import Any

import bpy
import numpy as np
import pytest
from blender_helpers import add_goal, chain_bones, make_armature, make_empty, override, tip


def test_add_goal_creates_aligned_empty(clean: Any) -> None:
    ob = make_armature("Arm", chain_bones(3))
    ob.location = (1.0, 2.0, 3.0)
    ob.pose.bones["b1"].rotation_quaternion = (0.9, 0.3, 0.0, 0.1)
    bpy.context.view_layer.update()
    ob.data.bones.active = ob.data.bones["b2"]
    with override(ob):
        assert bpy.ops.jacobian_ik.add_goal() == {"FINISHED"}
    goals = ob.jacobian_ik.goals
    assert len(goals) == 1
    goal = goals[0]
    assert (goal.bone, goal.chain_length, goal.use_tail) == ("b2", 2, True)
    empty = goal.target
    assert empty is not None and empty.type == "EMPTY"
    bpy.context.view_layer.update()
    assert (empty.matrix_world.translation - tip(ob, "b2")).length < 1e-5
    bone_rot = (ob.matrix_world @ ob.pose.bones["b2"].matrix).to_quaternion()
    assert bone_rot.rotation_difference(empty.matrix_world.to_quaternion()).angle < 1e-4
    # the new goal is already satisfied
    with override(ob):
        bpy.ops.jacobian_ik.solve()
    assert goal.error < 1e-5


def test_add_goal_by_name_and_errors(clean: Any) -> None:
    ob = make_armature("Arm", chain_bones(2))
    with override(ob):
        assert bpy.ops.jacobian_ik.add_goal(bone="b0", chain_length=0, use_tail=False) == {
            "FINISHED"
        }
        with pytest.raises(RuntimeError, match="no bone 'nope'"):
            bpy.ops.jacobian_ik.add_goal(bone="nope")
    assert len(ob.jacobian_ik.goals) == 1
    assert not ob.jacobian_ik.goals[0].use_tail


def test_remove_goal(clean: Any) -> None:
    ob = make_armature("Arm", chain_bones(2))
    with override(ob):
        bpy.ops.jacobian_ik.add_goal(bone="b0")
        bpy.ops.jacobian_ik.add_goal(bone="b1")
        ob.jacobian_ik.active_goal_index = 0
        assert bpy.ops.jacobian_ik.remove_goal() == {"FINISHED"}
        assert [g.bone for g in ob.jacobian_ik.goals] == ["b1"]
        assert bpy.ops.jacobian_ik.remove_goal() == {"FINISHED"}
        assert not bpy.ops.jacobian_ik.remove_goal.poll()


def test_import_constraints(clean: Any) -> None:
    ob = make_armature("Arm", [*chain_bones(3), *chain_bones(2, prefix="c")])
    target = make_empty("T", (1.0, 1.0, 0.5))
    other = make_armature("Other", [("t", (0.5, 1.0, 1.0), (0.5, 1.0, 2.0), None, False)])
    ik = ob.pose.bones["b2"].constraints.new("IK")
    ik.target, ik.chain_count, ik.use_tail = target, 2, True
    ik.use_rotation, ik.orient_weight, ik.weight = True, 0.5, 0.8
    ik2 = ob.pose.bones["c1"].constraints.new("IK")
    ik2.target, ik2.subtarget, ik2.use_tail = other, "t", False
    ob.pose.bones["c0"].constraints.new("IK")  # no target: skipped
    with override(ob):
        assert bpy.ops.jacobian_ik.import_constraints() == {"FINISHED"}
    goals = {g.bone: g for g in ob.jacobian_ik.goals}
    assert set(goals) == {"b2", "c1"}
    g = goals["b2"]
    assert (g.target, g.target_bone, g.chain_length, g.use_tail) == (target, "", 2, True)
    # Blender's IK weighs a goal's rows by its weight, so the squared error by its square: the
    # goal keeps the constraint's trade-off between position and orientation
    assert g.position_weight == pytest.approx(0.64) and g.rotation_weight == pytest.approx(0.25)
    g = goals["c1"]
    assert (g.target, g.target_bone, g.chain_length, g.use_tail) == (other, "t", 0, False)
    assert g.rotation_weight == 0.0
    # the converted constraints are stashed on their goals (removed from the bones)
    assert [c.type for c in ob.pose.bones["b2"].constraints] == []
    assert [c.type for c in ob.pose.bones["c1"].constraints] == []
    assert goals["b2"].stash.stored and goals["c1"].stash.stored
    assert not ob.pose.bones["c0"].constraints[0].mute
    # nothing left to import
    with override(ob), pytest.raises(RuntimeError, match="no IK constraint imported"):
        bpy.ops.jacobian_ik.import_constraints()


def test_transform_locks_lock_the_solve_unless_turned_off(clean: Any) -> None:
    """A chain bone with Lock Rotation on X, Y, Z: a goal heeding the transform locks (the
    default) never moves it; one that does not (as Blender's IK, and imported constraints)
    turns it like any other."""
    from jacobian_ik.bridge import run

    ob = make_armature("Arm", chain_bones(3))
    target = make_empty("Target", (0.9, 1.6, 0.6))
    goal = add_goal(ob, "b2", target, chain_length=3)
    ob.pose.bones["b1"].lock_rotation = (True, True, True)
    report = run(ob, bpy.context.scene, None, keyframe=False)
    assert any("never moved: b1" in w for w in report.warnings), report.warnings
    assert tuple(ob.pose.bones["b1"].rotation_quaternion) == (1.0, 0.0, 0.0, 0.0)
    goal.use_transform_locks = False
    for pb in ob.pose.bones:  # from the rest pose again (the first solve met the target)
        pb.rotation_quaternion = (1.0, 0.0, 0.0, 0.0)
    report = run(ob, bpy.context.scene, None, keyframe=False)
    assert not any("never moved" in w for w in report.warnings), report.warnings
    assert abs(ob.pose.bones["b1"].rotation_quaternion[0]) < 0.999
    assert report.position_error.max() < 1e-4


@pytest.mark.parametrize("scale", [(-1.0, 1.0, 1.0), (1.0, 1.0, -1.0), (-2.0, -2.0, -2.0)])
def test_a_mirrored_target_gives_its_y_and_z_axes(clean: Any, scale: tuple[float, ...]) -> None:
    """An orientation target with a negative scale (an Empty mirrored) holds a reflection: the
    bone turns its Y (along it) and Z onto the target's, its X mirrored (the reflection's
    nearest rotation flipped whichever axis the SVD ordered last: the bone's Y pointed away
    from the target's)."""
    ob = make_armature("Arm", chain_bones(3))
    pose = {"b0": (0.3, 0.1, 0.4), "b1": (0.5, -0.2, 0.3), "b2": (0.2, 0.4, -0.3)}
    for name, euler in pose.items():
        ob.pose.bones[name].rotation_mode = "XYZ"
        ob.pose.bones[name].rotation_euler = euler
    bpy.context.view_layer.update()
    reached = ob.matrix_world @ ob.pose.bones["b2"].matrix  # a pose the chain can take
    for pb in ob.pose.bones:
        pb.rotation_euler = (0.0, 0.0, 0.0)
    target = make_empty("T", tuple(reached.translation))
    target.rotation_euler = reached.to_euler()
    target.scale = scale
    add_goal(ob, "b2", target, chain_length=3, rotation_weight=1.0, use_tail=False)
    with override(ob):
        assert bpy.ops.jacobian_ik.solve() == {"FINISHED"}
    bpy.context.view_layer.update()
    bone = np.array((ob.matrix_world @ ob.pose.bones["b2"].matrix).to_3x3())
    axes = np.array(target.matrix_world.to_3x3())
    axes /= np.linalg.norm(axes, axis=0)
    assert np.degrees(np.arccos(np.clip(bone[:, 1] @ axes[:, 1], -1, 1))) < 0.5
    assert np.degrees(np.arccos(np.clip(bone[:, 2] @ axes[:, 2], -1, 1))) < 0.5


@pytest.mark.parametrize("how", ["head of a chain of 1", "chain IK-locked"])
def test_a_goal_nothing_can_move_is_named(clean: Any, how: str) -> None:
    """A goal whose chain cannot move its effector (Blender's IK leaves it alone) is named in
    the report; the other goals are solved as before."""
    from jacobian_ik.bridge import run

    ob = make_armature("Arm", [*chain_bones(3), *chain_bones(2, prefix="c")])
    target = make_empty("T", (0.8, 2.0, 0.5))
    add_goal(ob, "b2", target, chain_length=3)
    if how == "head of a chain of 1":
        add_goal(ob, "c1", make_empty("T2", (0.3, 1.0, 0.5)), chain_length=1, use_tail=False)
    else:
        add_goal(ob, "c1", make_empty("T2", (0.3, 1.0, 0.5)), chain_length=2)
        for name in ("c0", "c1"):
            pb = ob.pose.bones[name]
            pb.lock_ik_x = pb.lock_ik_y = pb.lock_ik_z = True
    report = run(ob, bpy.context.scene, range(1, 3))
    named = "goal 2 (c1): no bone of its chain can move it"
    assert any(w.startswith(named) for w in report.warnings), report.warnings
    assert report.position_error[:, 0].max() < 1e-4
