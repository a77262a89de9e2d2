"""A byte-level snapshot of everything a solve or bake could touch: every action's F-curves
(keyframe co, handles, interpolation, handle types, key types, easing read with ``foreach_get``),
every armature's pose channels, each object's action and slot, NLA tracks and strips, drivers
and the enabled/mute state and influence of constraints. Two snapshots compare with ``==``."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import bpy
import numpy as np

KEY_FLOATS = ("co", "handle_left", "handle_right")
KEY_ENUMS = ("interpolation", "handle_left_type", "handle_right_type", "type", "easing")
POSE_FLOATS = (
    ("location", 3),
    ("rotation_quaternion", 4),
    ("rotation_euler", 3),
    ("rotation_axis_angle", 4),
    ("scale", 3),
)


def action_fcurves(action: Any) -> Iterator[tuple[str, Any]]:
    """(slot or '', F-curve) of an action: layered actions (4.4+) or ``action.fcurves`` (4.2)."""
    if hasattr(action, "layers"):
        for layer in action.layers:
            for strip in layer.strips:
                for bag in strip.channelbags:
                    for fc in bag.fcurves:
                        yield bag.slot.identifier, fc
    else:
        for fc in action.fcurves:
            yield "", fc


def keys(fc: Any) -> dict[str, bytes]:
    """The keyframes of one F-curve, attribute by attribute, as bytes."""
    points = fc.keyframe_points
    n = len(points)
    out = {}
    for attr in KEY_FLOATS:
        buf = np.empty(2 * n, dtype=np.float32)
        points.foreach_get(attr, buf)
        out[attr] = buf.tobytes()
    for attr in KEY_ENUMS:
        ibuf = np.empty(n, dtype=np.int32)
        points.foreach_get(attr, ibuf)
        out[attr] = ibuf.tobytes()
    return out


def curve(fc: Any) -> dict[str, Any]:
    return {
        "group": fc.group.name if fc.group else None,
        "mute": fc.mute,
        "extrapolation": fc.extrapolation,
        "modifiers": [m.type for m in fc.modifiers],
        "keys": keys(fc),
    }


def action(act: Any) -> dict[tuple[str, str, int], Any]:
    return {(slot, fc.data_path, fc.array_index): curve(fc) for slot, fc in action_fcurves(act)}


def pose(ob: Any) -> dict[str, Any]:
    pbones = ob.pose.bones
    out: dict[str, Any] = {"modes": [pb.rotation_mode for pb in pbones]}
    for attr, size in POSE_FLOATS:
        buf = np.empty(size * len(pbones), dtype=np.float32)
        pbones.foreach_get(attr, buf)
        out[attr] = buf.tobytes()
    out["constraints"] = [
        [(c.name, c.type, c.enabled, c.mute, c.influence) for c in pb.constraints] for pb in pbones
    ]
    return out


def animation(ob: Any) -> dict[str, Any] | None:
    ad = ob.animation_data
    if ad is None:
        return None
    return {
        "action": ad.action.name if ad.action else None,
        "slot": getattr(ad.action_slot, "identifier", None) if hasattr(ad, "action_slot") else "",
        "nla": [
            (
                t.name,
                t.mute,
                t.is_solo,
                [
                    (
                        *(s.name, s.action.name if s.action else None, s.frame_start, s.frame_end),
                        *(s.mute, s.influence, s.blend_type),
                    )
                    for s in t.strips
                ],
            )
            for t in ad.nla_tracks
        ],
        "drivers": [
            (d.data_path, d.array_index, d.mute, d.driver.expression, curve(d)) for d in ad.drivers
        ],
    }


def snapshot() -> dict[str, Any]:
    """Everything, by name: actions, objects' animation data, poses, constraints, frame."""
    return {
        "frame": bpy.context.scene.frame_current,
        "actions": {a.name: action(a) for a in bpy.data.actions},
        "objects": {
            ob.name: {
                "animation": animation(ob),
                "pose": pose(ob) if ob.type == "ARMATURE" and ob.pose is not None else None,
                "constraints": [(c.name, c.enabled, c.mute, c.influence) for c in ob.constraints],
            }
            for ob in bpy.data.objects
        },
    }
