"""Chains by name: ``goal.chain_root`` picks the chain's top bone; bones locked in every axis are
named in the report (they count toward ``chain_length``, as in Blender's IK)."""

from __future__ import annotations

from typing import Any

import bpy
import numpy as np
import pytest
from blender_helpers import add_goal, chain_bones, make_armature, make_empty, override, tip


def _locked_middle(clean: Any) -> tuple[Any, Any]:
    """b0-b1-b2-b3 along +Y, b2 locked in every axis (like Rigify's MCH-hand_fk)."""
    ob = make_armature("Arm", chain_bones(4))
    pb = ob.pose.bones["b2"]
    pb.lock_ik_x = pb.lock_ik_y = pb.lock_ik_z = True
    target = make_empty("T", (1.2, 2.5, 0.4))
    return ob, target


def test_chain_root_frees_exactly_the_named_chain(clean: Any) -> None:
    ob, target = _locked_middle(clean)
    goal = add_goal(ob, "b3", target, chain_length=2)
    # length 2 is b3 and the locked b2: nothing reaches, b0/b1 stay put
    run = clean.bridge.run
    report = run(ob, bpy.context.scene, None, keyframe=False)
    assert report.position_error.max() > 0.1
    assert any("b2" in w and "locked" in w for w in report.warnings)
    assert ob.pose.bones["b1"].rotation_quaternion[0] == pytest.approx(1.0)

    goal.chain_root = "b1"  # b3, b2 (locked), b1: chain_length is ignored
    report = run(ob, bpy.context.scene, None, keyframe=False)
    assert report.position_error.max() < 1e-5
    assert (tip(ob, "b3") - target.location).length < 1e-4
    assert ob.pose.bones["b0"].rotation_quaternion[0] == pytest.approx(1.0)
    assert ob.pose.bones["b1"].rotation_quaternion[0] != pytest.approx(1.0)
    assert [w for w in report.warnings if "locked" in w] == [
        "goal 1 (b3): locked in every axis, so never moved: b2 "
        "(counted in the chain length, as in Blender's IK)"
    ]
    # the same chain by count: locked bones count, so b3 b2 b1 is 3
    assert clean.bridge.rig.chain_length(ob, goal) == 3
    assert clean.bridge.rig.chain_names(ob, goal) == ["b3", "b2", "b1"]


def test_chain_root_not_a_parent_is_refused(clean: Any) -> None:
    ob = make_armature("Arm", [*chain_bones(3), *chain_bones(2, prefix="c")])
    target = make_empty("T", (1.0, 1.0, 0.5))
    goal = add_goal(ob, "b2", target, chain_root="c0")
    before = [tuple(pb.rotation_quaternion) for pb in ob.pose.bones]
    with override(ob):
        with pytest.raises(
            RuntimeError, match=r"chain root 'c0' is not 'b2' or one of its parents"
        ):
            bpy.ops.jacobian_ik.solve()
        goal.chain_root = "nope"
        with pytest.raises(RuntimeError, match="chain root 'nope' is not in armature"):
            bpy.ops.jacobian_ik.bake(frame_start=1, frame_end=3)
    assert [tuple(pb.rotation_quaternion) for pb in ob.pose.bones] == before
    assert ob.animation_data is None or ob.animation_data.action is None


def test_chain_root_is_the_goal_bone(clean: Any) -> None:
    ob = make_armature("Arm", chain_bones(3))
    target = make_empty("T", (0.5, 2.5, 0.0))
    goal = add_goal(ob, "b2", target, chain_root="b2")
    report = clean.bridge.run(ob, bpy.context.scene, None, keyframe=False)
    assert clean.bridge.rig.chain_names(ob, goal) == ["b2"]
    assert ob.pose.bones["b1"].rotation_quaternion[0] == pytest.approx(1.0)
    # b2 alone turns toward the target: its tail ends 1 from its head, the target is 0.707 away
    assert report.position_error.max() == pytest.approx(1.0 - 0.5**0.5, abs=1e-4)


def test_panel_picks_the_root_and_names_locked_bones(clean: Any) -> None:
    from types import SimpleNamespace

    from jacobian_ik import panels

    class Layout:
        def __init__(self) -> None:
            self.calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []

        def __getattr__(self, name: str) -> Any:
            def call(*args: Any, **kw: Any) -> Layout:
                self.calls.append((name, args, kw))
                return self

            return call

    def draw(ob: Any) -> list[tuple[str, tuple[Any, ...], dict[str, Any]]]:
        layout = Layout()
        panels.VIEW3D_PT_jacobian_ik_goal.draw(
            SimpleNamespace(layout=layout), SimpleNamespace(object=ob)
        )
        return layout.calls

    ob, target = _locked_middle(clean)
    goal = add_goal(ob, "b3", target, chain_length=3)
    calls = draw(ob)
    assert ("prop_search", "chain_root") in [(n, a[1]) for n, a, _ in calls if a[1:]]
    labels = [kw.get("text", "") for n, _, kw in calls if n == "label"]
    assert "Locked, never moved: b2" in labels
    goal.chain_length = 1  # b3 alone: nothing locked to show
    assert not [kw for n, _, kw in draw(ob) if n == "label"]
    goal.chain_root = "nope"
    labels = [kw.get("text", "") for n, _, kw in draw(ob) if n == "label"]
    assert len(labels) == 1 and "chain root 'nope' is not in armature" in labels[0]


def _chest_head_arm(clean: Any) -> tuple[Any, Any, Any]:
    """A spine s0-s1 with a neck n0-n1 (the head's chain: n1, n0, s1) and an arm a0-a2 on s1
    (the hand's chain of 3: a2, a1, a0)."""
    bones = [
        ("s0", (0.0, 0.0, 0.0), (0.0, 0.0, 0.5), None, False),
        ("s1", (0.0, 0.0, 0.5), (0.0, 0.0, 1.0), "s0", True),
        ("n0", (0.0, 0.0, 1.0), (0.0, 0.0, 1.2), "s1", True),
        ("n1", (0.0, 0.0, 1.2), (0.0, 0.0, 1.4), "n0", True),
        ("a0", (0.1, 0.0, 0.95), (0.45, 0.0, 0.95), "s1", False),
        ("a1", (0.45, 0.0, 0.95), (0.8, 0.05, 0.95), "a0", True),
        ("a2", (0.8, 0.05, 0.95), (0.95, 0.0, 0.95), "a1", True),
    ]
    ob = make_armature("Body", bones)
    head = make_empty("Head", (0.25, 0.1, 1.3))
    hand = make_empty("Hand", (0.6, 0.4, 0.7))
    add_goal(ob, "n1", head, chain_length=3)
    add_goal(ob, "a2", hand, chain_length=3)
    return ob, head, hand


def test_a_goal_moves_only_its_own_chain_as_in_blender(clean: Any) -> None:
    """A hand's chain of 3 hangs from the chest that the head's chain moves: the hand never
    bends the chest (Blender's chain length), the head is solved first and the hand from where
    the chest went, so both reachable targets are met; moving the hand's target leaves the
    head's chain exactly as it was."""
    ob, _, hand = _chest_head_arm(clean)
    run = clean.bridge.run
    report = run(ob, bpy.context.scene, None, keyframe=False)
    assert report.position_error.max() < 1e-5, report.position_error
    spine = [tuple(ob.pose.bones[b].rotation_quaternion) for b in ("s1", "n0", "n1")]
    assert spine[0] != pytest.approx((1.0, 0.0, 0.0, 0.0))  # the head's chain bent the chest
    hand.location = (0.3, 0.6, 1.1)
    report = run(ob, bpy.context.scene, None, keyframe=False)
    assert report.position_error.max() < 1e-5, report.position_error
    after = [tuple(ob.pose.bones[b].rotation_quaternion) for b in ("s1", "n0", "n1")]
    # (to the float32 round-off of the pose it starts from: the first solve's)
    assert np.abs(np.array(after) - np.array(spine)).max() < 1e-6
    assert ob.pose.bones["s0"].rotation_quaternion[0] == pytest.approx(1.0)  # in no chain
