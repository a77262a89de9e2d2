"""Blender scenes for the comparisons with Blender's IK: a rig built with bpy.data, one IK
constraint per goal (Standard solver, default settings) toward an Empty keyed on every frame.

bpy is imported when a scene is built, not with this module (the benchmarks point HOME at a
throwaway folder first).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from .zoo_rigs import ChainGeometry, ZooRig, geometry, rotation_offsets, targets

Bone = tuple[str, tuple[float, float, float], tuple[float, float, float], str | None, bool]


@dataclass
class RigSpec:
    key: str
    title: str
    bones: list[Bone]
    constraints: list[tuple[str, int]]  # (bone, chain_count)
    targets: Callable[[int], np.ndarray]  # frames -> (F, E, 3) world positions
    animate_armature: Callable[[Any, int], None] | None = None
    description: str = ""


def build(spec: RigSpec, frames: int) -> tuple[Any, list[Any], np.ndarray]:
    """A fresh scene with the rig, its IK constraints and keyed Empties."""
    import bpy

    bpy.ops.wm.read_factory_settings(use_empty=True)
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, frames
    arm = bpy.data.armatures.new(spec.key)
    ob = bpy.data.objects.new(spec.key, arm)
    scene.collection.objects.link(ob)
    bpy.context.view_layer.objects.active = ob
    bpy.ops.object.mode_set(mode="EDIT")
    for name, head, tail, parent, connected in spec.bones:
        eb = arm.edit_bones.new(name)
        eb.head, eb.tail = head, tail
        if parent is not None:
            eb.parent, eb.use_connect = arm.edit_bones[parent], connected
    bpy.ops.object.mode_set(mode="OBJECT")
    bpy.context.view_layer.update()
    path = spec.targets(frames)
    empties = []
    for e, (bone, chain) in enumerate(spec.constraints):
        empty = bpy.data.objects.new(f"target.{bone}", None)
        scene.collection.objects.link(empty)
        for f in range(frames):
            empty.location = path[f, e]
            empty.keyframe_insert("location", frame=f + 1)
        con = ob.pose.bones[bone].constraints.new("IK")
        con.target, con.chain_count = empty, chain
        empties.append(empty)
    if spec.animate_armature is not None:
        spec.animate_armature(ob, frames)
    scene.frame_set(1)
    return ob, empties, path


def chain_bones(ob: Any, spec: RigSpec) -> list[str]:
    """The bones of every IK chain, in pose-bone order."""
    names: set[str] = set()
    for bone, chain in spec.constraints:
        b, depth = ob.pose.bones[bone], 0
        while b is not None and (chain == 0 or depth < chain):
            names.add(b.name)
            b, depth = b.parent, depth + 1
    return [pb.name for pb in ob.pose.bones if pb.name in names]


def chain_root(ob: Any, bone: str, chain: int) -> tuple[str, float, float]:
    """The top bone of a chain, its total length and its longest bone."""
    b, depth, lengths = ob.pose.bones[bone], 0, []
    top = b
    while b is not None and (chain == 0 or depth < chain):
        lengths.append(b.bone.length)
        top, b, depth = b, b.parent, depth + 1
    return top.name, float(sum(lengths)), float(max(lengths))


def zoo_spec(rig: ZooRig, frames: int) -> tuple[RigSpec, ChainGeometry]:
    """A zoo rig as a RigSpec (its target paths over ``frames``) and its chains' geometry."""
    geo = geometry(rig)
    path = targets(rig, geo, frames)
    spec = RigSpec(
        rig.name,
        rig.name,
        rig.bones,
        [(g.bone, g.chain) for g in rig.goals],
        lambda f: path[:f],
        description=rig.description,
    )
    return spec, geo


def build_zoo(rig: ZooRig, spec: RigSpec, frames: int) -> tuple[Any, list[Any]]:
    """:func:`build`'s scene plus the zoo rig's orientation goals (``use_rotation``,
    ``orient_weight``, the Empties' rotations keyed)."""
    import bpy
    from mathutils import Matrix

    ob, empties, _ = build(spec, frames)
    offsets = rotation_offsets(rig, frames)
    for e, g in enumerate(rig.goals):
        if not g.orient:
            continue
        con = next(c for c in ob.pose.bones[g.bone].constraints if c.type == "IK")
        con.use_rotation, con.orient_weight = True, g.orient
        rest = np.array((ob.matrix_world @ ob.data.bones[g.bone].matrix_local).to_3x3())
        empty, euler = empties[e], None
        for f in range(frames):
            m = Matrix((rest @ offsets[f, e]).tolist())
            euler = m.to_euler("XYZ", euler) if euler is not None else m.to_euler("XYZ")
            empty.rotation_euler = euler
            empty.keyframe_insert("rotation_euler", frame=f + 1)
    bpy.context.scene.frame_set(1)
    return ob, empties
