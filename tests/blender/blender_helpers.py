"""Helpers for the Blender tests: load the add-on, build rigs with bpy.data, evaluate poses."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import bpy

ROOT = Path(__file__).resolve().parents[2]


def make_armature(
    name: str,
    bones: list[
        tuple[str, tuple[float, float, float], tuple[float, float, float], str | None, bool]
    ],
) -> Any:
    """An armature object linked to the scene: bones are (name, head, tail, parent, connected)."""
    arm = bpy.data.armatures.new(name)
    ob = bpy.data.objects.new(name, arm)
    bpy.context.scene.collection.objects.link(ob)
    bpy.context.view_layer.objects.active = ob
    bpy.ops.object.mode_set(mode="EDIT")
    for bone_name, head, tail, parent, connected in bones:
        eb = arm.edit_bones.new(bone_name)
        eb.head, eb.tail = head, tail
        if parent is not None:
            eb.parent = arm.edit_bones[parent]
            eb.use_connect = connected
    bpy.ops.object.mode_set(mode="OBJECT")
    bpy.context.view_layer.update()
    return ob


def chain_bones(n: int, length: float = 1.0, prefix: str = "b") -> list[Any]:
    """n connected bones along +Y."""
    out = []
    for i in range(n):
        parent = f"{prefix}{i - 1}" if i else None
        out.append(
            (f"{prefix}{i}", (0.0, i * length, 0.0), (0.0, (i + 1) * length, 0.0), parent, True)
        )
    return out


def make_empty(name: str, location: tuple[float, float, float]) -> Any:
    empty = bpy.data.objects.new(name, None)
    empty.location = location
    bpy.context.scene.collection.objects.link(empty)
    return empty


def add_goal(ob: Any, bone: str, target: Any, chain_length: int = 0, **kw: Any) -> Any:
    goal = ob.jacobian_ik.goals.add()
    goal.bone, goal.target, goal.chain_length = bone, target, chain_length
    for key, value in kw.items():
        setattr(goal, key, value)
    return goal


def override(ob: Any) -> Any:
    """Context for calling the add-on's operators on ``ob`` from a script."""
    return bpy.context.temp_override(
        object=ob, active_object=ob, selected_objects=[ob], selected_editable_objects=[ob]
    )


def tip(ob: Any, bone: str, use_tail: bool = True) -> Any:
    """World position of a bone's tail (or head) in the evaluated pose."""
    bpy.context.view_layer.update()
    pb = ob.pose.bones[bone]
    return ob.matrix_world @ (pb.tail if use_tail else pb.head)


def place_reachable(
    ob: Any, bone: str, target: Any, eulers: list[tuple[float, float, float]]
) -> None:
    """Move ``target`` to the tail frame ``bone`` has when the bones take rotations ``eulers``
    (XYZ, in bone order); the pose is reset to rest afterwards."""
    from mathutils import Euler, Matrix

    for pb, e in zip(ob.pose.bones, eulers, strict=False):
        pb.rotation_mode = "QUATERNION"
        pb.rotation_quaternion = Euler(e).to_quaternion()
    bpy.context.view_layer.update()
    pb = ob.pose.bones[bone]
    target.matrix_world = ob.matrix_world @ pb.matrix @ Matrix.Translation((0.0, pb.length, 0.0))
    for pb in ob.pose.bones:
        pb.rotation_quaternion = (1.0, 0.0, 0.0, 0.0)
    bpy.context.view_layer.update()


POSE = [(0.3, 0.1, -0.4), (0.5, -0.2, 0.3), (-0.2, 0.4, 0.6)]
