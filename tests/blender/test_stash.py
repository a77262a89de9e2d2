"""Import IK Constraints stashes the converted constraints on the goals (removed from the bones)
and Restore IK Constraints puts them back exactly."""

from __future__ import annotations

from typing import Any

import bpy
import pytest
from blender_helpers import chain_bones, make_armature, make_empty, override


def dump(con: Any) -> dict[str, Any]:
    """Every property of a constraint as Python values (pointers as the objects themselves)."""
    out: dict[str, Any] = {}
    for prop in con.bl_rna.properties:
        key = prop.identifier
        if key in ("rna_type", "is_valid", "error_location", "error_rotation"):
            continue
        value = getattr(con, key)
        if prop.type in {"BOOLEAN", "INT", "FLOAT"} and getattr(prop, "array_length", 0):
            value = tuple(value)
        out[key] = value
    return out


def stack(pbone: Any) -> list[dict[str, Any]]:
    return [dump(c) for c in pbone.constraints]


def rig() -> tuple[Any, Any]:
    """A 4-bone chain whose last bone has [Copy Location, IK (everything off its default, a
    bone pole), Limit Rotation, IK (an object pole)], and a muted IK on another chain."""
    ob = make_armature("Arm", [*chain_bones(4), *chain_bones(2, prefix="c")])
    target = make_empty("T", (1.0, 2.0, 0.5))
    pole = make_empty("Pole", (1.0, 0.0, 0.0))
    other = make_armature("Other", [("t", (0.5, 1.0, 1.0), (0.5, 1.0, 2.0), None, False)])
    pb = ob.pose.bones["b3"]
    pb.constraints.new("COPY_LOCATION").influence = 0.0
    ik = pb.constraints.new("IK")
    ik.name = "Leg IK"
    ik.target, ik.subtarget = other, "t"
    ik.pole_target, ik.pole_subtarget, ik.pole_angle = other, "t", -1.25
    ik.chain_count, ik.iterations, ik.use_tail, ik.use_stretch = 3, 77, False, False
    ik.weight, ik.orient_weight, ik.use_rotation = 0.75, 0.4, True
    ik.influence, ik.reference_axis, ik.lock_location_y = 0.9, "TARGET", False
    ik.owner_space, ik.show_expanded = "POSE", False
    pb.constraints.new("LIMIT_ROTATION").use_limit_x = True
    ik2 = pb.constraints.new("IK")
    ik2.target, ik2.pole_target, ik2.pole_angle, ik2.chain_count = target, pole, 0.5, 2
    muted = ob.pose.bones["c1"].constraints.new("IK")
    muted.target, muted.mute = target, True
    # a driver on a setting of the converted constraint survives the round trip
    fc = ik.driver_add("influence")
    fc.driver.expression = "0.9"
    return ob, other


def test_round_trip_restores_every_setting_name_and_place(clean: Any) -> None:
    ob, other = rig()
    before = {pb.name: stack(pb) for pb in ob.pose.bones}
    with override(ob):
        assert bpy.ops.jacobian_ik.import_constraints() == {"FINISHED"}
    goals = ob.jacobian_ik.goals
    assert [c.type for c in ob.pose.bones["b3"].constraints] == ["COPY_LOCATION", "LIMIT_ROTATION"]
    assert len(ob.pose.bones["c1"].constraints) == 1  # muted: neither converted nor removed
    assert [(g.bone, g.stash.name, g.stash.index) for g in goals] == [
        ("b3", "Leg IK", 1),
        ("b3", "IK", 3),
    ]
    # the poles came over: a bone of an armature, an object
    assert (goals[0].pole_target, goals[0].pole_target_bone) == (other, "t")
    assert (goals[1].pole_target.name, goals[1].pole_target_bone) == ("Pole", "")
    with override(ob):
        assert bpy.ops.jacobian_ik.restore_constraints() == {"FINISHED"}
    after = {pb.name: stack(pb) for pb in ob.pose.bones}
    assert after == before
    assert len(goals) == 0  # the goals made from the constraints are gone
    fc = ob.animation_data.drivers.find('pose.bones["b3"].constraints["Leg IK"].influence')
    assert fc is not None and fc.driver.expression == "0.9"
    # nothing stashed any more
    with override(ob):
        assert not bpy.ops.jacobian_ik.restore_constraints.poll()


def test_restore_can_keep_the_goals_and_a_second_import_round_trips(clean: Any) -> None:
    ob, _ = rig()
    before = stack(ob.pose.bones["b3"])
    with override(ob):
        bpy.ops.jacobian_ik.import_constraints()
        assert bpy.ops.jacobian_ik.restore_constraints(keep_goals=True) == {"FINISHED"}
    assert len(ob.jacobian_ik.goals) == 2 and not any(g.stash.stored for g in ob.jacobian_ik.goals)
    ob.jacobian_ik.goals.clear()
    with override(ob):
        bpy.ops.jacobian_ik.import_constraints()
        bpy.ops.jacobian_ik.restore_constraints()
    assert stack(ob.pose.bones["b3"]) == before


def test_restore_refuses_when_the_bone_is_gone(clean: Any) -> None:
    ob, _ = rig()
    with override(ob):
        bpy.ops.jacobian_ik.import_constraints()
    ob.jacobian_ik.goals[0].stash.bone = "no such bone"
    with override(ob), pytest.raises(RuntimeError, match="no bone 'no such bone'"):
        bpy.ops.jacobian_ik.restore_constraints()
    assert all(g.stash.stored for g in ob.jacobian_ik.goals)  # nothing lost
    assert [c.type for c in ob.pose.bones["b3"].constraints] == ["COPY_LOCATION", "LIMIT_ROTATION"]


def test_import_and_restore_are_one_undo_step_each(addon: Any) -> None:
    goals = addon.operators.goals
    for op in (goals.JACOBIAN_IK_OT_import_constraints, goals.JACOBIAN_IK_OT_restore_constraints):
        assert {"REGISTER", "UNDO"} <= op.bl_options


def test_removing_a_goal_puts_its_constraint_back(clean: Any) -> None:
    ob, _ = rig()
    before = stack(ob.pose.bones["b3"])
    with override(ob):
        bpy.ops.jacobian_ik.import_constraints()
        assert bpy.ops.jacobian_ik.remove_goal(index=1) == {"FINISHED"}
        assert [c.type for c in ob.pose.bones["b3"].constraints] == [
            "COPY_LOCATION",
            "LIMIT_ROTATION",
            "IK",
        ]
        assert bpy.ops.jacobian_ik.remove_goal(index=0) == {"FINISHED"}
    assert stack(ob.pose.bones["b3"]) == before


def test_removing_the_lower_of_two_stashed_goals_first_keeps_the_order(clean: Any) -> None:
    ob = make_armature("Arm", chain_bones(3))
    target = make_empty("T", (1.0, 2.0, 0.5))
    pb = ob.pose.bones["b2"]
    for name in ("first", "second"):
        con = pb.constraints.new("IK")
        con.name, con.target = name, target
    pb.constraints.new("COPY_LOCATION")
    with override(ob):
        bpy.ops.jacobian_ik.import_constraints()
        bpy.ops.jacobian_ik.remove_goal(index=1)  # "second" back while "first" is stashed
        bpy.ops.jacobian_ik.remove_goal(index=0)
    assert [c.name for c in pb.constraints] == ["first", "second", "Copy Location"]


def test_import_reports_an_influence_below_1_or_animated(clean: Any, capsys: Any) -> None:
    """An IK constraint at influence 0 (off) is left on its bone; one below 1 or with its
    influence keyed (an IK/FK switch) is imported, with a warning: the goal solves fully."""
    bones = [*chain_bones(3), *chain_bones(3, prefix="c"), *chain_bones(3, prefix="d")]
    ob = make_armature("Arm", bones)
    target = make_empty("T", (1.0, 2.0, 0.5))
    cons = {}
    for bone, influence in (("b2", 0.5), ("c2", 0.0), ("d2", 1.0)):
        con = ob.pose.bones[bone].constraints.new("IK")
        con.target, con.influence = target, influence
        cons[bone] = con
    cons["d2"].keyframe_insert("influence", frame=1)
    with override(ob):
        assert bpy.ops.jacobian_ik.import_constraints() == {"FINISHED"}
    out = capsys.readouterr()
    text = out.out + out.err
    assert "b2/IK: influence 0.50; the goal is solved at full influence" in text, text
    assert "d2/IK: influence animated" in text and "c2/IK: influence 0 (off)" in text, text
    assert [g.bone for g in ob.jacobian_ik.goals] == ["b2", "d2"]
    assert [c.type for c in ob.pose.bones["c2"].constraints] == ["IK"]


def test_import_leaves_vertex_group_targets_and_distance_constraints(
    clean: Any, capsys: Any
) -> None:
    """A vertex group as target or pole (Blender's IK aims at the group's centre, a goal would
    take the mesh's origin: imported, the chain went to the wrong place without a word) and an
    iTaSC Distance constraint (no target point) stay on their bones, each named."""
    bones = [*chain_bones(3), *chain_bones(3, prefix="c"), *chain_bones(3, prefix="d")]
    ob = make_armature("Arm", bones)
    bpy.ops.mesh.primitive_cube_add(location=(2.0, 1.0, 0.0))
    mesh = bpy.context.object
    mesh.vertex_groups.new(name="grip")
    target = make_empty("T", (1.0, 2.0, 0.5))
    grip = ob.pose.bones["b2"].constraints.new("IK")
    grip.target, grip.subtarget = mesh, "grip"
    pole = ob.pose.bones["c2"].constraints.new("IK")
    pole.target, pole.pole_target, pole.pole_subtarget = target, mesh, "grip"
    distance = ob.pose.bones["d2"].constraints.new("IK")
    distance.target, distance.ik_type = target, "DISTANCE"
    ob.pose.ik_solver = "ITASC"
    with override(ob), pytest.raises(RuntimeError, match="no IK constraint imported"):
        bpy.ops.jacobian_ik.import_constraints()
    text = "".join(capsys.readouterr())
    assert "b2/IK: its target is vertex group 'grip' of 'Cube'" in text, text
    assert "c2/IK: its pole is vertex group 'grip'" in text, text
    assert "d2/IK: an iTaSC Distance constraint" in text, text
    assert len(ob.jacobian_ik.goals) == 0
    pole.pole_target, distance.ik_type = None, "COPY_POSE"
    with override(ob):
        assert bpy.ops.jacobian_ik.import_constraints() == {"FINISHED"}
    assert [g.bone for g in ob.jacobian_ik.goals] == ["c2", "d2"]
    assert [c.type for c in ob.pose.bones["b2"].constraints] == ["IK"]
