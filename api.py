"""Solve an armature's goals from Python: no operator, no context override, no constraints.

Blender's Python API has no call that solves IK on demand; this is one::

    from bl_ext.user_default.jacobian_ik.api import solve_pose

    result = solve_pose(bpy.data.objects["Armature"])          # solve and apply
    result.position_error                                        # {goal label: distance}
    preview = solve_pose(ob, apply=False)                        # only compute
    preview.rotations["forearm.L"]                               # value for its rotation mode
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import bpy
import numpy as np

from .bridge import write
from .bridge.errors import RigError
from .bridge.live_model import LiveModel
from .bridge.rig import check_evaluated, goal_label
from .solvers import IKError


@dataclass
class PoseResult:
    """A solved pose and how well it reaches the goals.

    rotations: per chain bone, the value of its rotation property in its ``rotation_mode``
        (a quaternion (w, x, y, z), Euler angles in radians, or axis-angle (angle, x, y, z)),
        what ``apply=True`` writes into ``pose.bones[name].<rotation_attr[name]>``.
    matrices: per chain bone, the 3x3 rotation of its ``matrix_basis``.
    position_error, rotation_error: per enabled goal (labelled "goal 1 (hand.L)"), the distance
        to the target in world units and the orientation error in radians (0 for position-only
        goals).
    reachable: per goal, whether the target is within the chain's length.
    """

    rotations: dict[str, tuple[float, ...]]
    rotation_attr: dict[str, str]
    matrices: dict[str, np.ndarray]
    position_error: dict[str, float]
    rotation_error: dict[str, float]
    reachable: dict[str, bool]
    converged: bool
    iterations: int
    reason: str
    time: float
    warnings: list[str]


def solve_pose(armature_object: Any, *, apply: bool = True, frame: int | None = None) -> PoseResult:
    """Solve ``armature_object``'s enabled goals at the current frame (or ``frame``) from its
    current pose, with its solver settings, and return the pose; ``apply`` writes it into the
    chain bones' rotation channels (no keys are written).

    ``frame``: the scene is moved there first (``scene.frame_set``) and stays there. Raises
    ``RigError`` (with a message for users) when the armature or its goals cannot be solved;
    nothing is written then.
    """
    ob = armature_object
    if ob is None or getattr(ob, "type", None) != "ARMATURE":
        raise RigError("solve_pose needs an armature object")
    scene: Any = ob.users_scene[0] if ob.users_scene else bpy.context.scene
    if scene is None:
        raise RigError(f"armature {ob.name!r} is in no scene")
    view_layer: Any = bpy.context.view_layer if bpy.context.scene == scene else scene.view_layers[0]
    check_evaluated(ob, view_layer)
    if frame is not None and frame != scene.frame_current:
        scene.frame_set(frame)
    else:
        view_layer.update()  # evaluated matrices of the bones above the chains and of the targets
    try:
        model = LiveModel(ob)
        live = model.solve(ob, force=True, frame=scene.frame_current)  # as live posing does
        assert live is not None  # forced
        if apply:
            model.write(ob, live)
    except IKError as exc:
        raise RigError(f"solver: {exc}") from exc
    result = live.result
    scale = np.ones(len(live.goal_names)) if live.error_scale is None else live.error_scale
    rotations = result.pose.rotations[0, model.free]
    reachable = live.reachable

    names = model.free_names
    seeds = write.current_rotations(ob, names)
    channels = write.rotation_channels(ob, names, rotations[None], seeds)
    goals = [(i, g) for i, g in enumerate(ob.jacobian_ik.goals) if g.enabled]
    labels = [goal_label(i, g) for i, g in goals]
    return PoseResult(
        rotations={ch.bone: tuple(float(v) for v in ch.values[0]) for ch in channels},
        rotation_attr={ch.bone: ch.attr for ch in channels},
        matrices={n: rotations[k].copy() for k, n in enumerate(names)},
        position_error={
            label: float(result.position_error[0, e] * scale[e]) for e, label in enumerate(labels)
        },
        rotation_error={
            label: float(result.rotation_error[0, e])
            if g.rotation_weight > 0 or getattr(g, "type", "REACH") == "AIM"  # aim: the angle
            else 0.0
            for e, (label, (_, g)) in enumerate(zip(labels, goals, strict=True))
        },
        reachable={label: bool(reachable[e]) for e, label in enumerate(labels)},
        converged=bool(result.success[0]),
        iterations=int(result.iterations[0]),
        reason=str(result.reason[0]),
        time=float(result.elapsed),
        warnings=list(model.warnings),
    )
