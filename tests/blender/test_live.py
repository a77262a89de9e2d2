"""Live solving: the depsgraph handler, its registration, auto-keying, solve_pose and draw."""

from __future__ import annotations

import importlib
from pathlib import Path
from types import ModuleType
from typing import Any

import bpy
import numpy as np
import pytest
from blender_helpers import add_goal, chain_bones, make_armature, make_empty, tip
from mathutils import Vector


def solve_pose(ob: Any, **kw: Any) -> Any:
    """``jacobian_ik.api.solve_pose`` (the api module is imported on use, not by register)."""
    return importlib.import_module("jacobian_ik.api").solve_pose(ob, **kw)


def handlers(addon: ModuleType) -> int:
    return sum(h is addon.live.on_depsgraph_update for h in bpy.app.handlers.depsgraph_update_post)


def ours(addon: ModuleType) -> int:
    """Every copy of a depsgraph or load handler from this add-on (by module)."""
    lists = (bpy.app.handlers.depsgraph_update_post, bpy.app.handlers.load_post)
    return sum(getattr(h, "__module__", "").startswith("jacobian_ik") for hs in lists for h in hs)


@pytest.fixture
def live_chain(arm_chain: Any, addon: ModuleType) -> tuple[Any, Any]:
    ob, empty = arm_chain(target=(1.0, 1.5, 0.5))
    ob.jacobian_ik.use_live = True
    bpy.context.view_layer.update()
    return ob, empty


def distance(ob: Any, empty: Any) -> float:
    return float((tip(ob, "b2") - empty.matrix_world.translation).length)


def test_moving_a_target_updates_the_chain(live_chain: Any, addon: ModuleType) -> None:
    ob, empty = live_chain
    assert handlers(addon) == 1
    assert distance(ob, empty) < 1e-4  # enabling live solves at once
    for step in range(5):
        empty.location = (1.0 - 0.1 * step, 1.5, 0.5 + 0.1 * step)
        bpy.context.view_layer.update()  # one depsgraph update
        pb = ob.pose.bones["b2"]
        assert (ob.matrix_world @ pb.tail - empty.matrix_world.translation).length < 1e-4
    goal = ob.jacobian_ik.goals[0]
    assert goal.error < 1e-4 and goal.reachable
    assert ob.jacobian_ik.live_iterations >= 1 and ob.jacobian_ik.live_time > 0


def test_small_moves_give_small_pose_changes(live_chain: Any) -> None:
    ob, empty = live_chain
    previous = [pb.rotation_quaternion.copy() for pb in ob.pose.bones]
    for step in range(30):
        empty.location = Vector((1.0, 1.5, 0.5)) + 0.01 * step * Vector((-1.0, 0.5, 1.0))
        bpy.context.view_layer.update()
        now = [pb.rotation_quaternion.copy() for pb in ob.pose.bones]
        for a, b in zip(previous, now, strict=True):
            assert a.rotation_difference(b).angle < 0.1  # no flips while dragging
            assert a.dot(b) > 0  # one hemisphere
        previous = now


def test_unreachable_target_is_reported(live_chain: Any) -> None:
    ob, empty = live_chain
    empty.location = (5.0, 5.0, 0.0)
    bpy.context.view_layer.update()
    goal = ob.jacobian_ik.goals[0]
    assert not goal.reachable
    assert goal.error > 1.0


def test_own_write_does_not_resolve(live_chain: Any, addon: ModuleType) -> None:
    ob, empty = live_chain
    empty.location = (0.5, 1.0, 1.0)
    bpy.context.view_layer.update()
    model = addon.live._models[ob.name]
    assert addon.live.update_armature(ob, bpy.context.scene) is None  # nothing moved
    ob.update_tag()
    bpy.context.view_layer.update()
    assert addon.live._models[ob.name] is model
    assert addon.live.update_armature(ob, bpy.context.scene) is None


def test_goal_change_rebuilds_model(live_chain: Any, addon: ModuleType) -> None:
    ob, empty = live_chain
    first = addon.live._models[ob.name]
    ob.jacobian_ik.goals[0].chain_length = 2
    empty.location = (0.3, 1.8, 0.9)
    bpy.context.view_layer.update()
    assert addon.live._models[ob.name] is not first
    assert ob.pose.bones["b0"].rotation_quaternion == ob.pose.bones["b0"].rotation_quaternion
    assert distance(ob, empty) < 1e-4


def test_disabling_removes_handler(live_chain: Any, addon: ModuleType) -> None:
    ob, empty = live_chain
    ob.jacobian_ik.use_live = False
    assert handlers(addon) == 0
    before = [tuple(pb.rotation_quaternion) for pb in ob.pose.bones]
    empty.location = (0.0, 2.0, 1.0)
    bpy.context.view_layer.update()
    assert [tuple(pb.rotation_quaternion) for pb in ob.pose.bones] == before


def test_two_live_armatures_one_handler(live_chain: Any, addon: ModuleType) -> None:
    ob, _ = live_chain
    other = make_armature("Other", chain_bones(2, prefix="c"))
    add_goal(other, "c1", make_empty("T2", (0.5, 1.5, 0.5)))
    other.jacobian_ik.use_live = True
    assert handlers(addon) == 1
    ob.jacobian_ik.use_live = False
    assert handlers(addon) == 1  # the other one is still live
    other.jacobian_ik.use_live = False
    assert handlers(addon) == 0


def test_reload_keeps_one_handler(live_chain: Any, addon: ModuleType, tmp_path: Path) -> None:
    ob, _ = live_chain
    path = str(tmp_path / "live.blend")
    bpy.ops.wm.save_as_mainfile(filepath=path)
    for _ in range(2):
        bpy.ops.wm.open_mainfile(filepath=path)
        assert handlers(addon) == 1
        assert sum(h is addon.live.on_load_post for h in bpy.app.handlers.load_post) == 1
    ob = bpy.data.objects["Arm"]
    empty = bpy.data.objects["Target"]
    empty.location = (0.2, 1.2, 1.4)
    bpy.context.view_layer.update()
    assert distance(ob, empty) < 1e-4  # still live after the load
    bpy.ops.wm.read_factory_settings(use_empty=True)  # a file without live armatures
    assert handlers(addon) == 0


def test_auto_key_off_writes_no_keys(live_chain: Any) -> None:
    ob, empty = live_chain
    bpy.context.scene.tool_settings.use_keyframe_insert_auto = False
    empty.location = (0.4, 1.0, 1.2)
    bpy.context.view_layer.update()
    assert ob.animation_data is None or ob.animation_data.action is None


def fcurves(ob: Any) -> list[Any]:
    from bpy_extras import anim_utils

    action = ob.animation_data.action
    if hasattr(action, "fcurves") and not hasattr(action, "layers"):  # Blender 4.2
        return list(action.fcurves)
    bag = anim_utils.action_get_channelbag_for_slot(action, ob.animation_data.action_slot)
    return list(bag.fcurves)


def keyed_frames(ob: Any) -> set[float]:
    curves = fcurves(ob)
    assert curves
    return {k.co.x for fc in curves for k in fc.keyframe_points}


def test_auto_key_on_keys_once_when_the_drag_ends(
    live_chain: Any, addon: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Headless there is no drag: the updates are simulated with view-layer updates and the
    drag's end with ``drag_running`` (the check of the windows' modal operators) and the key
    timer called by hand (Blender calls it every ``KEY_POLL`` seconds)."""
    ob, empty = live_chain
    live = addon.live
    scene = bpy.context.scene
    scene.tool_settings.use_keyframe_insert_auto = True
    try:
        scene.frame_set(12)
        for step in range(5):  # one drag: five updates
            empty.location = (0.4 + 0.05 * step, 1.0, 1.2)
            bpy.context.view_layer.update()
        assert ob.animation_data is None  # nothing keyed per update
        assert live._pending_keys == {ob.name: 12}
        assert bpy.app.timers.is_registered(live._key_timer)
        monkeypatch.setattr(live, "drag_running", lambda: True)
        assert live._key_timer() == live.KEY_POLL  # still dragging: look again later
        assert ob.animation_data is None
        monkeypatch.setattr(live, "drag_running", lambda: False)
        assert live._key_timer() is None  # the drag ended: keyed, timer done
        curves = fcurves(ob)
        assert len(curves) == 3 * 4  # b0..b2 quaternions
        assert all(len(fc.keyframe_points) == 1 for fc in curves)  # one key each
        assert keyed_frames(ob) == {12.0}
        for fc in curves:  # the pose at the end of the drag
            bone = fc.data_path.split('"')[1]
            value = ob.pose.bones[bone].rotation_quaternion[fc.array_index]
            assert fc.keyframe_points[0].co.y == pytest.approx(value, abs=1e-6)
        assert distance(ob, empty) < 1e-4
        assert not live._pending_keys
    finally:
        scene.tool_settings.use_keyframe_insert_auto = False
        if bpy.app.timers.is_registered(live._key_timer):
            bpy.app.timers.unregister(live._key_timer)


def test_pending_keys_land_before_a_frame_change(live_chain: Any, addon: ModuleType) -> None:
    ob, empty = live_chain
    scene = bpy.context.scene
    scene.tool_settings.use_keyframe_insert_auto = True
    try:
        scene.frame_set(5)
        empty.location = (0.4, 1.0, 1.2)
        bpy.context.view_layer.update()
        dragged = [pb.rotation_quaternion.copy() for pb in ob.pose.bones]
        scene.frame_set(6)  # before the timer fired: keyed at 5, with the dragged pose
        assert keyed_frames(ob) == {5.0}
        for fc in fcurves(ob):
            bone = int(fc.data_path.split('"')[1][1:])
            assert fc.keyframe_points[0].co.y == pytest.approx(
                dragged[bone][fc.array_index], abs=1e-6
            )
        for frame in range(7, 12):  # playback keys nothing
            scene.frame_set(frame)
        assert keyed_frames(ob) == {5.0}
    finally:
        scene.tool_settings.use_keyframe_insert_auto = False
        if bpy.app.timers.is_registered(addon.live._key_timer):
            bpy.app.timers.unregister(addon.live._key_timer)


def test_unregister_leaves_no_handler(live_chain: Any, addon: ModuleType) -> None:
    # depsgraph + load_post (live) + load_post (old settings converted) + load_post (the compiled
    # loops preloaded when a file with goals opens)
    assert ours(addon) == 4
    addon.unregister()
    try:
        assert ours(addon) == 0
    finally:
        addon.register()
    assert handlers(addon) == 1  # the live armature is still in the file


def test_bad_goal_switches_live_off_with_a_message(live_chain: Any, addon: ModuleType) -> None:
    ob, empty = live_chain
    ob.jacobian_ik.goals[0].bone = "missing"
    before = [tuple(pb.rotation_quaternion) for pb in ob.pose.bones]
    empty.location = (0.0, 2.0, 1.0)
    bpy.context.view_layer.update()  # raises nothing
    assert [tuple(pb.rotation_quaternion) for pb in ob.pose.bones] == before
    assert not ob.jacobian_ik.use_live
    assert "missing" in addon.live.last_error(ob)
    # switched off inside the handler: the handlers go at the next timer tick (called here)
    assert bpy.app.timers.is_registered(addon.live._deferred_sync)
    bpy.app.timers.unregister(addon.live._deferred_sync)
    addon.live._deferred_sync()
    assert handlers(addon) == 0 and addon.live.frame_handler_installed() == 0
    ob.jacobian_ik.goals[0].bone = "b2"
    ob.jacobian_ik.use_live = True  # on again: the message goes, solving resumes
    assert addon.live.last_error(ob) == ""
    bpy.context.view_layer.update()
    assert distance(ob, empty) < 1e-4


@pytest.mark.parametrize("bad", ["deleted", "nan"])
def test_bad_target_on_frame_change(live_chain: Any, addon: ModuleType, bad: str) -> None:
    ob, empty = live_chain
    if bad == "deleted":
        bpy.data.objects.remove(empty)
    else:
        empty.matrix_world.translation = (float("nan"), 0.0, 0.0)
    bpy.context.scene.frame_set(3)  # raises nothing
    assert not ob.jacobian_ik.use_live
    message = addon.live.last_error(ob)
    assert ("no target" in message) if bad == "deleted" else ("NaN" in message)
    before = [tuple(pb.rotation_quaternion) for pb in ob.pose.bones]
    bpy.context.scene.frame_set(4)  # nothing solved any more
    assert [tuple(pb.rotation_quaternion) for pb in ob.pose.bones] == before
    if bpy.app.timers.is_registered(addon.live._deferred_sync):
        bpy.app.timers.unregister(addon.live._deferred_sync)


def test_no_enabled_goal_is_not_solved(live_chain: Any, addon: ModuleType) -> None:
    ob, empty = live_chain
    ob.jacobian_ik.goals[0].enabled = False
    calls = []
    original = addon.live.update_armature
    addon.live.update_armature = lambda *a, **k: calls.append(1) or original(*a, **k)
    try:
        empty.location = (0.2, 1.0, 1.0)
        bpy.context.view_layer.update()
        bpy.context.scene.frame_set(7)
    finally:
        addon.live.update_armature = original
    assert calls == [] and ob.jacobian_ik.use_live and addon.live.last_error(ob) == ""


def test_rest_position_is_not_solved(live_chain: Any) -> None:
    """In Rest Position the pose is not evaluated: nothing is solved or written (a solve there
    used the rest pose of the bones above the chains); back in Pose Position the chain
    follows at the next update."""
    ob, empty = live_chain
    ob.data.pose_position = "REST"
    bpy.context.view_layer.update()
    before = [tuple(pb.rotation_quaternion) for pb in ob.pose.bones]
    empty.location = (0.2, 1.0, 1.0)
    bpy.context.view_layer.update()
    bpy.context.scene.frame_set(3)
    assert [tuple(pb.rotation_quaternion) for pb in ob.pose.bones] == before
    ob.data.pose_position = "POSE"
    bpy.context.view_layer.update()
    assert distance(ob, empty) < 1e-4


def animated_chain(arm_chain: Any) -> tuple[Any, Any]:
    """The 3-bone chain with its target keyed along a reachable curve over frames 1-121."""
    ob, empty = arm_chain(target=(1.0, 1.5, 0.5))
    for frame in range(1, 122, 10):
        t = (frame - 1) / 120 * 2 * np.pi
        empty.location = (1.2 * np.cos(t), 1.4 + 0.6 * np.sin(2 * t), 0.8 * np.sin(t))
        empty.keyframe_insert("location", frame=frame)
    bpy.context.scene.frame_set(1)
    ob.jacobian_ik.use_live = True
    bpy.context.view_layer.update()
    return ob, empty


def drawn_tip(ob: Any) -> Vector:
    """The chain's tip as the depsgraph evaluated it (what the viewport draws)."""
    evaluated = ob.evaluated_get(bpy.context.evaluated_depsgraph_get())
    return evaluated.matrix_world @ evaluated.pose.bones["b2"].tail


def test_frame_change_solves_animated_targets(arm_chain: Any, addon: ModuleType) -> None:
    ob, empty = animated_chain(arm_chain)
    assert addon.live.frame_handler_installed() == 1
    tolerance = ob.jacobian_ik.tolerance
    for frame in (10, 40, 80, 120, 121, 1, 57):
        bpy.context.scene.frame_set(frame)
        target = empty.matrix_world.translation
        assert (drawn_tip(ob) - target).length < 10 * tolerance, frame
        assert ob.jacobian_ik.goals[0].error <= tolerance
    assert ob.animation_data is None  # nothing keyed


def test_render_solves_the_rendered_frames(
    arm_chain: Any, addon: ModuleType, tmp_path: Path
) -> None:
    """An animation render (Cycles, 4x4 pixels, 1 sample) changes frames through its own
    depsgraph while the originals stay at the viewport's frame: each rendered frame is solved
    from what that depsgraph evaluated, and the pose Blender renders (the channels it copies
    after the handler) reaches the target at that frame."""
    ob, empty = animated_chain(arm_chain)
    scene = bpy.context.scene
    scene.frame_set(1)
    camera = bpy.data.objects.new("Cam", bpy.data.cameras.new("Cam"))
    scene.collection.objects.link(camera)
    scene.camera = camera
    scene.render.engine = "CYCLES"
    scene.cycles.samples = 1
    scene.render.resolution_x = scene.render.resolution_y = 4
    scene.render.filepath = str(tmp_path / "f")
    scene.frame_start, scene.frame_end = 40, 41
    solved: dict[int, tuple[str, float]] = {}
    rendered: dict[int, list[Any]] = {}
    original = addon.live.update_armature

    def record(ob: Any, scene: Any, **kw: Any) -> Any:
        res = original(ob, scene, **kw)
        mode = kw["depsgraph"].mode if kw.get("depsgraph") is not None else "none"
        solved[scene.frame_current] = (mode, float(res.result.position_error[0, 0]))
        return res

    def after_render(scene: Any, *_args: Any) -> None:  # the channels the frame was rendered with
        rendered[scene.frame_current] = [pb.rotation_quaternion.copy() for pb in ob.pose.bones]

    addon.live.update_armature = record
    bpy.app.handlers.render_post.append(after_render)
    try:
        bpy.ops.render.render(animation=True)
    finally:
        addon.live.update_armature = original
        bpy.app.handlers.render_post.remove(after_render)
    for frame in (40, 41):
        assert solved[frame][0] == "RENDER" and solved[frame][1] < 1e-4
        with addon.bridge.suspend.suspended():  # the viewport at that frame, not solved
            scene.frame_set(frame)
        for pb, q in zip(ob.pose.bones, rendered[frame], strict=True):
            pb.rotation_quaternion = q
        assert distance(ob, empty) < 1e-4, frame


def test_frame_result_does_not_depend_on_the_path(
    arm_chain: Any, addon: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same frame reached playing forward, backward and by a jump: the tip on the target
    within 1e-4 every way. Playing starts each frame from the neighbouring frame's solution
    (coherent: no joint turns more than 0.3 rad a frame), a jump from the animated pose (the
    pose every frame gets with ``FRAME_START = "animated"``)."""
    ob, empty = animated_chain(arm_chain)
    scene = bpy.context.scene
    model = addon.bridge.live_model
    starts: list[str] = []
    original = model.LiveModel.start_pose

    def spy(self: Any, pose: Any, start: str = "current") -> None:
        starts.append(start)
        original(self, pose, start)

    monkeypatch.setattr(model.LiveModel, "start_pose", spy)
    frames = range(20, 61)
    ways: dict[str, dict[int, tuple[Vector, list[Any]]]] = {"forward": {}, "backward": {}}
    for way, order in (("forward", frames), ("backward", reversed(frames))):
        previous = None
        for frame in order:
            starts.clear()
            scene.frame_set(frame)
            pose = [pb.rotation_quaternion.copy() for pb in ob.pose.bones]
            ways[way][frame] = (drawn_tip(ob), pose)
            if previous is not None:  # coherent: no flips between frames
                assert starts[0] == "previous", (way, frame)
                for a, b in zip(previous, pose, strict=True):
                    assert a.rotation_difference(b).angle < 0.3 and a.dot(b) > 0
            previous = pose
    jumped = {}
    for frame in (60, 20, 45, 33, 51):
        scene.frame_set(100)
        starts.clear()
        scene.frame_set(frame)
        assert starts[0] == "animated"
        jumped[frame] = (drawn_tip(ob), [pb.rotation_quaternion.copy() for pb in ob.pose.bones])
        target = empty.matrix_world.translation
        for tip_, _ in (jumped[frame], ways["forward"][frame], ways["backward"][frame]):
            assert (tip_ - target).length < 1e-4, frame
            assert (tip_ - jumped[frame][0]).length < 1e-4, frame
    monkeypatch.setattr(model, "FRAME_START", "animated")
    for frame in frames:  # from the animated pose on every frame: the jumps' poses
        scene.frame_set(frame)
        if frame in jumped:
            for a, b in zip(ob.pose.bones, jumped[frame][1], strict=True):
                assert a.rotation_quaternion.rotation_difference(b).angle < 1e-4


def test_solve_pose_api(arm_chain: Any, addon: ModuleType) -> None:
    ob, empty = arm_chain(target=(1.2, 1.0, 0.8))
    preview = solve_pose(ob, apply=False)
    assert preview.converged
    assert all(v == pytest.approx(0.0, abs=1e-4) for v in preview.position_error.values())
    assert all(tuple(pb.rotation_quaternion) == (1.0, 0.0, 0.0, 0.0) for pb in ob.pose.bones)
    result = solve_pose(ob)
    assert distance(ob, empty) < 1e-4
    for name, value in result.rotations.items():
        assert result.rotation_attr[name] == "rotation_quaternion"
        np.testing.assert_allclose(ob.pose.bones[name].rotation_quaternion, value, atol=1e-6)
    assert set(result.matrices) == {"b0", "b1", "b2"}


def test_solve_pose_at_frame(arm_chain: Any, addon: ModuleType) -> None:
    ob, empty = arm_chain()
    empty.location = (0.0, 0.0, 0.0)
    empty.keyframe_insert("location", frame=1)
    empty.location = (1.0, 1.0, 1.0)
    empty.keyframe_insert("location", frame=10)
    result = solve_pose(ob, frame=10)
    assert bpy.context.scene.frame_current == 10
    assert result.converged and distance(ob, empty) < 1e-4


def test_solve_pose_bad_input(clean: ModuleType) -> None:
    empty = make_empty("E", (0, 0, 0))
    with pytest.raises(clean.bridge.RigError):
        solve_pose(empty)
    ob = make_armature("A", chain_bones(2))
    with pytest.raises(clean.bridge.RigError, match="no enabled goals"):
        solve_pose(ob)
    target = make_empty("T", (0.5, 1.0, 0.0))
    add_goal(ob, "b1", target)
    target.hide_viewport = True  # not evaluated: its matrix would be read frozen
    with pytest.raises(clean.bridge.RigError, match="target 'T' is disabled in viewports"):
        solve_pose(ob)


def test_draw_lines_without_gpu(live_chain: Any, addon: ModuleType) -> None:
    assert addon.draw._handle is None  # background mode: no draw handler
    points, colours = addon.draw.goal_lines(bpy.context.view_layer.objects)
    assert len(points) == len(colours) == 2
    assert colours[0] == addon.draw.error_colour(0.0, 1e-5) == (0.0, 1.0, 0.0, 1.0)
    assert addon.draw.error_colour(1.0, 1e-5)[:3] == (1.0, 0.0, 0.0)


def test_rig_changes_rebuild_model(
    live_chain: Any, addon: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    ob, empty = live_chain
    first = addon.live._models[ob.name]
    # IK settings tag nothing for update: they are read again after IK_RECHECK_SECONDS
    monkeypatch.setattr(addon.bridge.live_model, "IK_RECHECK_SECONDS", 0.0)
    ob.pose.bones["b1"].lock_ik_z = True
    empty.location = (0.9, 1.5, 0.6)
    bpy.context.view_layer.update()
    second = addon.live._models[ob.name]
    assert second is not first
    bpy.context.view_layer.objects.active = ob
    bpy.ops.object.mode_set(mode="EDIT")
    ob.data.edit_bones["b2"].tail = (0.0, 3.5, 0.0)  # the rest pose
    bpy.ops.object.mode_set(mode="OBJECT")
    empty.location = (0.5, 2.5, 0.5)
    bpy.context.view_layer.update()
    third = addon.live._models[ob.name]
    assert third is not second
    assert distance(ob, empty) < 1e-4
    # reparented with nothing moved (the rest matrices stay): the model's hierarchy changed
    bpy.ops.object.mode_set(mode="EDIT")
    ob.data.edit_bones["b2"].use_connect = False
    ob.data.edit_bones["b2"].parent = ob.data.edit_bones["b0"]
    bpy.ops.object.mode_set(mode="OBJECT")
    empty.location = (0.4, 2.4, 0.6)
    bpy.context.view_layer.update()
    assert addon.live._models[ob.name] is not third
    assert "b1" not in addon.live._models[ob.name].free_names
    assert distance(ob, empty) < 1e-4


def test_joint_limits_use_the_batched_solver(arm_chain: Any, addon: ModuleType) -> None:
    ob, empty = arm_chain(target=(1.0, 1.5, 0.5))
    pb = ob.pose.bones["b1"]
    pb.use_ik_limit_x, pb.ik_min_x, pb.ik_max_x = True, -1.5, 1.5
    ob.jacobian_ik.use_live = True
    bpy.context.view_layer.update()
    empty.location = (0.8, 1.6, 0.7)
    bpy.context.view_layer.update()
    assert distance(ob, empty) < 1e-4


def test_pole_and_stretch_rigs_follow(arm_chain: Any, addon: ModuleType) -> None:
    ob, empty = arm_chain(target=(1.0, 1.5, 0.5))
    ob.jacobian_ik.goals[0].pole_target = make_empty("Pole", (0.0, 1.0, 2.0))
    ob.jacobian_ik.use_live = True
    bpy.context.view_layer.update()
    empty.location = (0.8, 1.6, 0.7)
    bpy.context.view_layer.update()
    assert distance(ob, empty) < 1e-4
    ob.jacobian_ik.goals[0].pole_target = None
    ob.pose.bones["b2"].ik_stretch = 0.5
    empty.location = (0.3, 3.4, 0.0)  # beyond the chain's length: stretch
    bpy.context.view_layer.update()
    assert distance(ob, empty) < 1e-3


def test_playing_keyed_chain_bones_start_from_their_keys(
    arm_chain: Any, addon: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A chain bone with keys of its own starts each played frame from its key (animation set
    its channels since the last write), the others from the neighbouring frame's solution."""
    ob, _ = animated_chain(arm_chain)
    ob.jacobian_ik.use_live = False
    pb = ob.pose.bones["b0"]
    for frame, angle in ((1, 0.0), (121, 1.0)):
        pb.rotation_quaternion = (np.cos(angle / 2), 0.0, 0.0, np.sin(angle / 2))
        pb.keyframe_insert("rotation_quaternion", frame=frame)
    scene = bpy.context.scene
    scene.frame_set(30)
    ob.jacobian_ik.use_live = True
    model = addon.bridge.live_model
    seen: list[Any] = []
    original = model.LiveModel.start_pose

    def spy(self: Any, pose: Any, start: str = "current") -> None:
        original(self, pose, start)
        seen.append((start, pose.rotations[0, self.free].copy()))

    monkeypatch.setattr(model.LiveModel, "start_pose", spy)
    scene.frame_set(30)
    solved_30 = [p.rotation_quaternion.copy() for p in ob.pose.bones]
    seen.clear()
    scene.frame_set(31)  # playing: b0 from its key at 31, b1 and b2 from frame 30's solution
    start, rotations = seen[0]
    assert start == "previous"
    with addon.bridge.suspend.suspended():
        ob.jacobian_ik.use_live = False
        scene.frame_set(31)
        key_31 = pb.rotation_quaternion.normalized().to_matrix()  # keys: not unit
    np.testing.assert_allclose(rotations[0], np.array(key_31), atol=1e-6)
    for k in (1, 2):
        np.testing.assert_allclose(rotations[k], np.array(solved_30[k].to_matrix()), atol=1e-5)


def test_pose_channels_set_in_bulk_evaluate_as_set_bone_by_bone(clean: ModuleType) -> None:
    """``write.set_pose_channels`` (one foreach_set per property and the object's tag) leaves
    the channels, the evaluated bones and a skinned mesh as setting each channel does."""
    write = importlib.import_module("jacobian_ik.bridge.write")
    ob = make_armature("Arm", chain_bones(4))
    modes = ["QUATERNION", "XZY", "AXIS_ANGLE", "QUATERNION"]
    for pb, mode in zip(ob.pose.bones, modes, strict=True):
        pb.rotation_mode = mode
    mesh = bpy.data.meshes.new("Skin")
    mesh.from_pydata([(0.3, y * 0.5, 0.1) for y in range(9)], [], [])
    skin = bpy.data.objects.new("Skin", mesh)
    bpy.context.scene.collection.objects.link(skin)
    skin.parent = ob
    skin.modifiers.new("Armature", "ARMATURE").object = ob
    for i in range(4):
        group = skin.vertex_groups.new(name=f"b{i}")
        group.add([2 * i, 2 * i + 1, 2 * i + 2], 1.0, "REPLACE")
    values = {
        "QUATERNION": np.array([0.9, 0.1, -0.3, 0.2]) / np.linalg.norm([0.9, 0.1, -0.3, 0.2]),
        "XZY": np.array([0.3, -0.2, 0.7]),
        "AXIS_ANGLE": np.array([0.6, 0.0, 0.6, 0.8]),
    }
    channels = [
        write.Channel(pb.name, write.rotation_attr(pb.rotation_mode), values[mode][None] * (i + 1))
        for i, (pb, mode) in enumerate(zip(ob.pose.bones, modes, strict=True))
    ]
    channels.append(write.Channel("b3", "scale", np.array([[1.0, 1.3, 1.0]])))
    channels.append(write.Channel("b0", "location", np.array([[0.1, 0.0, -0.2]])))

    def evaluated() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        dg = bpy.context.evaluated_depsgraph_get()
        dg.update()
        bones = np.array([np.array(pb.matrix) for pb in ob.evaluated_get(dg).pose.bones])
        verts = np.array([v.co[:] for v in skin.evaluated_get(dg).to_mesh().vertices])
        skin.evaluated_get(dg).to_mesh_clear()
        own = [list(getattr(ob.pose.bones[ch.bone], ch.attr)) for ch in channels]
        return bones, verts, np.array([v for row in own for v in row])

    rest = evaluated()
    for ch in channels:
        setattr(ob.pose.bones[ch.bone], ch.attr, ch.values[0].tolist())
    one_by_one = evaluated()
    for ch in channels:  # back to rest, as Blender evaluates it
        ob.pose.bones[ch.bone].rotation_quaternion = (1.0, 0.0, 0.0, 0.0)
        ob.pose.bones[ch.bone].rotation_euler = (0.0, 0.0, 0.0)
        ob.pose.bones[ch.bone].rotation_axis_angle = (0.0, 0.0, 1.0, 0.0)
        ob.pose.bones[ch.bone].scale = (1.0, 1.0, 1.0)
        ob.pose.bones[ch.bone].location = (0.0, 0.0, 0.0)
    assert np.abs(evaluated()[1] - rest[1]).max() < 1e-7
    assert np.abs(one_by_one[1] - rest[1]).max() > 0.1  # (the pose moves the skin)
    write.set_pose_channels(ob, channels)
    bulk = evaluated()
    for a, b in zip(bulk, one_by_one, strict=True):
        assert np.array_equal(a, b)


def test_bones_above_the_chain_that_move_between_updates_are_read_again(
    arm_chain: Any, addon: ModuleType
) -> None:
    """A live update keeps the local transforms of the bones no solve moves while they hold
    still (``rig._fixed_local``); when such a bone turns between two updates, by its channel
    or by a constraint (its evaluated matrix alone), the next update solves the chain from
    where it is now: the tip on the target, the bone where it was turned to."""
    ob, empty = arm_chain(target=(0.6, 2.2, 0.3), chain_length=2)  # b0 is above the chain
    ob.jacobian_ik.use_live = True
    bpy.context.view_layer.update()
    assert distance(ob, empty) < 1e-4
    base = ob.pose.bones["b0"]
    base.rotation_mode = "XYZ"
    bpy.context.view_layer.update()
    for angle in (0.15, 0.3):  # the channel
        base.rotation_euler = (0.0, 0.0, angle)
        bpy.context.view_layer.update()
        assert distance(ob, empty) < 1e-4
        assert tuple(base.rotation_euler) == pytest.approx((0.0, 0.0, angle))
    turner = make_empty("Turner", (0.0, 0.0, 0.0))
    con = base.constraints.new("COPY_ROTATION")  # the evaluated matrix alone
    con.target, con.mix_mode = turner, "ADD"
    for angle in (0.2, -0.25):
        turner.rotation_euler = (angle, 0.0, 0.0)
        bpy.context.view_layer.update()
        assert distance(ob, empty) < 1e-4, angle
        assert abs((ob.matrix_world @ ob.pose.bones["b1"].head).z) > 0.1  # b0 was turned


@pytest.mark.parametrize("linked", [False, True])
def test_duplicated_renamed_and_deleted_live_armatures_are_followed(
    live_chain: Any, addon: ModuleType, linked: bool
) -> None:
    """The live armatures are listed by name while the armature data's users stay as they were
    (``live._armatures``): a duplicate (its own armature data or the original's, Alt+D) is
    solved from the next update, a renamed armature still is, a deleted one is dropped."""
    ob, empty = live_chain
    assert addon.live.live_armatures() == [ob]
    twin = ob.copy()
    if not linked:
        twin.data = ob.data.copy()
    bpy.context.scene.collection.objects.link(twin)
    twin.location = (0.3, 0.0, 0.0)  # the same goals and target, from elsewhere
    empty.location = (0.9, 1.6, 0.4)
    bpy.context.view_layer.update()
    assert sorted(o.name for o in addon.live.live_armatures()) == sorted([ob.name, twin.name])
    for arm in (ob, twin):
        assert distance(arm, empty) < 1e-4, arm.name
    ob.name = "Renamed"
    empty.location = (1.0, 1.4, 0.6)
    bpy.context.view_layer.update()
    for arm in (ob, twin):
        assert distance(arm, empty) < 1e-4, arm.name
    bpy.data.objects.remove(twin)
    empty.location = (0.8, 1.5, 0.5)
    bpy.context.view_layer.update()
    assert addon.live.live_armatures() == [ob]
    assert distance(ob, empty) < 1e-4
