"""Bones scaled in pose mode: a root bone's scale (a character resized by its root control) is
solved exactly; a scale inside a chain is named in the report (bridge/rig.py ``scale_maps``)."""

from __future__ import annotations

import math
from typing import Any

import bpy
import numpy as np
import pytest
from blender_helpers import add_goal, make_armature, make_empty, override
from mathutils import Euler

FRAMES = 12
NAMES = ("hand.L", "hand.R", "foot")


def rig() -> Any:
    """A root (not solved), hips under it; a spine of 2 with two 2-bone arms (a tree of two
    goals through the spine), and a 3-bone leg from the hips with a pole."""
    bones: list[Any] = [
        ("root", (0.0, 0.0, 0.0), (0.0, 0.3, 0.0), None, False),
        ("hips", (0.0, 0.0, 1.0), (0.0, 0.0, 1.15), "root", False),
        ("spine", (0.0, 0.0, 1.15), (0.0, 0.02, 1.45), "hips", True),
        ("chest", (0.0, 0.02, 1.45), (0.0, 0.0, 1.7), "spine", True),
        ("arm.L", (0.1, 0.0, 1.65), (0.45, 0.0, 1.6), "chest", False),
        ("hand.L", (0.45, 0.0, 1.6), (0.75, 0.05, 1.55), "arm.L", True),
        ("arm.R", (-0.1, 0.0, 1.65), (-0.45, 0.0, 1.6), "chest", False),
        ("hand.R", (-0.45, 0.0, 1.6), (-0.75, 0.05, 1.55), "arm.R", True),
        ("thigh", (0.1, 0.0, 1.0), (0.1, -0.02, 0.55), "hips", False),
        ("shin", (0.1, -0.02, 0.55), (0.1, 0.0, 0.1), "thigh", True),
        ("foot", (0.1, 0.0, 0.1), (0.1, -0.15, 0.05), "shin", True),
    ]
    return make_armature("Rig", bones)


def pose_tails(ob: Any, eulers: dict[str, tuple[float, float, float]]) -> dict[str, Any]:
    """World matrices of the goal bones' tails in a pose of the rig (then back to rest)."""
    from mathutils import Matrix

    for name, e in eulers.items():
        pb = ob.pose.bones[name]
        pb.rotation_mode = "QUATERNION"
        pb.rotation_quaternion = Euler(e).to_quaternion()
    bpy.context.view_layer.update()
    out = {}
    for name in ("hand.L", "hand.R", "foot"):
        pb = ob.pose.bones[name]
        out[name] = ob.matrix_world @ pb.matrix @ Matrix.Translation((0.0, pb.length, 0.0))
    for name in eulers:
        ob.pose.bones[name].rotation_quaternion = (1.0, 0.0, 0.0, 0.0)
    bpy.context.view_layer.update()
    return out


def animate(ob: Any, scales: list[float], unscaled: bool) -> dict[str, Any]:
    """Targets on tails of poses of the rig (reachable) moving over FRAMES frames, a pole in
    front of the knee, the root scaled by ``scales`` per frame (keyed), and the targets and
    the pole scaled with it about the root's head. ``unscaled``: the same motion with the
    root's scale left at 1 and the targets where the unscaled rig reaches them."""
    from mathutils import Vector

    names = ("hand.L", "hand.R", "foot")
    empties = {n: make_empty(f"T {n}", (0.0, 0.0, 0.0)) for n in names}
    pole = make_empty("Pole", (0.0, 0.0, 0.0))
    root = ob.pose.bones["root"]
    root.location = (0.1, 0.05, 0.0)  # the root's head is not the origin
    for f in range(1, FRAMES + 1):
        a = 2 * math.pi * f / FRAMES
        eulers = {
            "spine": (0.2 * math.sin(a), 0.1, 0.15 * math.cos(a)),
            "chest": (0.1, 0.2 * math.cos(a), 0.0),
            "arm.L": (0.3 * math.cos(a), 0.2, -0.4),
            "hand.L": (0.0, 0.1, 0.5 + 0.2 * math.sin(a)),
            "arm.R": (0.2, -0.3 * math.sin(a), 0.4),
            "hand.R": (0.1, 0.0, -0.6),
            "thigh": (-0.4 - 0.2 * math.sin(a), 0.0, 0.05),
            "shin": (0.7 + 0.2 * math.cos(a), 0.0, 0.0),
        }
        root.scale = (1.0, 1.0, 1.0)
        tails = pose_tails(ob, eulers)
        head = ob.matrix_world @ root.head
        s = 1.0 if unscaled else float(scales[f - 1])
        for n, m in tails.items():
            empties[n].matrix_world = m
            empties[n].location = head + s * (empties[n].location - head)
            empties[n].keyframe_insert("location", frame=f)
            empties[n].keyframe_insert("rotation_euler", frame=f)
        pole.location = head + s * (ob.matrix_world @ Vector((0.1, -1.0, 0.6)) - head)
        pole.keyframe_insert("location", frame=f)
        root.scale = (s, s, s)
        root.keyframe_insert("scale", frame=f)
        root.keyframe_insert("location", frame=f)
    add_goal(ob, "hand.L", empties["hand.L"], chain_length=4, rotation_weight=1.0)
    add_goal(ob, "hand.R", empties["hand.R"], chain_length=4)
    add_goal(ob, "foot", empties["foot"], chain_length=3, pole_target=pole)
    bpy.context.scene.frame_set(1)
    return empties


def bake_rotations(ob: Any) -> Any:
    from jacobian_ik.bridge import run

    report = run(ob, bpy.context.scene, range(1, FRAMES + 1))
    names = ("spine", "chest", "arm.L", "hand.L", "arm.R", "hand.R", "thigh", "shin", "foot")
    out = []
    for f in range(1, FRAMES + 1):
        bpy.context.scene.frame_set(f)
        out.append([list(ob.pose.bones[n].rotation_quaternion) for n in names])
    return report, np.array(out)


def tail_errors(ob: Any, empties: dict[str, Any]) -> Any:
    """(F, 3) distances of the goal bones' tails from their targets, played back."""
    out = []
    for f in range(1, FRAMES + 1):
        bpy.context.scene.frame_set(f)
        out.append(
            [
                (ob.matrix_world @ ob.pose.bones[n].tail - e.matrix_world.translation).length
                for n, e in empties.items()
            ]
        )
    return np.array(out)


@pytest.mark.parametrize("object_scale", [1.0, 2.0])
def test_a_scaled_root_is_solved_as_the_same_motion_unscaled(
    clean: Any, object_scale: float
) -> None:
    """Scaling the root (by 1 to 1.6, keyed) and every target about the root's head gives the
    same joint angles as the unscaled rig: the goals are met on playback, and the errors
    reported are the scene's."""
    scales = list(np.linspace(1.0, 1.6, FRAMES))
    keys = []
    for unscaled in (False, True):
        bpy.ops.wm.read_factory_settings(use_empty=True)
        ob = rig()
        ob.scale = (object_scale,) * 3
        empties = animate(ob, scales, unscaled)
        report, rotations = bake_rotations(ob)
        errors = tail_errors(ob, empties)
        assert errors.max() < 1e-4 * object_scale * 1.6, errors.max()
        assert np.allclose(report.position_error, errors, atol=2e-5 * object_scale), (
            report.position_error - errors
        )
        keys.append(rotations)
    dots = np.abs(np.sum(keys[0] * keys[1], axis=-1))  # the same rotations (q or -q)
    assert np.degrees(2 * np.arccos(np.minimum(dots, 1.0))).max() < 0.2


def test_a_scale_inside_a_chain_is_reported(clean: Any) -> None:
    from jacobian_ik.bridge import run

    ob = rig()
    animate(ob, [1.0] * FRAMES, True)
    ob.pose.bones["chest"].scale = (1.2, 1.2, 1.2)
    report = run(ob, bpy.context.scene, range(1, 3))
    found = [w for w in report.warnings if w.startswith("chest: scaled in pose mode")]
    assert len(found) == 1 and "goal 1 (hand.L), 2 (hand.R)" in found[0], report.warnings
    assert not any(w.startswith("root:") for w in report.warnings)


def test_live_solve_with_a_scaled_root(clean: Any) -> None:
    """The one-frame path (the Solve operator) meets the targets of a scaled root too."""
    ob = rig()
    empties = animate(ob, [1.4] * FRAMES, False)
    bpy.context.scene.frame_set(5)
    with override(ob):
        assert bpy.ops.jacobian_ik.solve() == {"FINISHED"}
    bpy.context.view_layer.update()
    for n, e in empties.items():
        d = (ob.matrix_world @ ob.pose.bones[n].tail - e.matrix_world.translation).length
        assert d < 1e-4, (n, d)


def test_solve_pose_reports_the_scene_errors(clean: Any) -> None:
    """``api.solve_pose`` on a rig whose root is scaled: the errors it reports are the
    distances in the scene (the hands out of reach, far above the tolerance; the foot met)."""
    import jacobian_ik.api as api

    ob = rig()
    empties = animate(ob, [1.5] * FRAMES, False)
    for n, e in empties.items():
        e.animation_data_clear()
        if n != "foot":
            e.location = e.location * 3.0  # the hands out of reach
    result = api.solve_pose(ob, apply=True)
    bpy.context.view_layer.update()
    for n, e in empties.items():
        d = (ob.matrix_world @ ob.pose.bones[n].tail - e.matrix_world.translation).length
        label = next(k for k in result.position_error if k.endswith(f"({n})"))
        assert (d > 0.1) == (n != "foot"), (n, d)
        assert abs(result.position_error[label] - d) < 1e-4 * d + 1e-6, (n, d, result)


def test_a_lean_bake_keeps_the_scene_tolerance_under_a_scaled_root(clean: Any) -> None:
    """The lean bake checks the effectors in the solver's unscaled model: with the root at
    scale 3, the position tolerance there is a third of the scene's, so the played-back tails
    stay within it of the full bake's (they were 5.7 mm off for a 2 mm tolerance)."""
    from jacobian_ik.bridge import run

    tails = []
    for lean in (False, True):
        bpy.ops.wm.read_factory_settings(use_empty=True)
        ob = rig()
        animate(ob, [3.0] * FRAMES, False)
        report = run(
            ob,
            bpy.context.scene,
            range(1, FRAMES + 1),
            reduce_keys=lean,
            key_tolerance=0.5,
            position_tolerance=2e-3,
        )
        assert report.keys < report.full_keys or not lean
        out = []
        for f in range(1, FRAMES + 1):
            bpy.context.scene.frame_set(f)
            out.append([list(ob.matrix_world @ ob.pose.bones[n].tail) for n in NAMES])
        tails.append(np.array(out))
    assert np.linalg.norm(tails[1] - tails[0], axis=2).max() <= 2e-3
