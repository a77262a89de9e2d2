"""Bakes are bit-identical across processes, baking again gives the same keys, and a baked rig
plays back identically pass after pass: on a humanoid whose IK chains overlap with different
roots (hands through the spine, the head through the chest), where Blender 5.0 evaluates
differently from one pass to the next while the IK constraints exist (even muted): Import IK
Constraints removes them (stashed)."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path
from typing import Any

import bpy
import numpy as np
import pytest
from blender_helpers import ROOT, override

from tests.rigs.scenes import build_zoo, zoo_spec
from tests.rigs.zoo_rigs import Goal, humanoid

FRAMES = 12


def overlapping_humanoid() -> Any:
    rig = humanoid(np.random.default_rng(4), "overlap", 4)
    rig.goals = [
        Goal("hand.L", 6, 0.5),  # to the spine, with an orientation goal
        Goal("hand.R", 6),
        Goal("foot.L", 3),
        Goal("foot.R", 3),
        Goal("head", 3),  # to the chest: overlaps the hands' chains, another root
    ]
    spec, _ = zoo_spec(rig, FRAMES)
    ob, _ = build_zoo(rig, spec, FRAMES)
    return ob


@pytest.mark.parametrize("lean", [False, True])
def test_the_same_file_bakes_bit_identical_keys_in_two_processes(
    clean: Any, tmp_path: Path, lean: bool
) -> None:
    overlapping_humanoid()
    blend = tmp_path / "rig.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(blend), copy=True)
    outs = []
    for k in range(2):
        out = tmp_path / f"keys{k}.npz"
        proc = subprocess.run(
            [
                sys.executable,
                str(ROOT / "tests/blender/bake_keys.py"),
                str(blend),
                str(FRAMES),
                str(out),
                *(["lean"] if lean else []),
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        outs.append(dict(np.load(out)))
    a, b = outs
    assert sorted(a) == sorted(b) and len(a) >= 2 * 4 * 13  # rotation channels of 13+ bones
    for key in a:
        if not lean and not key.endswith(" types"):
            assert a[key].shape == (6 * FRAMES,), key
        assert a[key].tobytes() == b[key].tobytes(), key
    if lean:  # fewer keys than frames somewhere, and a corner (FREE handles) somewhere
        assert any(a[k].size < 6 * FRAMES for k in a if not k.endswith(" types"))
        assert any("FREE" in a[k] for k in a if k.endswith(" types"))


def test_a_baked_rig_plays_back_identically_pass_after_pass(clean: Any) -> None:
    ob = overlapping_humanoid()
    with override(ob):
        assert bpy.ops.jacobian_ik.import_constraints() == {"FINISHED"}
        assert bpy.ops.jacobian_ik.bake(frame_start=1, frame_end=FRAMES) == {"FINISHED"}
    assert not any(c.type == "IK" for pb in ob.pose.bones for c in pb.constraints)
    scene = bpy.context.scene
    passes = []
    for _ in range(3):
        buf = np.empty((FRAMES, len(ob.pose.bones) * 16), dtype=np.float32)
        for f in range(FRAMES):
            scene.frame_set(f + 1)
            ob.pose.bones.foreach_get("matrix", buf[f])
        passes.append(buf)
    assert np.ptp(passes[0], axis=0).max() > 0.1  # the rig moves
    for p in passes[1:]:
        assert p.tobytes() == passes[0].tobytes()


def _keys(ob: Any) -> dict[str, bytes]:
    out = {}
    for fc in _addon().bridge.write.object_fcurves(ob):
        co = np.empty(2 * len(fc.keyframe_points), dtype=np.float32)
        fc.keyframe_points.foreach_get("co", co)
        out[f"{fc.data_path}[{fc.array_index}]"] = co.tobytes()
    return out


def _bake(ob: Any, first: int = 1, last: int = FRAMES) -> dict[str, bytes]:
    with override(ob):
        assert bpy.ops.jacobian_ik.bake(frame_start=first, frame_end=last) == {"FINISHED"}
    return _keys(ob)


def _addon() -> Any:
    return sys.modules["jacobian_ik"]


def _chains(ob: Any) -> list[str]:
    return sorted({n for g in ob.jacobian_ik.goals for n in _addon().bridge.rig.chain_names(ob, g)})


def _animate_chains(ob: Any) -> None:
    """FK keys on every chain bone (the starts a bake reads), turning over the range."""
    rng = np.random.default_rng(7)
    for name in _chains(ob):
        pb = ob.pose.bones[name]
        pb.rotation_mode = "XYZ"
        for frame in (1, FRAMES):
            pb.rotation_euler = rng.uniform(-0.3, 0.3, 3)
            pb.keyframe_insert("rotation_euler", frame=frame)


@pytest.mark.parametrize("animated", [False, True])
def test_baking_again_gives_the_same_keys(clean: Any, animated: bool) -> None:
    """A second bake starts where the first started (bridge/starts.py), not from the first's
    keys: before, every channel changed (by up to 1.6 here; 0.49 m on a 250-frame humanoid)."""
    ob = overlapping_humanoid()
    with override(ob):
        assert bpy.ops.jacobian_ik.import_constraints() == {"FINISHED"}
    if animated:
        _animate_chains(ob)
    first = _bake(ob)
    assert _bake(ob) == first
    _bake(ob, 4, 8)  # a part of the range, then the whole again: the whole's keys
    assert _bake(ob) == first


def test_a_baked_key_edited_since_makes_its_bone_start_from_its_channels(clean: Any) -> None:
    starts, write = clean.bridge.starts, clean.bridge.write
    ob = overlapping_humanoid()
    with override(ob):
        assert bpy.ops.jacobian_ik.import_constraints() == {"FINISHED"}
    _bake(ob)
    names = _chains(ob)
    assert sorted(starts.Recalled.load(ob, names).bones) == names
    edited = names[0]
    fc = next(c for c in write.object_fcurves(ob) if f'"{edited}"' in c.data_path)
    fc.keyframe_points[5].co.y += 0.1
    kept = starts.Recalled.load(ob, names).bones
    assert sorted(kept) == names[1:]  # the others still start where the bake started
    # a record damaged by hand (or by a script) is not one: its bone starts from its channels
    slot = next(iter(ob.animation_data.action[starts.KEY].values()))
    slot[names[1]]["width"] = 7
    slot[names[2]]["rows"] = [99]
    del slot[names[3]]["starts"]
    assert sorted(starts.Recalled.load(ob, names).bones) == names[4:]
    _bake(ob)  # and baking goes on, writing new records
    assert sorted(starts.Recalled.load(ob, names).bones) == names


def test_a_bone_between_chains_starts_from_its_channels_whatever_the_chain_above(
    clean: Any,
) -> None:
    """Its evaluated matrix relative to its parent's carries float32 round-off of the parent's
    pose: read under a bake's own keys instead of the pose before, it started 1e-8 elsewhere
    (the shoulders of a 250-frame humanoid), enough to change a bake repeated from the first
    one's starts by 8e-6."""
    from blender_helpers import add_goal, chain_bones, make_armature, make_empty

    bridge = clean.bridge
    ob = make_armature("Arm", chain_bones(3))
    add_goal(ob, "b0", make_empty("T0", (0.3, 0.9, 0.2)), chain_length=1)
    add_goal(ob, "b2", make_empty("T2", (0.5, 2.5, 0.4)), chain_length=1)
    ob.pose.bones["b1"].rotation_mode = "XYZ"
    ob.pose.bones["b1"].rotation_euler = (0.3, -0.7, 1.1)
    model = importlib.import_module(f"{clean.__name__}.bridge.run").prepare(ob).model
    b1 = model.names.index("b1")
    assert b1 not in model.free
    read = []
    for angles in ((0.0, 0.0, 0.0), (0.41, 1.37, -0.93)):
        ob.pose.bones["b0"].rotation_mode = "XYZ"
        ob.pose.bones["b0"].rotation_euler = angles
        bpy.context.view_layer.update()
        data = bridge.rig.read_frames(ob, model, [1], lambda _f: None)
        read.append(data.pose.rotations[0, b1])
    basis = np.array(ob.pose.bones["b1"].matrix_basis, dtype=np.float64)[:3, :3]
    assert read[0].tobytes() == read[1].tobytes()
    assert read[0].tobytes() == bridge.polar.nearest_rotation(basis[None])[0].tobytes()


@pytest.mark.parametrize("balance", [False, True])
def test_baking_again_with_the_hips_moved_gives_the_same_keys(clean: Any, balance: bool) -> None:
    """``move_root`` keys the hips' location too: a second bake started from it moved the hips
    4.6 mm before the record kept their start locations. With ``balance`` the centre of mass
    lumped the bones off the chains at offsets read from the evaluated pose, whose float32
    round-off changed a second bake's keys by 3e-7."""
    from test_body_goals import humanoid as body
    from test_body_goals import reach_forward

    ob, targets = body(move_root=True, balance=balance)
    reach_forward(targets, frames=8)
    first = _bake(ob, 1, 8)
    assert any('"hips"].location' in path for path in first)
    assert _bake(ob, 1, 8) == first


def test_solving_a_baked_frame_starts_from_its_keys(clean: Any) -> None:
    """Solve (one frame) starts from the channels, not from where the bake started: from
    there it found another pose than the baked one (pose matrices 1.9 apart here)."""
    ob = overlapping_humanoid()
    with override(ob):
        assert bpy.ops.jacobian_ik.import_constraints() == {"FINISHED"}
    _bake(ob)
    names = _chains(ob)
    for frame in range(1, FRAMES + 1):
        bpy.context.scene.frame_set(frame)
        before = np.array([ob.pose.bones[n].matrix_basis for n in names])
        with override(ob):
            assert bpy.ops.jacobian_ik.solve() == {"FINISHED"}
        after = np.array([ob.pose.bones[n].matrix_basis for n in names])
        assert np.abs(after - before).max() < 0.25, frame  # (frames in conflict creep: 0.07)
