"""Rigify: ``jacobian_ik.bake_rigify_fk`` keys a generated rig's FK controls so the limbs, switched
to FK, play back what the IK controls did; chains by name on the same rig (the rig is generated
once per module and saved; each test opens the file)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import addon_utils
import bpy
import numpy as np
import pytest
from blender_helpers import add_goal, make_empty, override

FRAMES = range(1, 6)
TIPS = ("DEF-hand.L", "DEF-hand.R", "DEF-foot.L", "DEF-foot.R", "DEF-toe.L", "DEF-toe.R")
SWITCHES = ("upper_arm_parent.L", "upper_arm_parent.R", "thigh_parent.L", "thigh_parent.R")
IK_CONTROLS = ("hand_ik.L", "hand_ik.R", "foot_ik.L", "foot_ik.R", "toe_ik.L")


@pytest.fixture(scope="module")
def rigify_file(addon: ModuleType, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A generated human rig whose IK controls move over FRAMES (the limbs in IK)."""
    bpy.ops.wm.read_factory_settings(use_empty=True)
    addon_utils.enable("rigify", default_set=True)
    bpy.ops.object.armature_human_metarig_add()
    bpy.ops.pose.rigify_generate()
    rig = bpy.data.objects["rig"]
    rng = np.random.default_rng(12)
    for name in SWITCHES:
        rig.pose.bones[name]["IK_FK"] = 0.0
    for name in IK_CONTROLS:
        pb = rig.pose.bones[name]
        for frame in (FRAMES[0], FRAMES[-1] + 2):  # keys beyond the range: curves move inside
            pb.location = rng.uniform(-0.08, 0.08, 3)
            pb.rotation_quaternion = (1.0, *rng.uniform(-0.3, 0.3, 3))
            pb.keyframe_insert("location", frame=frame)
            pb.keyframe_insert("rotation_quaternion", frame=frame)
    rig.update_tag()
    bpy.context.scene.frame_set(FRAMES[0])
    path = tmp_path_factory.mktemp("rigify_fk") / "rig.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(path), copy=True)
    yield path
    addon_utils.disable("rigify", default_set=True)


@pytest.fixture
def rig(rigify_file: Path) -> Any:
    bpy.ops.wm.open_mainfile(filepath=str(rigify_file))
    bpy.context.view_layer.update()
    return bpy.data.objects["rig"]


def tails(ob: Any, frames: range) -> np.ndarray:
    """(F, len(TIPS), 3) world tails of the DEF hands, feet and toes, played back."""
    out = []
    for frame in frames:
        bpy.context.scene.frame_set(frame)
        out.append([np.array(ob.matrix_world @ ob.pose.bones[n].tail) for n in TIPS])
    return np.array(out)


def fk_fcurves(ob: Any) -> dict[tuple[str, int], list[tuple[float, float]]]:
    from jacobian_ik.bridge.write import object_fcurves

    return {
        (fc.data_path, fc.array_index): [tuple(k.co) for k in fc.keyframe_points]
        for fc in object_fcurves(ob)
    }


def test_bake_follows_the_ik_on_playback(rig: Any) -> None:
    ik = tails(rig, FRAMES)
    assert np.ptp(ik, axis=0).max() > 0.03  # the IK controls really move the limbs
    hand = rig.pose.bones["hand_fk.L"]
    hand.rotation_quaternion = (0.9, 0.1, 0.2, 0.3)
    hand.keyframe_insert("rotation_quaternion", frame=20)  # outside the range: kept
    fk_before = tails(rig, range(20, 21))
    with override(rig):
        result = bpy.ops.jacobian_ik.bake_rigify_fk(
            frame_start=FRAMES[0], frame_end=FRAMES[-1], limbs={"ARM_L", "ARM_R", "LEG_L", "LEG_R"}
        )
    assert result == {"FINISHED"}
    assert all(rig.pose.bones[n]["IK_FK"] == 1.0 for n in SWITCHES)
    fk = tails(rig, FRAMES)
    assert np.abs(fk - ik).max() < 1e-4, np.abs(fk - ik).max()
    # the key at frame 20 is untouched, and so is the pose it gives there
    curves = fk_fcurves(rig)
    w_curve = curves[('pose.bones["hand_fk.L"].rotation_quaternion', 0)]
    assert [k for k in w_curve if k[0] == 20.0] == [(20.0, pytest.approx(0.9, abs=1e-6))]
    assert np.abs(tails(rig, range(20, 21)) - fk_before).max() > 1e-3  # not the IK there
    # only FK controls were keyed, each on every frame of the range
    keyed = {p.split('"')[1] for p, _ in curves if p.startswith("pose.bones")}
    fk_names = {f"{p}_fk.{s}" for p in ("upper_arm", "forearm", "hand") for s in "LR"}
    fk_names |= {f"{p}_fk.{s}" for p in ("thigh", "shin", "foot", "toe") for s in "LR"}
    assert keyed == fk_names | set(IK_CONTROLS)
    for (path, _), keys in curves.items():
        if path.split('"')[1] in fk_names and path.endswith("rotation_quaternion"):
            assert {k[0] for k in keys} >= {float(f) for f in FRAMES}


def test_bake_one_limb_keyed_switch(rig: Any) -> None:
    """An animated switch is keyed to FK inside the range only; other limbs are untouched."""
    switch = rig.pose.bones["upper_arm_parent.L"]
    switch.keyframe_insert('["IK_FK"]', frame=FRAMES[0])
    switch["IK_FK"] = 0.0
    switch.keyframe_insert('["IK_FK"]', frame=30)
    ik = tails(rig, FRAMES)
    with override(rig):
        assert bpy.ops.jacobian_ik.bake_rigify_fk(
            frame_start=FRAMES[0], frame_end=FRAMES[-1], limbs={"ARM_L"}
        ) == {"FINISHED"}
    curves = fk_fcurves(rig)
    switch_keys = dict(curves[('pose.bones["upper_arm_parent.L"]["IK_FK"]', 0)])
    assert [switch_keys[float(f)] for f in FRAMES] == [1.0] * len(FRAMES)
    assert switch_keys[30.0] == 0.0
    assert not any("hand_fk.R" in p or "thigh_fk" in p for p, _ in curves)
    fk = tails(rig, FRAMES)
    assert np.abs(fk[:, 0] - ik[:, 0]).max() < 1e-4
    assert rig.pose.bones["upper_arm_parent.R"]["IK_FK"] == 0.0


def test_bad_input_writes_nothing(rig: Any) -> None:
    before = fk_fcurves(rig)
    cases = [
        ({"limbs": set()}, "no limb chosen"),
        ({"frame_start": 5, "frame_end": 4}, "Empty frame range 5..4"),
    ]
    with override(rig):
        for kwargs, message in cases:
            with pytest.raises(RuntimeError, match=message):
                bpy.ops.jacobian_ik.bake_rigify_fk(**{"frame_start": 1, "frame_end": 3, **kwargs})
        rig.data.bones["hand_fk.R"].name = "hand_fk_renamed.R"
        with pytest.raises(RuntimeError, match=r"has no bone\(s\) hand_fk.R"):
            bpy.ops.jacobian_ik.bake_rigify_fk(frame_start=1, frame_end=3)
    assert fk_fcurves(rig) == before
    assert all(rig.pose.bones[n]["IK_FK"] == 0.0 for n in SWITCHES)
    meta = bpy.data.objects["metarig"]
    with override(meta), pytest.raises(RuntimeError, match="not a generated Rigify rig"):
        bpy.ops.jacobian_ik.bake_rigify_fk(frame_start=1, frame_end=3)
    assert meta.animation_data is None or meta.animation_data.action is None


def test_chain_root_through_the_locked_mch_bone(rig: Any, addon: ModuleType) -> None:
    """hand_fk.L from upper_arm_fk.L: the chain names MCH-hand_fk.L and reaches the target."""
    for name in SWITCHES:
        rig.pose.bones[name]["IK_FK"] = 1.0
    target = make_empty("T", (0.0, 0.0, 0.0))
    hand = rig.pose.bones["hand_fk.L"]
    upper = rig.pose.bones["upper_arm_fk.L"]
    upper.rotation_quaternion = (0.9, 0.3, 0.1, 0.2)  # a place only the upper arm reaches
    bpy.context.view_layer.update()
    target.location = rig.matrix_world @ hand.tail
    upper.rotation_quaternion = (1.0, 0.0, 0.0, 0.0)
    goal = add_goal(rig, "hand_fk.L", target, chain_length=3)
    report = addon.bridge.run(rig, bpy.context.scene, None, keyframe=False)
    assert any("MCH-hand_fk.L" in w for w in report.warnings)
    assert report.position_error.max() > 1e-3  # 3 bones: hand, MCH (locked), forearm
    goal.chain_root = "upper_arm_fk.L"
    report = addon.bridge.run(rig, bpy.context.scene, None, keyframe=False)
    assert report.position_error.max() < 1e-5
    assert addon.bridge.rig.chain_length(rig, goal) == 4


def test_leg_without_an_fk_toe_bakes_down_to_the_foot(rig: Any, addon: ModuleType) -> None:
    """Without Rigify's "Extra IK Toe" a leg has one toe control for IK and FK (no toe_fk)."""
    rig.data.bones["toe_fk.L"].name = "toe.L"

    def foot_tails() -> np.ndarray:  # DEF-foot stretches to the toe: the ORG foot instead
        out = []
        for frame in FRAMES:
            bpy.context.scene.frame_set(frame)
            out.append(np.array(rig.matrix_world @ rig.pose.bones["ORG-foot.L"].tail))
        return np.array(out)

    ik = foot_tails()
    report = addon.bridge.rigify.bake_fk(rig, bpy.context.scene, FRAMES, {"LEG_L"})
    assert report.warnings == [
        "toe_fk.L: not in the rig (Rigify's Extra IK Toe off), so the toe control is shared "
        "by IK and FK and not baked"
    ]
    keyed = {p.split('"')[1] for p, _ in fk_fcurves(rig)}
    assert {"thigh_fk.L", "shin_fk.L", "foot_fk.L"} <= keyed and "toe.L" not in keyed
    assert np.abs(foot_tails() - ik).max() < 1e-4


LIMB_ROOTS = {"hand_ik.L": "upper_arm_ik.L", "hand_ik.R": "upper_arm_ik.R"}
LIMB_ROOTS |= {"foot_ik.L": "thigh_ik.L", "foot_ik.R": "thigh_ik.R"}


def reach_out(rig: Any, distance: float) -> None:
    """The arms' and legs' IK controls moved ``distance`` farther from their limbs' roots at
    each of their keys: beyond the limbs' reach, where Rigify's IK stretches them."""
    from jacobian_ik.bridge.write import object_fcurves

    keyed = sorted({int(k.co[0]) for fc in object_fcurves(rig) for k in fc.keyframe_points})
    for frame in keyed:
        bpy.context.scene.frame_set(frame)
        for control, root in LIMB_ROOTS.items():
            pb = rig.pose.bones[control]
            m = pb.matrix.copy()
            away = m.translation - rig.pose.bones[root].head
            m.translation += away.normalized() * distance
            pb.matrix = m
            pb.keyframe_insert("location", frame=frame)


GOALS = {"MCH-forearm_ik.L": "MCH-upper_arm_ik_target.L"}
GOALS |= {"MCH-forearm_ik.R": "MCH-upper_arm_ik_target.R"}
GOALS |= {"MCH-shin_ik.L": "MCH-thigh_ik_target.L", "MCH-shin_ik.R": "MCH-thigh_ik_target.R"}


def goal_errors(ob: Any, frames: range) -> np.ndarray:
    """(F, 4) distances from the IK chains' tips to their targets' heads, played back."""
    out = []
    for frame in frames:
        bpy.context.scene.frame_set(frame)
        pbs = ob.pose.bones
        out.append([(pbs[tip].tail - pbs[target].head).length for tip, target in GOALS.items()])
    return np.array(out)


@pytest.mark.parametrize("beyond", [0.0, 0.25])
def test_imported_ik_constraints_bake_what_blenders_ik_does(rig: Any, beyond: float) -> None:
    """Import IK Constraints on the generated rig, then bake: the IK chains' tips play back on
    their targets and the DEF hands, feet and toes where Blender's IK put them, also with the
    IK controls pulled ``beyond`` the limbs' reach, where Rigify's IK Stretch (0.1 on its IK
    bones) stretches them, keyed as Blender's IK scales a stretched bone: uniformly (a scale
    along Y alone sheared the forearms and shins: hands and feet 0.1-0.3 m off). Blender's IK
    leaves the tips up to 2.3e-4 off their targets (ours 1e-5): 3e-4 against its DEF tails.
    Rigify locks the rotation of the IK chains' MCH bones (``MCH-shin_ik.L``: Lock Rotation
    on X, Y, Z, only Y and Z IK-locked), which its IK turns anyway: imported goals heed only
    the IK locks (``use_transform_locks`` off)."""
    if beyond:
        reach_out(rig, beyond)
    blender = tails(rig, FRAMES)
    assert goal_errors(rig, FRAMES).max() < 3e-4  # Blender's IK: 0.9-2.3e-4 here
    bpy.context.scene.frame_set(FRAMES[0])
    with override(rig):
        assert bpy.ops.jacobian_ik.import_constraints() == {"FINISHED"}
        assert not any(g.use_transform_locks for g in rig.jacobian_ik.goals)
        assert bpy.ops.jacobian_ik.bake(frame_start=FRAMES[0], frame_end=FRAMES[-1]) == {"FINISHED"}
    if beyond:  # the limbs did stretch
        stretched = rig.pose.bones["MCH-forearm_ik.L"]
        assert stretched.length > 1.02 * stretched.bone.length
    assert goal_errors(rig, FRAMES).max() < 2e-5
    ours = tails(rig, FRAMES)
    assert np.abs(ours - blender).max() < 3e-4, np.abs(ours - blender).max(axis=(0, 2))
