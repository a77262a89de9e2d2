"""The rigs and target paths of benchmarks/live.py: the 20-bone humanoid (``scripts/demo.py``)
and Rigify's human meta-rig, goals with chains of 3, targets moving along smooth paths (the
tails of a reference pose whose joint angles vary sinusoidally, so every target is reachable).
"""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

import bpy  # noqa: E402
import demo  # noqa: E402  (the rig builder and add-on loader of the demo)
from mathutils import Euler, Matrix  # noqa: E402

GOALS = {"hand.L": 1.0, "hand.R": 1.0, "foot.L": 0.0, "foot.R": 0.0}  # rotation weights
PERIOD = 120  # steps per cycle of the paths (2 s of dragging at 60 updates per second)
# Rigify's human meta-rig: hands, feet and head, chains of 3, position goals
METARIG_GOALS = {"hand.L": 0.0, "hand.R": 0.0, "foot.L": 0.0, "foot.R": 0.0, "spine.006": 0.0}


def reference_pose(ob: Any, t: float) -> None:
    """Set a bent pose that varies smoothly with t (radians) on the arm and leg chains."""
    for side, s in (("L", 1.0), ("R", -1.0)):
        p = t if side == "L" else t + math.pi
        angles = {
            f"upper_arm.{side}": (
                0.3 * math.sin(p),
                0.2 * math.cos(p),
                s * (0.5 + 0.2 * math.sin(p)),
            ),
            f"forearm.{side}": (0.9 + 0.3 * math.sin(p + 1.0), 0.0, 0.1 * math.cos(p)),
            f"hand.{side}": (0.3 * math.sin(2 * p), 0.2 * math.cos(p), 0.2 * math.sin(p)),
            f"thigh.{side}": (0.3 + 0.25 * math.sin(p), 0.0, 0.05 * math.cos(p)),
            f"shin.{side}": (-0.6 - 0.25 * math.sin(p + 0.5), 0.0, 0.0),
            f"foot.{side}": (0.2 * math.sin(p), 0.0, 0.0),
        }
        for name, e in angles.items():
            pb = ob.pose.bones[name]
            pb.rotation_mode = "QUATERNION"
            pb.rotation_quaternion = Euler(e).to_quaternion()


def target_paths(ob: Any, steps: int) -> list[list[Matrix]]:
    """Per step, the world matrix of each goal's target: the reference pose's tail frames."""
    out = []
    for i in range(steps):
        reference_pose(ob, 2 * math.pi * i / PERIOD)
        bpy.context.view_layer.update()
        frames = []
        for name in GOALS:
            pb = ob.pose.bones[name]
            frames.append(ob.matrix_world @ pb.matrix @ Matrix.Translation((0, pb.length, 0)))
        out.append(frames)
    return out


def build() -> tuple[Any, list[Any], Any]:
    from checkout import load_checkout

    addon = load_checkout()
    bpy.ops.wm.read_factory_settings(use_empty=True)
    ob = demo.build_rig()
    targets = []
    with bpy.context.temp_override(object=ob, active_object=ob):
        for name, weight in GOALS.items():
            bpy.ops.jacobian_ik.add_goal(bone=name, chain_length=3)
            goal = ob.jacobian_ik.goals[-1]
            goal.rotation_weight = weight
            targets.append(goal.target)
    return ob, targets, addon


def wiggle_pose(ob: Any, bones: list[str], t: float) -> None:
    """A pose of ``bones`` varying smoothly with ``t`` (radians): each bone's own phase."""
    for k, name in enumerate(bones):
        pb = ob.pose.bones[name]
        pb.rotation_mode = "QUATERNION"
        p = t + 0.7 * k
        e = (0.25 + 0.2 * math.sin(p), 0.15 * math.cos(p), 0.2 * math.sin(p + 1.0))
        pb.rotation_quaternion = Euler(e).to_quaternion()


def chain_of(ob: Any, bone: str, length: int) -> list[str]:
    out, pb = [], ob.pose.bones[bone]
    while pb is not None and len(out) < length:
        out.append(pb.name)
        pb = pb.parent
    return out


def animate_targets(
    ob: Any, goals: dict[str, float], targets: list[Any], pose: Any, frames: int
) -> None:
    """Key each target on every frame at its goal bone's tail frame in ``pose(t)``; then put
    the chain bones back at their rest pose (the same start for both solvers)."""
    chains = sorted({b for g in goals for b in chain_of(ob, g, 3)})
    for f in range(1, frames + 1):
        pose(2 * math.pi * (f - 1) / PERIOD)
        bpy.context.view_layer.update()
        for name, empty in zip(goals, targets, strict=True):
            pb = ob.pose.bones[name]
            empty.matrix_world = ob.matrix_world @ pb.matrix @ Matrix.Translation((0, pb.length, 0))
            empty.keyframe_insert("location", frame=f)
            empty.keyframe_insert("rotation_euler", frame=f)
    for name in chains:
        ob.pose.bones[name].rotation_quaternion = (1.0, 0.0, 0.0, 0.0)


def build_playback(rig: str, frames: int) -> tuple[Any, dict[str, float], list[Any], Any]:
    """The rig with goals (chains of 3) towards Empties animated over ``frames`` frames."""
    from checkout import load_checkout

    addon = load_checkout()
    bpy.ops.wm.read_factory_settings(use_empty=True)
    if rig == "humanoid":
        ob, goals = demo.build_rig(), GOALS
    else:
        import addon_utils

        addon_utils.enable("rigify")
        bpy.ops.object.armature_human_metarig_add()
        ob, goals = bpy.context.object, METARIG_GOALS
    targets = []
    with bpy.context.temp_override(object=ob, active_object=ob):
        for name, weight in goals.items():
            bpy.ops.jacobian_ik.add_goal(bone=name, chain_length=3)
            goal = ob.jacobian_ik.goals[-1]
            goal.rotation_weight = weight
            targets.append(goal.target)
    if rig == "humanoid":
        animate_targets(ob, goals, targets, lambda t: reference_pose(ob, t), frames)
    else:
        bones = sorted({b for g in goals for b in chain_of(ob, g, 3)})
        animate_targets(ob, goals, targets, lambda t: wiggle_pose(ob, bones, t), frames)
    return ob, goals, targets, addon
