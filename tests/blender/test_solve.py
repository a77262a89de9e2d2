"""Solving the current frame: reaching targets, rotation modes, object scale, bad inputs."""

from __future__ import annotations

from typing import Any

import bpy
import numpy as np
import pytest
from blender_helpers import (
    POSE,
    add_goal,
    chain_bones,
    make_armature,
    make_empty,
    override,
    place_reachable,
    tip,
)
from mathutils import Matrix, Vector

from jacobian_ik.solvers import rotations


def solve(ob: Any) -> None:
    with override(ob):
        assert bpy.ops.jacobian_ik.solve() == {"FINISHED"}


def test_solve_reaches_reachable_target(arm_chain: Any) -> None:
    ob, empty = arm_chain()
    solve(ob)
    assert (tip(ob, "b2") - empty.matrix_world.translation).length < 1e-4
    goal = ob.jacobian_ik.goals[0]
    assert goal.error < 1e-4
    assert ob.jacobian_ik.last_frames == 1
    assert ob.animation_data is None  # auto-keying is off: nothing keyed


def test_solve_keys_with_auto_keying(arm_chain: Any) -> None:
    ob, _ = arm_chain()
    bpy.context.scene.tool_settings.use_keyframe_insert_auto = True
    bpy.context.scene.frame_set(7)
    solve(ob)
    action = ob.animation_data.action
    assert action is not None
    assert ob.jacobian_ik.last_keys == 3 * 4  # three free bones, quaternion channels
    bpy.context.scene.frame_set(1)
    bpy.context.scene.frame_set(7)
    assert (tip(ob, "b2") - Vector((1.5, 1.5, 0.5))).length < 1e-4


MODES = ["QUATERNION", "XYZ", "XZY", "YXZ", "YZX", "ZXY", "ZYX", "AXIS_ANGLE"]


@pytest.mark.parametrize("mode", MODES)
def test_rotation_modes_write_back(arm_chain: Any, mode: str) -> None:
    ob, empty = arm_chain(target=(-1.2, 1.0, 1.3))
    for pb in ob.pose.bones:
        pb.rotation_mode = mode
    solve(ob)
    assert (tip(ob, "b2") - empty.matrix_world.translation).length < 1e-4


def test_rotation_goal(arm_chain: Any) -> None:
    ob, empty = arm_chain(rotation_weight=1.0)
    place_reachable(ob, "b2", empty, POSE)
    solve(ob)
    bpy.context.view_layer.update()
    got = (ob.matrix_world @ ob.pose.bones["b2"].matrix).to_quaternion()
    want = empty.matrix_world.to_quaternion()
    assert got.rotation_difference(want).angle < 1e-3
    assert (tip(ob, "b2") - empty.matrix_world.translation).length < 1e-4


@pytest.mark.parametrize("scale", [(2.0, 0.5, 1.5), (-1.0, 1.0, 1.0), (1.0, -2.0, 0.7)])
def test_object_scale(arm_chain: Any, scale: tuple[float, float, float]) -> None:
    ob, empty = arm_chain(target=(0.8, 1.2, 0.9))
    ob.scale = scale
    ob.location = (0.3, -0.2, 0.1)
    ob.rotation_euler = (0.2, 0.1, -0.4)
    place_reachable(ob, "b2", empty, POSE)
    solve(ob)
    assert (tip(ob, "b2") - empty.matrix_world.translation).length < 1e-4


def test_chain_length_and_fixed_parent(clean: Any) -> None:
    ob = make_armature("Arm", chain_bones(4))
    ob.pose.bones["b0"].rotation_quaternion = Matrix.Rotation(0.4, 3, "Z").to_quaternion()
    target = make_empty("T", (0.5, 2.5, 0.7))
    add_goal(ob, "b3", target, chain_length=2)
    before = [tuple(ob.pose.bones[n].rotation_quaternion) for n in ("b0", "b1")]
    solve(ob)
    assert [tuple(ob.pose.bones[n].rotation_quaternion) for n in ("b0", "b1")] == before
    assert (tip(ob, "b3") - target.location).length < 1e-4


def test_armature_bone_target(clean: Any) -> None:
    ob = make_armature("Arm", chain_bones(3))
    other = make_armature("Other", [("t", (1.0, 1.0, 1.0), (1.0, 1.0, 2.0), None, False)])
    add_goal(ob, "b2", other, target_bone="t")
    solve(ob)
    assert (tip(ob, "b2") - Vector((1.0, 1.0, 1.0))).length < 1e-4


def test_ik_locks_and_limits(clean: Any) -> None:
    ob = make_armature("Arm", chain_bones(3))
    target = make_empty("T", (0.0, 1.5, 1.5))
    add_goal(ob, "b2", target)
    for pb in ob.pose.bones:
        pb.lock_ik_y = pb.lock_ik_z = True
    pb = ob.pose.bones["b1"]
    pb.use_ik_limit_x, pb.ik_min_x, pb.ik_max_x = True, -0.3, 0.3
    solve(ob)
    for pb in ob.pose.bones:
        e = pb.rotation_quaternion.to_euler("XYZ")
        assert abs(e.y) < 1e-6 and abs(e.z) < 1e-6
    assert abs(ob.pose.bones["b1"].rotation_quaternion.to_euler("XYZ").x) <= 0.3 + 1e-6


def snapshot(ob: Any) -> list[tuple[float, ...]]:
    return [tuple(pb.matrix_basis.col[i]) for pb in ob.pose.bones for i in range(4)]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda ob, g: setattr(g, "bone", "nope"), "is not in armature"),
        (lambda ob, g: setattr(g, "target", None), "no target"),
        (lambda ob, g: setattr(g, "target_bone", "x"), "no armature"),
        (lambda ob, g: setattr(g, "position_weight", 0.0), "weights are zero"),
    ],
)
def test_bad_goal_reports_and_changes_nothing(arm_chain: Any, change: Any, message: str) -> None:
    ob, _ = arm_chain()
    change(ob, ob.jacobian_ik.goals[0])
    before = snapshot(ob)
    with override(ob), pytest.raises(RuntimeError, match=message):
        bpy.ops.jacobian_ik.solve()
    assert snapshot(ob) == before
    assert ob.animation_data is None
    assert ob.jacobian_ik.last_frames == 0


def test_bad_settings_report(arm_chain: Any) -> None:
    ob, _ = arm_chain()
    ob.jacobian_ik.dls_damping = -1.0  # the property's declared minimum
    assert ob.jacobian_ik.dls_damping == 0.0
    ob.jacobian_ik.method = "SDLS"
    ob.jacobian_ik.sdls_gamma_max = 0.0  # at the minimum, but the range excludes it: (0, inf)
    with override(ob), pytest.raises(RuntimeError, match="gamma_max"):
        bpy.ops.jacobian_ik.solve()


def test_poll_messages(clean: Any) -> None:
    ob = make_armature("Arm", chain_bones(2))
    with override(ob):
        assert not bpy.ops.jacobian_ik.solve.poll()
    empty = make_empty("E", (0.0, 0.0, 0.0))
    with override(empty):
        assert not bpy.ops.jacobian_ik.add_goal.poll()


def test_solved_matrix_matches_rotations_module(arm_chain: Any) -> None:
    ob, _ = arm_chain()
    ob.pose.bones["b1"].rotation_mode = "ZXY"
    solve(ob)
    pb = ob.pose.bones["b1"]
    want = np.array(pb.rotation_euler.to_matrix())
    np.testing.assert_allclose(
        rotations.matrix_from_euler(np.array(pb.rotation_euler), "ZXY"), want, atol=1e-6
    )


def test_control_bone_of_the_same_armature(clean: Any) -> None:
    """A rig's usual set-up: the target is a control bone of the armature itself."""
    ob = make_armature(
        "Arm", [*chain_bones(3), ("ctrl", (1.0, 1.5, 0.5), (1.0, 1.5, 0.8), None, False)]
    )
    ob.pose.bones["ctrl"].location = (0.2, 0.0, -0.1)
    add_goal(ob, "b2", ob, target_bone="ctrl")
    solve(ob)
    bpy.context.view_layer.update()
    ctrl_head = ob.matrix_world @ ob.pose.bones["ctrl"].head
    assert (tip(ob, "b2") - ctrl_head).length < 1e-4
