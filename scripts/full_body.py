"""Full-body goals on the demo character: hips that help, balance, a head that aims.

Builds the demo's 20-bone character (scripts/demo.py) with feet pinned flat where they stand
(``support`` on), both hand targets out of the arms' reach in front of it, knees and elbows
as hinges with IK limits (they bend one way only), then solves the
same frame three ways through the add-on (``bridge.run``): hips fixed, ``move_root``, and
``move_root`` with ``balance``; a head AIM goal (chain 2: head and neck) looks at a point.
Prints the errors and the centre of mass's distance from the support point, and with
``--plot PATH`` draws side views (docs/images/full_body.png in the README)::

    .venv/bin/python scripts/full_body.py --plot docs/images/full_body.png
"""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path
from typing import Any

import bpy as _bpy
import numpy as np
from mathutils import Vector

bpy: Any = _bpy

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))  # also when imported by a test
from checkout import load_checkout  # type: ignore[import-not-found]  # noqa: E402
from demo import BONES, build_rig  # type: ignore[import-not-found]  # noqa: E402

HANDS = {"hand.L": (0.25, -0.85, 1.15), "hand.R": (-0.25, -0.85, 1.15)}  # beyond arm's reach
LOOK_AT = (0.6, -1.2, 2.0)  # up and to the side
KNEE = (0.0, 2.6)
NAMES = [b[0] for b in BONES]


def add_goals(ob: Any) -> dict[str, Any]:
    targets = {}
    for name in ("foot.L", "foot.R", "hand.L", "hand.R", "head"):
        pb = ob.pose.bones[name]
        empty = bpy.data.objects.new(f"{name} target", None)
        empty.empty_display_size = 0.05
        bpy.context.scene.collection.objects.link(empty)
        goal = ob.jacobian_ik.goals.add()
        goal.bone, goal.target = name, empty
        if name.startswith("foot"):
            empty.matrix_world = ob.matrix_world @ pb.matrix  # flat where it stands
            empty.location = ob.matrix_world @ pb.tail
            goal.chain_length, goal.rotation_weight, goal.support = 3, 1.0, True
        elif name.startswith("hand"):
            empty.location = HANDS[name]
            goal.chain_length = 3
        else:  # the head looks along its local axis that faces forward (-Y) at rest
            empty.location = LOOK_AT
            goal.type, goal.chain_length, goal.use_tail = "AIM", 2, False
            goal.aim_axis = forward_axis(pb)
        targets[name] = empty
    for side in "LR":  # knees bend forward, elbows backward: hinges about X with IK limits
        for bone, lo, hi in ((f"shin.{side}", KNEE[0], KNEE[1]), (f"forearm.{side}", 0.0, 2.6)):
            pb = ob.pose.bones[bone]
            pb.lock_ik_y = pb.lock_ik_z = pb.use_ik_limit_x = True
            pb.ik_min_x, pb.ik_max_x = lo, hi
    ob.jacobian_ik.max_iterations, ob.jacobian_ik.tolerance = 200, 1e-4
    bpy.context.view_layer.update()
    return targets


def forward_axis(pb: Any) -> str:
    m = pb.matrix.to_3x3()
    axes = {
        "X": (1, 0, 0),
        "Y": (0, 1, 0),
        "Z": (0, 0, 1),
        "-X": (-1, 0, 0),
        "-Y": (0, -1, 0),
        "-Z": (0, 0, -1),
    }
    return max(axes, key=lambda k: (m @ Vector(axes[k])).y * -1.0)


def snapshot(ob: Any) -> list[tuple[Vector, Vector]]:
    bpy.context.view_layer.update()
    return [(ob.matrix_world @ pb.head, ob.matrix_world @ pb.tail) for pb in ob.pose.bones]


def com(ob: Any) -> Vector:
    """Length-weighted bone middles (the root bone, a floor control, weighs nothing)."""
    total, moment = 0.0, Vector()
    for pb in ob.pose.bones:
        if pb.name != "root":
            total += pb.bone.length
            moment += pb.bone.length * (ob.matrix_world @ ((pb.head + pb.tail) / 2))
    return moment / total


def main() -> int:
    load_checkout()
    run = importlib.import_module("jacobian_ik.bridge.run").run
    bpy.ops.wm.read_factory_settings(use_empty=True)
    ob = build_rig()
    targets = add_goals(ob)
    scene = bpy.context.scene
    cases = [("hips fixed", False, False), ("move_root", True, False), ("+ balance", True, True)]
    report: dict[str, Any] = {"bones": len(BONES)}
    shots = []
    for label, move_root, balance in cases:
        for pb in ob.pose.bones:  # every case starts from rest
            pb.location, pb.rotation_quaternion = (0, 0, 0), (1, 0, 0, 0)
        ob.jacobian_ik.move_root, ob.jacobian_ik.balance = move_root, balance
        result = run(ob, scene, keyframe=False)
        goals = {}
        for e, name in enumerate(result.goal_names):
            if name == "head":
                goals[name] = {"aim_deg": float(np.degrees(result.rotation_error[0, e]))}
            else:
                goals[name] = {"error": float(result.position_error[0, e])}
        distance = result.balance_distance
        report[label] = {
            "goals": goals,
            "com_from_support": None if distance is None else float(distance[0]),
        }
        shots.append((label, snapshot(ob), com(ob)))
    support = (targets["foot.L"].location + targets["foot.R"].location) / 2
    print(json.dumps(report, indent=2))
    if "--plot" in sys.argv:
        plot(shots, targets, support, report, Path(sys.argv[sys.argv.index("--plot") + 1]))
    return 0


def plot(
    shots: list[tuple[str, Any, Vector]],
    targets: dict[str, Any],
    support: Vector,
    report: dict[str, Any],
    path: Path,
) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(shots), figsize=(9, 3.9), sharey=True)
    for ax, (label, bones, centre) in zip(axes, shots, strict=True):
        for head, tail in bones:  # side view: Y (forward is -Y) and Z
            ax.plot([-head.y, -tail.y], [head.z, tail.z], "-o", color="C0", ms=2, lw=1.5)
        for name, t in targets.items():
            p = t.matrix_world.translation
            ax.plot(-p.y, p.z, "x" if name != "head" else "*", color="C3", ms=7)
        eye = bones[NAMES.index("head")][0]  # the head's aim ray, from its head to the target
        look = targets["head"].matrix_world.translation
        ax.plot([-eye.y, -look.y], [eye.z, look.z], "--", color="C3", lw=0.8)
        ax.plot(-centre.y, centre.z, "o", color="C2", ms=7, mfc="none", mew=2)
        ax.plot([-centre.y, -centre.y], [0, centre.z], ":", color="C2", lw=1)
        ax.plot(-support.y, 0, "^", color="k", ms=7)
        distance = report[label]["com_from_support"]
        worst = max(g.get("error", 0.0) for g in report[label]["goals"].values())
        ax.set_title(f"{label}\nhands off {worst:.3f}, COM off {distance:.3f}", fontsize=9)
        ax.set_aspect("equal")
        ax.set_xlim(-0.5, 1.4)
        ax.grid(alpha=0.3)
        ax.set_xlabel("forward (m)", fontsize=8)
    axes[0].set_ylabel("up (m)", fontsize=8)
    fig.suptitle(
        "Full-body goals: targets x (hands, feet), * (the head aims, dashed), COM o, support ^",
        fontsize=9,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=80, bbox_inches="tight")
    plt.close(fig)


if __name__ == "__main__":
    sys.exit(main())
