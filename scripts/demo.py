"""Demo: a 20-bone character walks in place and waves, driven by Jacobian IK goals.

Builds the rig with bpy.data, adds a goal per hand and foot (``jacobian_ik.add_goal``: an Empty
at the bone's tail), animates the Empties and the hips, bakes 250 frames with
``jacobian_ik.bake``, plays the keys back without IK to measure the tip-to-target error, saves
``demo.blend`` and writes ``demo_report.json``. Run it with ``bash scripts/demo.sh``.
"""

from __future__ import annotations

import json
import math
import sys
import time
from pathlib import Path
from typing import Any

import bpy as _bpy
import numpy as np
from mathutils import Vector

bpy: Any = _bpy  # registered operators and properties are not in the stubs

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))  # also when imported by a benchmark
from checkout import load_checkout  # type: ignore[import-not-found]  # noqa: E402

FRAMES = 250
# name, head, tail, parent, connected (Z up, the character faces -Y)
BONES: list[
    tuple[str, tuple[float, float, float], tuple[float, float, float], str | None, bool]
] = [
    ("root", (0, 0, 0), (0, 0.3, 0), None, False),
    ("hips", (0, 0, 1.0), (0, 0, 1.1), "root", False),
    ("spine", (0, 0, 1.1), (0, 0, 1.3), "hips", True),
    ("chest", (0, 0, 1.3), (0, 0, 1.5), "spine", True),
    ("neck", (0, 0, 1.5), (0, 0, 1.6), "chest", True),
    ("head", (0, 0, 1.6), (0, -0.02, 1.8), "neck", True),
]
for side, s in (("L", 1.0), ("R", -1.0)):
    BONES += [
        (f"shoulder.{side}", (0.02 * s, 0, 1.45), (0.18 * s, 0, 1.45), "chest", False),
        (
            f"upper_arm.{side}",
            (0.18 * s, 0, 1.45),
            (0.45 * s, 0.03, 1.42),
            f"shoulder.{side}",
            True,
        ),
        (f"forearm.{side}", (0.45 * s, 0.03, 1.42), (0.7 * s, 0, 1.4), f"upper_arm.{side}", True),
        (f"hand.{side}", (0.7 * s, 0, 1.4), (0.8 * s, 0, 1.4), f"forearm.{side}", True),
        (f"thigh.{side}", (0.1 * s, 0, 1.0), (0.1 * s, -0.03, 0.55), "hips", False),
        (f"shin.{side}", (0.1 * s, -0.03, 0.55), (0.1 * s, 0, 0.1), f"thigh.{side}", True),
        (f"foot.{side}", (0.1 * s, 0, 0.1), (0.1 * s, -0.16, 0.02), f"shin.{side}", True),
    ]


def build_rig() -> Any:
    arm = bpy.data.armatures.new("Character")
    ob = bpy.data.objects.new("Character", arm)
    bpy.context.scene.collection.objects.link(ob)
    bpy.context.view_layer.objects.active = ob
    bpy.ops.object.mode_set(mode="EDIT")
    for name, head, tail, parent, connected in BONES:
        eb = arm.edit_bones.new(name)
        eb.head, eb.tail = head, tail
        if parent:
            eb.parent, eb.use_connect = arm.edit_bones[parent], connected
    bpy.ops.object.mode_set(mode="OBJECT")
    bpy.context.view_layer.update()
    return ob


def animate(ob: Any, goals: dict[str, Any]) -> None:
    """Hips bob and sway; feet step in place (kept flat); hands draw circles."""
    hips = ob.pose.bones["hips"]
    rest = {name: empty.location.copy() for name, empty in goals.items()}
    for frame in range(1, FRAMES + 1, 5):
        phase = 2 * math.pi * (frame - 1) / 50
        # pose location is in the bone's frame: Y is along the bone (up)
        hips.location = (0.03 * math.sin(phase), -0.1 + 0.03 * math.cos(2 * phase), 0.0)
        hips.keyframe_insert("location", frame=frame)
        for side, s in (("L", 1.0), ("R", -1.0)):
            step = phase if side == "L" else phase + math.pi
            foot = rest[f"foot.{side}"] + Vector(
                (0.0, -0.15 * math.sin(step), max(0.0, 0.1 * math.cos(step)))
            )
            hand = Vector((0.35 * s, -0.25, 1.15)) + 0.1 * Vector(
                (math.cos(phase) * s, 0.0, math.sin(phase + (0 if side == "L" else 1.0)))
            )
            for name, location in ((f"foot.{side}", foot), (f"hand.{side}", hand)):
                goals[name].location = location
                goals[name].keyframe_insert("location", frame=frame)


POLES = {"hand": (0.45, 0.6, 1.4), "foot": (0.1, -0.8, 0.55)}  # the character faces -Y


def make_pole(goal_bone: str) -> Any:
    """An Empty the goal's knee or elbow bends toward (no pole angle to set)."""
    kind, side = goal_bone.split(".")
    x, y, z = POLES[kind]
    pole = bpy.data.objects.new(f"pole {goal_bone}", None)
    pole.empty_display_type = "SPHERE"
    pole.empty_display_size = 0.03
    pole.location = (x if side == "L" else -x, y, z)
    bpy.context.scene.collection.objects.link(pole)
    return pole


def playback_errors(ob: Any, goals: dict[str, Any]) -> dict[str, np.ndarray]:
    """Tip-to-target distances with the baked keys played back (no IK involved)."""
    scene = bpy.context.scene
    errors: dict[str, list[float]] = {name: [] for name in goals}
    for frame in range(1, FRAMES + 1):
        scene.frame_set(frame)
        for name, empty in goals.items():
            tip = ob.matrix_world @ ob.pose.bones[name].tail
            errors[name].append((tip - empty.matrix_world.translation).length)
    return {name: np.array(e) for name, e in errors.items()}


def plot(ob: Any, goals: dict[str, Any], path: Path) -> None:
    """Front and side views of the baked character over one step cycle, with the targets' paths."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    scene = bpy.context.scene
    frames = list(range(1, 51))
    paths: dict[str, list[Vector]] = {name: [] for name in goals}
    poses = []
    for frame in frames:
        scene.frame_set(frame)
        for name, empty in goals.items():
            paths[name].append(empty.matrix_world.translation.copy())
        poses.append(
            [(ob.matrix_world @ pb.head, ob.matrix_world @ pb.tail) for pb in ob.pose.bones]
        )
    fig, axes = plt.subplots(1, 2, figsize=(9, 5.5))
    for ax, (i, j), title in zip(
        axes, [(0, 2), (1, 2)], ["front (X-Z)", "side (Y-Z)"], strict=True
    ):
        for k, frame in enumerate(frames[::7]):
            alpha = 0.25 + 0.75 * (k == 0)
            for head, tail in poses[frame - 1]:
                ax.plot([head[i], tail[i]], [head[j], tail[j]], "-o", color="C0", alpha=alpha, ms=2)
        for name, points in paths.items():
            ax.plot([p[i] for p in points], [p[j] for p in points], "--", lw=1, label=name)
        ax.set_title(title)
        ax.set_aspect("equal")
        ax.grid(alpha=0.3)
    axes[1].legend(loc="upper right", fontsize=8)
    fig.suptitle(
        "Jacobian IK demo: keys baked for frames 1-250 (frames 1-50 shown), IK targets dashed"
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> int:
    t_start = time.perf_counter()
    load_checkout()
    bpy.ops.wm.read_factory_settings(use_empty=True)
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, FRAMES
    ob = build_rig()
    goals: dict[str, Any] = {}
    with bpy.context.temp_override(object=ob, active_object=ob):
        for name in ("hand.L", "hand.R", "foot.L", "foot.R"):
            bpy.ops.jacobian_ik.add_goal(bone=name, chain_length=3)
            goal = ob.jacobian_ik.goals[-1]
            if name.startswith("foot"):
                goal.rotation_weight = 1.0  # keep the feet flat
            goal.pole_target = make_pole(name)  # knees bend forward, elbows backward
            goals[name] = goal.target
    animate(ob, goals)
    scene.frame_set(1)

    with bpy.context.temp_override(object=ob, active_object=ob):
        result = bpy.ops.jacobian_ik.bake(frame_start=1, frame_end=FRAMES)
    if result != {"FINISHED"}:
        print("bake failed", file=sys.stderr)
        return 1
    props = ob.jacobian_ik
    errors = playback_errors(ob, goals)
    report = {
        "bones": len(ob.data.bones),
        "frames": props.last_frames,
        "method": props.method,
        "converged_frames": props.last_converged,
        "most_iterations": props.last_iterations,
        "bake_time_s": round(props.last_time, 4),
        "keys_written": props.last_keys,
        "goals": {
            name: {
                "mean_error": float(e.mean()),
                "max_error": float(e.max()),
                "share_under_1e-3": float(np.mean(e < 1e-3)),
            }
            for name, e in errors.items()
        },
    }
    if "--plot" in sys.argv:
        image = Path(sys.argv[sys.argv.index("--plot") + 1])
        plot(ob, goals, image)
        report["image"] = str(image)
    scene.frame_set(1)
    blend = ROOT / "demo.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(blend))
    report["saved"] = str(blend)
    report["total_time_s"] = round(time.perf_counter() - t_start, 2)
    Path(ROOT / "demo_report.json").write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
