"""Viewport feedback: a line from each live goal's effector to its target, coloured by error.

Drawn with the ``gpu`` module in the 3D viewport (``SpaceView3D.draw_handler_add``, POST_VIEW)
for armatures with ``use_live`` on: green within the solver's tolerance, through yellow to red
at 1000 times the tolerance and beyond. In background mode (``bpy.app.background``) there is no
viewport: nothing is registered. ``goal_lines`` (the geometry) needs no GPU and is tested.
"""

from __future__ import annotations

import math
from typing import Any

import bpy

_handle: Any = None


def error_colour(error: float, tolerance: float) -> tuple[float, float, float, float]:
    """Green at or below ``tolerance``, yellow at 30x, red from 1000x (log scale)."""
    t = math.log10(max(error, 1e-30) / max(tolerance, 1e-12)) / 3.0
    t = min(max(t, 0.0), 1.0)
    if t < 0.5:
        return (2.0 * t, 1.0, 0.0, 1.0)
    return (1.0, 2.0 * (1.0 - t), 0.0, 1.0)


def goal_lines(
    objects: Any,
) -> tuple[list[tuple[float, float, float]], list[tuple[float, float, float, float]]]:
    """Line end points (pairs, world space) and their colours for the live armatures among
    ``objects``: effector (bone tail or head, evaluated pose) to target."""
    points: list[tuple[float, float, float]] = []
    colours: list[tuple[float, float, float, float]] = []
    for ob in objects:
        if ob.type != "ARMATURE" or not ob.jacobian_ik.use_live or ob.pose is None:
            continue
        props = ob.jacobian_ik
        for goal in props.goals:
            if not goal.enabled or goal.target is None or goal.bone not in ob.pose.bones:
                continue
            pb = ob.pose.bones[goal.bone]
            tip = ob.matrix_world @ (pb.tail if goal.use_tail else pb.head)
            target = goal.target.matrix_world
            if goal.target_bone and goal.target.type == "ARMATURE":
                tb = goal.target.pose.bones.get(goal.target_bone)
                if tb is None:
                    continue
                target = target @ tb.matrix
            aim = target.translation
            colour = error_colour((aim - tip).length, props.tolerance)
            points += [tuple(tip), tuple(aim)]
            colours += [colour, colour]
    return points, colours


def _draw() -> None:
    import gpu
    from gpu_extras.batch import batch_for_shader

    context = bpy.context
    if context.view_layer is None:
        return
    points, colours = goal_lines(context.view_layer.objects)
    if not points:
        return
    shader = gpu.shader.from_builtin("POLYLINE_SMOOTH_COLOR")
    batch = batch_for_shader(shader, "LINES", {"pos": points, "color": colours})
    gpu.state.blend_set("ALPHA")
    gpu.state.depth_test_set("NONE")
    state: Any = gpu.state  # the stubs declare viewport_get() as returning None
    shader.uniform_float("viewportSize", state.viewport_get()[2:])
    shader.uniform_float("lineWidth", 2.0)
    batch.draw(shader)
    gpu.state.blend_set("NONE")


def register() -> None:
    global _handle
    if bpy.app.background or _handle is not None:
        return
    _handle = bpy.types.SpaceView3D.draw_handler_add(_draw, (), "WINDOW", "POST_VIEW")


def unregister() -> None:
    global _handle
    if _handle is not None:
        bpy.types.SpaceView3D.draw_handler_remove(_handle, "WINDOW")
        _handle = None
