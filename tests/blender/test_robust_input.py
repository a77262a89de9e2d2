"""Bad rigs and bad input (issue 7): every case reports a clear message and leaves the pose,
keys, actions, NLA, drivers and constraints byte-identical (see snapshot.py). Also undo,
determinism, untouched data outside a bake's range, chunked and cancellable bakes."""

from __future__ import annotations

import importlib.util
import math
import os
import random
import sys
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import bpy
import numpy as np
import pytest
from blender_helpers import ROOT, add_goal, chain_bones, make_armature, make_empty, override, tip
from snapshot import action_fcurves, snapshot

# -- a busy rig: keys on the chain and elsewhere, another action in the NLA, a driver, constraints


def busy_rig(key_every: int = 3) -> tuple[Any, Any]:
    """A 4-bone chain (goal on b3, chain 3: b1..b3 solved, b0 fixed) with keys on the chain and
    on b0 (every ``key_every`` frames of 1..30), an NLA strip of another action, a driver and
    constraints; an animated target."""
    ob = make_armature("Arm", [*chain_bones(4), ("ctrl", (1, 2, 0), (1, 2, 0.3), None, False)])
    target = make_empty("Target", (1.0, 2.5, 0.5))
    for frame, location in {1: (1.0, 2.5, 0.5), 15: (-1.5, 1.5, 1.0), 30: (0.5, 2.0, -1.5)}.items():
        target.location = location
        target.keyframe_insert("location", frame=frame)
    add_goal(ob, "b3", target, chain_length=3)
    for frame in range(1, 31, key_every):
        for name in ("b1", "b2", "b3"):
            pb = ob.pose.bones[name]
            a = 0.05 * frame
            pb.rotation_quaternion = (math.cos(a), math.sin(a), 0.0, 0.0)
            pb.keyframe_insert("rotation_quaternion", frame=frame)
        ob.pose.bones["b0"].location = (0.01 * frame, 0.0, 0.0)
        ob.pose.bones["b0"].keyframe_insert("location", frame=frame)
    for pb in ob.pose.bones:  # back to the keyed pose of frame 1
        pb.rotation_quaternion = (1.0, 0.0, 0.0, 0.0)
    bpy.context.scene.frame_set(1)
    ad = ob.animation_data
    other = bpy.data.actions.new("Other")
    track = ad.nla_tracks.new()
    track.name = "Layer"
    ctrl = ob.pose.bones["ctrl"]
    ctrl.location = (0.0, 0.1, 0.0)
    ctrl.keyframe_insert("location", frame=1)  # goes into the active action...
    strip = track.strips.new("Strip", 40, other)
    strip.mute = True
    drv = ob.pose.bones["ctrl"].driver_add("scale", 1).driver
    drv.expression = "1.0 + 0.0"
    con = ob.pose.bones["b0"].constraints.new("LIMIT_ROTATION")
    con.use_limit_x = True
    con.enabled = False
    ob.pose.bones["ctrl"].constraints.new("COPY_LOCATION").mute = True
    bpy.context.scene.frame_set(1)
    return ob, target


@pytest.fixture
def rig(clean: Any) -> tuple[Any, Any]:
    return busy_rig()


def call(op: str, ob: Any, **kw: Any) -> set[str]:
    with override(ob):
        return getattr(bpy.ops.jacobian_ik, op)(**kw)  # type: ignore[no-any-return]


def expect_refused(ob: Any, message: str, ops: tuple[str, ...] = ("solve", "bake")) -> None:
    """Solve (auto-keying on) and bake are refused with ``message`` and change nothing."""
    bpy.context.scene.tool_settings.use_keyframe_insert_auto = True
    before = snapshot()
    for op in ops:
        kw = {"frame_start": 1, "frame_end": 20} if op == "bake" else {}
        with pytest.raises(RuntimeError, match=message):
            call(op, ob, **kw)
        assert snapshot() == before, op
    assert ob.jacobian_ik.last_frames == 0


def delete_bone(ob: Any, name: str) -> None:
    bpy.context.view_layer.objects.active = ob
    bpy.ops.object.mode_set(mode="EDIT")
    ob.data.edit_bones.remove(ob.data.edit_bones[name])
    bpy.ops.object.mode_set(mode="OBJECT")


def parented_empty(ob: Any, bone: str) -> Any:
    empty = make_empty("Child", (0.0, 0.0, 0.0))
    empty.parent, empty.parent_type, empty.parent_bone = ob, "BONE", bone
    return empty


def goal(ob: Any) -> Any:
    return ob.jacobian_ik.goals[0]


def lock_all(ob: Any, attr: str) -> None:
    for name in ("b1", "b2", "b3"):
        pb = ob.pose.bones[name]
        if attr == "lock_rotation":
            pb.lock_rotation = (True, True, True)
            pb.lock_rotation_w = True
        else:
            pb.lock_ik_x = pb.lock_ik_y = pb.lock_ik_z = True


def set_target_bone(ob: Any, target: Any, bone: str) -> None:
    goal(ob).target, goal(ob).target_bone = target, bone


def constrain_to(target: Any, ob: Any, bone: str) -> None:
    """``target`` follows ``bone`` of ``ob`` through a Child Of constraint (not parenting)."""
    con = target.constraints.new("CHILD_OF")
    con.target, con.subtarget = ob, bone


def pole_bone_following(ob: Any, bone: str) -> None:
    """The goal's pole is the armature's bone ``ctrl``, which follows ``bone`` through a Copy
    Location constraint: the pole moves with the chain."""
    con = ob.pose.bones["ctrl"].constraints.new("COPY_LOCATION")
    con.target, con.subtarget = ob, bone
    goal(ob).pole_target, goal(ob).pole_target_bone = ob, "ctrl"


def target_bone_at_rest(ob: Any) -> None:
    """The goal's target is a bone of another armature that shows its Rest Position."""
    other = make_armature("Other", chain_bones(2))
    other.data.pose_position = "REST"
    set_target_bone(ob, other, "b1")


def tweak_pushed_down(ob: Any) -> None:
    """The armature's action pushed down into an NLA strip that plays it 10 frames later,
    the strip in tweak mode."""
    ad = ob.animation_data
    track = ad.nla_tracks.new()
    strip = track.strips.new("Pushed", 11, ad.action)
    ad.action = None
    track.select = strip.select = True
    ad.use_tweak_mode = True
    assert ad.use_tweak_mode


def blend_over_nla(ob: Any, blend: str, influence: float) -> None:
    """The rig's NLA strip unmuted, the action blended over it."""
    ob.animation_data.nla_tracks["Layer"].strips["Strip"].mute = False
    ob.animation_data.action_blend_type = blend
    ob.animation_data.action_influence = influence


def exclude_collection_of(target: Any) -> None:
    """``target`` moved into a new collection, excluded from the view layer."""
    col = bpy.data.collections.new("Targets")
    bpy.context.scene.collection.children.link(col)
    for c in target.users_collection:
        c.objects.unlink(target)
    col.objects.link(target)
    bpy.context.view_layer.layer_collection.children["Targets"].exclude = True


NAN, INF = math.nan, math.inf
BAD: list[tuple[str, Callable[[Any, Any], Any], str]] = [
    ("goal bone deleted", lambda ob, t: delete_bone(ob, "b3"), "'b3' is not in armature"),
    ("no bone", lambda ob, t: setattr(goal(ob), "bone", ""), "no bone set"),
    ("target deleted", lambda ob, t: bpy.data.objects.remove(t), "no target object"),
    ("target bone on an empty", lambda ob, t: setattr(goal(ob), "target_bone", "x"), "no armature"),
    ("target bone missing", lambda ob, t: set_target_bone(ob, ob, "nope"), "has no bone 'nope'"),
    ("cyclic: chain bone", lambda ob, t: set_target_bone(ob, ob, "b2"), "a cycle"),
    ("cyclic: goal bone", lambda ob, t: set_target_bone(ob, ob, "b3"), "a cycle"),
    (
        "cyclic: object on a chain bone",
        lambda ob, t: set_target_bone(ob, parented_empty(ob, "b1"), ""),
        "a cycle",
    ),
    (  # one goal's target set by another's result (Rigify's paws): not a cycle, not solved
        "cascade: target on another goal's chain",
        lambda ob, t: add_goal(ob, "ctrl", ob, chain_length=1, target_bone="b2"),
        "target bone 'b2' follows the chain of goal 1 \\(b3\\)",
    ),
    (
        "cyclic: constraint to a chain bone",
        lambda ob, t: constrain_to(t, ob, "b2"),
        "'Target' moves with the solved chain bones",
    ),
    (
        "cyclic: pole bone constrained to a chain bone",
        lambda ob, t: pole_bone_following(ob, "b2"),
        "pole 'ctrl' moves with the solved chain bones",
    ),
    ("every DOF IK-locked", lambda ob, t: lock_all(ob, "lock_ik"), "locked: nothing can move"),
    ("every rotation locked", lambda ob, t: lock_all(ob, "lock_rotation"), "nothing can move"),
    ("weights zero", lambda ob, t: setattr(goal(ob), "position_weight", 0.0), "weights are zero"),
    # the scene does not evaluate them: a bake read the target frozen, 1 m off, "converged"
    ("target disabled", lambda ob, t: setattr(t, "hide_viewport", True), "disabled in viewports"),
    ("target excluded", lambda ob, t: exclude_collection_of(t), "only in excluded or disabled"),
    ("armature disabled", lambda ob, t: setattr(ob, "hide_viewport", True), "armature 'Arm' is"),
    # keys written at the scene's frames into an action played at the strip's (1.5 m off)
    ("NLA tweak mode", lambda ob, t: tweak_pushed_down(ob), "is in tweak mode"),
    # keys mixed with the strips' motion on playback (1.1-2.1 m off)
    ("action at half influence", lambda ob, t: blend_over_nla(ob, "REPLACE", 0.5), "blends with"),
    ("action added to the NLA", lambda ob, t: blend_over_nla(ob, "ADD", 1.0), "Add at influence"),
    # its pose is not evaluated: the chains were solved against the rest pose (1.7 m off)
    (
        "armature in Rest Position",
        lambda ob, t: setattr(ob.data, "pose_position", "REST"),
        "armature 'Arm' shows its Rest Position",
    ),
    ("target bone at rest", lambda ob, t: target_bone_at_rest(ob), "target 'Other' shows its Rest"),
    # the target is animated: its delta transform carries the bad value
    ("target NaN", lambda ob, t: setattr(t, "delta_location", (NAN, 0, 0)), "NaN, infinite or"),
    ("target inf", lambda ob, t: setattr(t, "delta_location", (0, INF, 0)), "NaN, infinite or"),
    ("target 1e30", lambda ob, t: setattr(t, "delta_location", (0, 0, 1e30)), "beyond 1e\\+08"),
    ("armature NaN", lambda ob, t: setattr(ob, "location", (NAN, 0, 0)), "transform of armature"),
    ("armature inf", lambda ob, t: setattr(ob, "scale", (INF, 1, 1)), "transform of"),
    ("armature 1e30", lambda ob, t: setattr(ob, "location", (1e30, 0, 0)), "transform of"),
    ("armature scale 0", lambda ob, t: setattr(ob, "scale", (1, 0, 1)), "scale of zero"),
    (
        "rotation target scale 0",
        lambda ob, t: (setattr(t, "scale", (1, 1, 0)), setattr(goal(ob), "rotation_weight", 1.0)),
        "has a scale of zero on an axis, so no orientation",
    ),
    (
        "fixed bone scale 0",
        lambda ob, t: setattr(ob.pose.bones["b0"], "scale", (1, 0, 1)),
        "'b0' has a NaN, infinite or zero scale pose",
    ),
    (
        "bad solver setting",
        lambda ob, t: (
            setattr(ob.jacobian_ik, "method", "SDLS"),
            setattr(ob.jacobian_ik, "sdls_gamma_max", 0.0),
        ),
        "settings: .*gamma_max",
    ),
]


@pytest.mark.parametrize(("change", "message"), [c[1:] for c in BAD], ids=[c[0] for c in BAD])
def test_bad_input_reports_and_changes_nothing(
    rig: tuple[Any, Any], change: Callable[[Any, Any], Any], message: str
) -> None:
    ob, target = rig
    change(ob, target)
    bpy.context.scene.frame_set(1)
    expect_refused(ob, message)


def test_nan_in_one_frame_of_the_range(rig: tuple[Any, Any]) -> None:
    """An F-curve value gone NaN at frame 12 only: the bake names the frame, writes nothing."""
    ob, target = rig
    fc = next(fc for _, fc in action_fcurves(target.animation_data.action) if fc.array_index == 0)
    fc.keyframe_points[0].interpolation = "CONSTANT"  # frames 1..11 keep frame 1's value
    fc.keyframe_points.insert(12, 0.0).co.y = NAN
    expect_refused(ob, "frame 12: goal 1 \\(b3\\): target 'Target' is NaN", ops=("bake",))


def test_nan_in_a_chain_bone_pose(rig: tuple[Any, Any]) -> None:
    ob, _ = rig
    bpy.context.scene.tool_settings.use_keyframe_insert_auto = True
    ob.pose.bones["b2"].rotation_quaternion = (NAN, 0.0, 0.0, 0.0)
    before = snapshot()
    with pytest.raises(RuntimeError, match="'b2' has a NaN"):
        call("solve", ob)
    assert snapshot() == before


@pytest.mark.parametrize(
    ("start", "end", "message"),
    [(10, 5, "Empty frame range 10..5"), (1, 10_000_000, "10,000,000 frames: a bake is limited")],
)
def test_bad_frame_range(rig: tuple[Any, Any], start: int, end: int, message: str) -> None:
    ob, _ = rig
    before = snapshot()
    with pytest.raises(RuntimeError, match=message):
        call("bake", ob, frame_start=start, frame_end=end)
    assert snapshot() == before


def test_bad_frame_range_scripting(rig: tuple[Any, Any], addon: Any) -> None:
    ob, _ = rig
    before = snapshot()
    with pytest.raises(addon.bridge.RigError, match="the frame range is empty"):
        addon.bridge.run(ob, bpy.context.scene, [])
    with pytest.raises(addon.bridge.RigError, match="limited to 100,000 frames"):
        addon.bridge.run(ob, bpy.context.scene, range(200_001))
    assert snapshot() == before


def test_chain_length_beyond_the_root_is_clamped(rig: tuple[Any, Any], addon: Any) -> None:
    """A chain length past the root is clamped to the root, with a warning (not an error)."""
    ob, target = rig
    goal(ob).chain_length = 10
    report = addon.bridge.run(ob, bpy.context.scene, None, keyframe=False)
    assert report.warnings == [
        "goal 1 (b3): chain length 10 goes beyond the root: clamped to 4 bone(s)"
    ]
    assert (tip(ob, "b3") - target.matrix_world.translation).length < 1e-4
    with override(ob):
        assert bpy.ops.jacobian_ik.solve() == {"FINISHED"}  # the warning goes to the report


def test_zero_length_bone(clean: Any) -> None:
    """Blender 4.4+ keeps a bone whose head is its tail at a minimal length (about 2e-6): a goal
    on it solves like a goal on its head, with finite keys. Blender 4.2 deletes such a bone when
    leaving edit mode: the goal then names a missing bone and is refused."""
    ob = make_armature("Arm", [*chain_bones(3), ("z", (0, 3, 0), (0, 3, 0), "b2", True)])
    target = make_empty("T", (1.5, 1.5, 0.5))
    add_goal(ob, "z", target, rotation_weight=0.5)
    if "z" not in ob.data.bones:
        expect_refused(ob, "'z' is not in armature")
        return
    assert ob.data.bones["z"].length < 1e-5
    assert call("bake", ob, frame_start=1, frame_end=3) == {"FINISHED"}
    for _, fc in action_fcurves(ob.animation_data.action):
        assert all(math.isfinite(k.co.y) for k in fc.keyframe_points)
    assert (tip(ob, "z") - target.location).length < 1e-3


def test_no_active_object(rig: tuple[Any, Any], addon: Any) -> None:
    before = snapshot()
    with bpy.context.temp_override(object=None, active_object=None):
        for op in (bpy.ops.jacobian_ik.solve, bpy.ops.jacobian_ik.bake):
            with pytest.raises(RuntimeError, match="Select an armature object"):
                op()
    with pytest.raises(addon.bridge.RigError, match="not an armature"):
        addon.bridge.run(None, bpy.context.scene)
    assert snapshot() == before


def test_edit_mode(rig: tuple[Any, Any], addon: Any) -> None:
    ob, _ = rig
    bpy.context.view_layer.objects.active = ob
    bpy.ops.object.mode_set(mode="EDIT")
    before = snapshot()
    for op in (bpy.ops.jacobian_ik.solve, bpy.ops.jacobian_ik.bake):
        with override(ob), pytest.raises(RuntimeError, match="Leave edit mode first"):
            op()
    with pytest.raises(addon.bridge.RigError, match="is in edit mode"):
        addon.bridge.run(ob, bpy.context.scene)
    assert snapshot() == before
    bpy.ops.object.mode_set(mode="OBJECT")


# -- library data


def write_library(tmp_path: Any, with_action: bool) -> str:
    """A .blend with collection 'Rig' (armature with a goal, its target)."""
    bpy.ops.wm.read_factory_settings(use_empty=True)
    ob = make_armature("Arm", chain_bones(3))
    target = make_empty("T", (1.5, 1.5, 0.5))
    add_goal(ob, "b2", target)
    if with_action:
        ob.pose.bones["b0"].keyframe_insert("location", frame=1)
    coll = bpy.data.collections.new("Rig")
    bpy.context.scene.collection.children.link(coll)
    for o in (ob, target):
        bpy.context.scene.collection.objects.unlink(o)
        coll.objects.link(o)
    path = str(tmp_path / "library.blend")
    bpy.data.libraries.write(path, {coll}, fake_user=True)
    bpy.ops.wm.read_factory_settings(use_empty=True)
    return path


def link_rig(path: str) -> Any:
    with bpy.data.libraries.load(path, link=True) as (_, dst):
        dst.collections = ["Rig"]
    instance = bpy.data.objects.new("RigInstance", None)
    instance.instance_type = "COLLECTION"
    instance.instance_collection = dst.collections[0]
    bpy.context.scene.collection.objects.link(instance)
    bpy.context.view_layer.objects.active = instance
    return instance


def test_linked_armature(clean: Any, addon: Any, tmp_path: Any) -> None:
    link_rig(write_library(tmp_path, with_action=False))
    ob = bpy.data.objects["Arm"]
    assert ob.library is not None
    before = snapshot()
    for op in (bpy.ops.jacobian_ik.solve, bpy.ops.jacobian_ik.bake):
        with override(ob), pytest.raises(RuntimeError, match="linked from a library"):
            op()
    with pytest.raises(addon.bridge.RigError, match=r"linked from library .*library\.blend"):
        addon.bridge.run(ob, bpy.context.scene, range(1, 5))
    assert snapshot() == before


def make_override(path: str, editable: bool) -> Any:
    instance = link_rig(path)
    coll = instance.instance_collection.override_hierarchy_create(
        bpy.context.scene, bpy.context.view_layer
    )
    ob = next(o for o in coll.objects if o.type == "ARMATURE")
    if editable:
        ob.override_library.is_system_override = False
    bpy.context.view_layer.update()
    return ob


def test_system_override_is_read_only(clean: Any, tmp_path: Any) -> None:
    ob = make_override(write_library(tmp_path, with_action=False), editable=False)
    assert ob.override_library.is_system_override
    expect_refused(ob, "system library override \\(read-only\\)")


def test_override_with_linked_action(clean: Any, tmp_path: Any) -> None:
    ob = make_override(write_library(tmp_path, with_action=True), editable=True)
    assert ob.animation_data.action.library is not None
    expect_refused(ob, "linked from library .*assign a local action")


def test_editable_override_bakes_into_a_local_action(clean: Any, tmp_path: Any) -> None:
    ob = make_override(write_library(tmp_path, with_action=False), editable=True)
    assert call("bake", ob, frame_start=1, frame_end=5) == {"FINISHED"}
    assert ob.animation_data.action.library is None


def test_bake_without_animation_data_creates_the_action(clean: Any) -> None:
    ob = make_armature("Arm", chain_bones(3))
    add_goal(ob, "b2", make_empty("T", (1.5, 1.5, 0.5)))
    assert ob.animation_data is None
    actions = set(bpy.data.actions)
    assert call("bake", ob, frame_start=1, frame_end=4) == {"FINISHED"}
    action = ob.animation_data.action
    assert action is not None and action not in actions
    assert ob.jacobian_ik.last_keys == 4 * 3 * 4


# -- undo: headless, bpy needs an explicit ed.undo_push() to create the undo stack, operators
# called with undo=True (bpy.ops.x('EXEC_DEFAULT', True)) to push their step, and ed.undo in a
# window + screen context.


def undo() -> None:
    window = bpy.context.window_manager.windows[0]
    with bpy.context.temp_override(window=window, screen=window.screen):
        assert bpy.ops.ed.undo() == {"FINISHED"}


@pytest.mark.parametrize("op", ["solve", "bake"])
def test_one_undo_restores_pose_and_keys(rig: tuple[Any, Any], op: str) -> None:
    ob, _ = rig
    bpy.context.scene.tool_settings.use_keyframe_insert_auto = True
    bpy.ops.ed.undo_push(message="before")
    before = snapshot()
    with override(ob):
        if op == "bake":
            assert bpy.ops.jacobian_ik.bake("EXEC_DEFAULT", True, frame_start=5, frame_end=25)
        else:
            assert bpy.ops.jacobian_ik.solve("EXEC_DEFAULT", True) == {"FINISHED"}
    assert snapshot() != before
    undo()
    assert snapshot() == before
    assert bpy.data.objects["Arm"].jacobian_ik.last_frames == 0


# -- determinism and chunks


def baked_values(ob: Any) -> dict[tuple[str, int], np.ndarray]:
    out = {}
    for _, fc in action_fcurves(ob.animation_data.action):
        if fc.data_path.endswith("rotation_quaternion"):
            co = np.empty(2 * len(fc.keyframe_points))
            fc.keyframe_points.foreach_get("co", co)
            out[fc.data_path, fc.array_index] = co.reshape(-1, 2)
    return out


def converge_bake(frames: range, chunk: int | None = None, monkeypatch: Any = None) -> Any:
    bpy.ops.wm.read_factory_settings(use_empty=True)
    ob, _ = busy_rig(key_every=1)
    if chunk is not None:
        monkeypatch.setattr(sys.modules["jacobian_ik.bridge.run"], "CHUNK_FRAMES", chunk)
    assert call("bake", ob, frame_start=frames[0], frame_end=frames[-1], mode="CONVERGE")
    return baked_values(ob)


def assert_same(a: dict[Any, np.ndarray], b: dict[Any, np.ndarray], atol: float) -> None:
    assert a.keys() == b.keys()
    for key in a:
        np.testing.assert_allclose(a[key], b[key], rtol=0, atol=atol, err_msg=str(key))


def no_flip_repair(monkeypatch: Any) -> None:
    """Bakes without the flip repair and the smoothing (``Settings.flip_angle`` and
    ``smooth_passes`` 0; solvers/flips.py, solvers/smooth.py)."""
    run = sys.modules["jacobian_ik.bridge.run"]
    settings = run.solver_settings
    monkeypatch.setattr(
        run,
        "solver_settings",
        lambda props, mode=None: replace(settings(props, mode), flip_angle=0.0, smooth_passes=0),
    )


def test_converge_bake_equals_frame_by_frame_in_any_order(clean: Any, monkeypatch: Any) -> None:
    frames = range(1, 31)
    baked = converge_bake(frames)
    assert_same(converge_bake(frames), baked, atol=0.0)  # two runs: identical
    # chunked: identical (the flip repair runs once over the joined chunks)
    assert_same(converge_bake(frames, 7, monkeypatch), baked, atol=0.0)
    # frame by frame, a frame has no neighbours and is not repaired or smoothed: the bake
    # without its flip repair and smoothing is what its frames solved one by one give (with
    # them, see test_flip_repair_in_bakes and tests/solvers/test_smooth.py)
    no_flip_repair(monkeypatch)
    baked = converge_bake(frames)
    # the chain is keyed on every frame, so a frame's start pose is its own key whatever order
    # the frames are solved in (keys between two keys would move with their neighbours)
    for order in (list(frames), random.Random(7).sample(list(frames), len(frames))):
        bpy.ops.wm.read_factory_settings(use_empty=True)
        ob, _ = busy_rig(key_every=1)
        ob.jacobian_ik.mode = "CONVERGE"
        bpy.context.scene.tool_settings.use_keyframe_insert_auto = True
        for frame in order:  # every frame starts from its keyed pose, as in the bake
            bpy.context.scene.frame_set(frame)
            assert call("solve", ob) == {"FINISHED"}
        assert_same(baked_values(ob), baked, atol=1e-9)


def bone_jumps(values: dict[tuple[str, int], np.ndarray], angle: float) -> int:
    """Steps between consecutive keys where a bone's rotation turns by more than ``angle``."""
    bones = sorted({path for path, _ in values})
    count = 0
    for path in bones:
        q = np.stack([values[path, i][:, 1] for i in range(4)], axis=1)
        q /= np.linalg.norm(q, axis=1, keepdims=True)
        dot = np.abs(np.sum(q[:-1] * q[1:], axis=1))
        count += int(np.sum(2 * np.arccos(np.clip(dot, -1.0, 1.0)) > angle))
    return count


def test_flip_repair_in_bakes(clean: Any, monkeypatch: Any) -> None:
    """The busy rig's chain, every frame solved from its own keyed pose, flips between frames;
    the bake's flip repair (solvers/flips.py) re-solves those frames from their neighbours:
    fewer bone steps over 10 degrees, every goal as close (the tip on the target where it was)."""
    frames = range(1, 31)

    def goal_errors() -> tuple[float, float]:
        goal = bpy.data.objects["Arm"].jacobian_ik.goals[0]
        return goal.error, goal.error_mean

    repaired = converge_bake(frames)
    repaired_errors = goal_errors()
    no_flip_repair(monkeypatch)
    plain = converge_bake(frames)
    plain_errors = goal_errors()
    before, after = bone_jumps(plain, math.radians(10)), bone_jumps(repaired, math.radians(10))
    assert before > 0
    assert after < before, (before, after)
    assert repaired_errors[0] <= max(plain_errors[0], 1e-5) + 1e-6  # the solver's tolerance
    assert repaired_errors[1] <= plain_errors[1] + 1e-6


def test_track_bake_continues_across_chunks(clean: Any, monkeypatch: Any) -> None:
    """Track mode starts each chunk from the previous chunk's last frame and carries the method's
    state on (solve's resume): the keys equal the unchunked ones."""
    frames = range(1, 31)
    ob, _ = busy_rig()
    assert call("bake", ob, frame_start=1, frame_end=30, mode="TRACK")
    whole = baked_values(ob)
    bpy.ops.wm.read_factory_settings(use_empty=True)
    monkeypatch.setattr(sys.modules["jacobian_ik.bridge.run"], "CHUNK_FRAMES", 7)
    ob, _ = busy_rig()
    assert call("bake", ob, frame_start=frames[0], frame_end=frames[-1], mode="TRACK")
    assert_same(baked_values(ob), whole, atol=1e-9)


def test_cancelled_bake_writes_nothing(rig: tuple[Any, Any], addon: Any, monkeypatch: Any) -> None:
    ob, _ = rig
    monkeypatch.setattr(sys.modules["jacobian_ik.bridge.run"], "CHUNK_FRAMES", 5)
    bpy.context.scene.frame_set(3)
    before = snapshot()
    seen: list[float] = []

    def progress(fraction: float) -> bool:
        seen.append(fraction)
        return fraction > 0.5  # cancel in the middle, after 4 of 6 chunks

    with pytest.raises(addon.bridge.Cancelled, match="nothing was written"):
        addon.bridge.run(ob, bpy.context.scene, range(1, 31), progress=progress)
    assert seen == pytest.approx([0.15, 0.3, 0.45, 0.6])
    assert snapshot() == before
    # cancelling at the last chunk, once every frame is solved, still writes nothing
    with pytest.raises(addon.bridge.Cancelled):
        addon.bridge.run(ob, bpy.context.scene, range(1, 31), progress=lambda x: x >= 0.9)
    assert snapshot() == before


# -- nothing outside the request changes

FREE = bpy.types.Keyframe.bl_rna.properties["handle_left_type"].enum_items["FREE"].value


def test_bake_10_20_changes_only_the_chain_keys_inside(rig: tuple[Any, Any]) -> None:
    ob, _ = rig
    other_ob = make_empty("Other", (0.0, 0.0, 0.0))
    other_ob.keyframe_insert("location", frame=3)
    other_ob.keyframe_insert("location", frame=25)
    for _, fc in action_fcurves(ob.animation_data.action):
        for k in fc.keyframe_points:
            if k.co.x in (4.0, 25.0):  # hand-set handles, next to and away from the range
                k.handle_left_type = k.handle_right_type = "FREE"
                k.handle_left.y += 0.01
    before = snapshot()
    action_name = ob.animation_data.action.name
    baked = {f'pose.bones["b{i}"].rotation_quaternion' for i in (1, 2, 3)}

    assert call("bake", ob, frame_start=10, frame_end=20) == {"FINISHED"}
    after = snapshot()

    assert after["frame"] == before["frame"]
    assert after["objects"] == before["objects"]  # poses, NLA, drivers, constraints, actions
    for name in before["actions"]:
        if name != action_name:
            assert after["actions"][name] == before["actions"][name], name
    curves_before, curves_after = before["actions"][action_name], after["actions"][action_name]
    assert curves_after.keys() == curves_before.keys()
    for key, old in curves_before.items():
        new = curves_after[key]
        if key[1] not in baked:
            assert new == old, key
            continue
        old_x, new_x = (np.frombuffer(c["keys"]["co"], np.float32)[0::2] for c in (old, new))
        keep_old, keep_new = ((x < 10) | (x > 20) for x in (old_x, new_x))
        assert list(new_x[~keep_new]) == list(range(10, 21))
        for attr in ("co", "interpolation", "handle_left_type", "handle_right_type", "type"):
            width = 2 if attr == "co" else 1
            dtype = np.float32 if attr == "co" else np.int32
            o = np.frombuffer(old["keys"][attr], dtype).reshape(-1, width)[keep_old]
            n = np.frombuffer(new["keys"][attr], dtype).reshape(-1, width)[keep_new]
            assert o.tobytes() == n.tobytes(), (key, attr)
        # handles too, except automatic ones: Blender recomputes them from the new neighbours
        # (with 'Continuous Acceleration' smoothing, the default, along the whole curve)
        types = np.frombuffer(old["keys"]["handle_left_type"], np.int32)
        free = types == FREE
        assert np.any(free[keep_old])
        for attr in ("handle_left", "handle_right"):
            o = np.frombuffer(old["keys"][attr], np.float32).reshape(-1, 2)[keep_old & free]
            n = np.frombuffer(new["keys"][attr], np.float32).reshape(-1, 2)[keep_new][
                free[keep_old]
            ]
            assert o.tobytes() == n.tobytes(), (key, attr)
    assert os.environ["HOME"]  # the throwaway HOME of conftest


def test_long_bake_benchmark_runs(clean: Any, capsys: Any) -> None:
    """A small run of benchmarks/long_bake.py, so the benchmark cannot rot."""
    spec = importlib.util.spec_from_file_location("long_bake", ROOT / "benchmarks" / "long_bake.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.main(["--frames", "12"]) == 0
    assert "| 12 |" in capsys.readouterr().out
