"""Live solving on a render's frame changes for rigs with a pole, IK stretch or a free root.

An animation render changes frames through its own depsgraph while the original objects stay at
the viewport's frame: the targets, the pole and the armature must be read as that depsgraph
evaluated them, through the same reader as a bake (``rig.read_frames``, the poles' reader)."""

from __future__ import annotations

import importlib
from pathlib import Path
from types import ModuleType
from typing import Any

import bpy
import numpy as np
import pytest
from blender_helpers import add_goal, chain_bones, make_armature, make_empty
from mathutils import Vector

RENDERED = (40, 41)


def rig(kind: str) -> tuple[Any, Any]:
    """A 3-bone chain (length 3) whose target is keyed far from its frame-1 place at the
    rendered frames: within reach with a pole (the pole keyed too), beyond the chain for IK
    stretch and for a free root (move_root, the goal's chain of 2 on the root bone)."""
    ob = make_armature("Arm", chain_bones(3))
    empty = make_empty("Target", (1.0, 1.5, 0.5))
    goal = add_goal(ob, "b2", empty, chain_length=2 if kind == "move_root" else 0)
    far = {"pole": (-1.2, 1.1, 1.0), "stretch": (0.4, 3.6, 0.3), "move_root": (2.5, 2.5, 1.0)}
    for frame, location in ((1, (1.0, 1.5, 0.5)), (40, far[kind]), (41, far[kind])):
        empty.location = location
        empty.keyframe_insert("location", frame=frame)
    if kind == "pole":
        pole = make_empty("Pole", (0.0, 1.0, 2.0))
        for frame, location in ((1, (0.0, 1.0, 2.0)), (40, (0.0, 1.0, -2.0))):
            pole.location = location
            pole.keyframe_insert("location", frame=frame)
        goal.pole_target = pole
    elif kind == "stretch":
        ob.pose.bones["b2"].ik_stretch = 0.5  # the tip bone: no child inherits its scale
    else:
        ob.jacobian_ik.move_root = True
    return ob, empty


def render_frames(scene: Any, tmp_path: Path) -> None:
    camera = bpy.data.objects.new("Cam", bpy.data.cameras.new("Cam"))
    scene.collection.objects.link(camera)
    scene.camera = camera
    scene.render.engine = "CYCLES"
    scene.cycles.samples = 1
    scene.render.resolution_x = scene.render.resolution_y = 4
    scene.render.filepath = str(tmp_path / "f")
    scene.frame_start, scene.frame_end = RENDERED
    bpy.ops.render.render(animation=True)


def channels(ob: Any) -> list[tuple[Any, ...]]:
    return [
        (tuple(pb.rotation_quaternion), tuple(pb.scale), tuple(pb.location)) for pb in ob.pose.bones
    ]


@pytest.mark.parametrize("kind", ["pole", "stretch", "move_root"])
def test_render_solves_rigs_with_poles_stretch_and_a_free_root(
    clean: ModuleType, tmp_path: Path, kind: str
) -> None:
    addon = clean
    ob, empty = rig(kind)
    scene = bpy.context.scene
    scene.frame_set(1)
    ob.jacobian_ik.use_live = True
    bpy.context.view_layer.update()
    solved: dict[int, tuple[str, float]] = {}
    rendered: dict[int, list[tuple[Any, ...]]] = {}
    original = addon.live.update_armature

    def record(ob: Any, scene: Any, **kw: Any) -> Any:
        res = original(ob, scene, **kw)
        if res is None:  # a depsgraph update that changed nothing
            return res
        mode = kw["depsgraph"].mode if kw.get("depsgraph") is not None else "none"
        solved[scene.frame_current] = (mode, float(res.result.position_error[0, 0]))
        return res

    def after_render(scene: Any, *_args: Any) -> None:  # the channels the frame was rendered with
        rendered[scene.frame_current] = channels(ob)

    addon.live.update_armature = record
    bpy.app.handlers.render_post.append(after_render)
    try:
        render_frames(scene, tmp_path)
    finally:
        addon.live.update_armature = original
        bpy.app.handlers.render_post.remove(after_render)
    assert ob.jacobian_ik.use_live, addon.live.last_error(ob)
    ob.jacobian_ik.use_live = False  # the checks below set the channels by hand
    for frame in RENDERED:
        assert solved[frame][0] == "RENDER" and solved[frame][1] < 1e-4, (frame, solved)
        with addon.bridge.suspend.suspended():  # the viewport at that frame, not solved
            scene.frame_set(frame)
        for pb, (q, s, loc) in zip(ob.pose.bones, rendered[frame], strict=True):
            pb.rotation_quaternion, pb.scale, pb.location = q, s, loc
        bpy.context.view_layer.update()
        tail = ob.matrix_world @ ob.pose.bones["b2"].tail
        assert (tail - empty.matrix_world.translation).length < 1e-4, (frame, kind)
        # what a solve at that frame in the viewport gives (chains with a pole from rest, the
        # others from the rendered pose): the rendered pose, so the pole was read at that frame
        # (read at frame 1, on the other side, the chain would swivel by about 180 degrees)
        preview = importlib.import_module("jacobian_ik.api").solve_pose(ob, apply=False)
        for name, matrix in preview.matrices.items():
            basis = np.array(ob.pose.bones[name].matrix_basis.to_3x3().normalized())
            cos = (np.trace(basis.T @ matrix) - 1.0) / 2.0
            assert np.arccos(np.clip(cos, -1.0, 1.0)) < 0.02, (frame, kind, name)
        if kind == "move_root":
            assert Vector(ob.pose.bones["b0"].location).length > 0.1  # the root moved


def test_affine_inverse_equals_numpy(clean: ModuleType) -> None:
    """rig.affine_inverse (cofactors, no LAPACK call) against numpy's inv on scaled, sheared and
    mirrored affine matrices."""
    rng = np.random.default_rng(3)
    m = np.zeros((5, 7, 4, 4))
    m[..., :3, :] = rng.normal(size=(5, 7, 3, 4))
    m[..., 3, 3] = 1.0
    m[0, 0, :3, :3] *= 1e-3  # small scale
    m[0, 1, 0, :3] *= -1.0  # mirrored
    np.testing.assert_allclose(
        clean.bridge.rig.affine_inverse(m), np.linalg.inv(m), rtol=1e-9, atol=1e-9
    )
