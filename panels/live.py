"""View3D > Sidebar > IK > Live: each goal's current error and reachability, the last live solve."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bpy.stub_internal.rna_enums import RegionTypeItems, SpaceTypeItems

import bpy

from .. import live


def draw_live_toggle(layout: Any, props: Any) -> None:
    """The Live toggle (drawn in the main panel)."""
    layout.prop(props, "use_live", toggle=True, icon="REC" if props.use_live else "PLAY")


class VIEW3D_PT_jacobian_ik_live(bpy.types.Panel):
    bl_label = "Live"
    bl_parent_id = "VIEW3D_PT_jacobian_ik"
    bl_space_type: SpaceTypeItems = "VIEW_3D"
    bl_region_type: RegionTypeItems = "UI"
    bl_category = "IK"

    @classmethod
    def poll(cls, context: Any) -> bool:
        ob = context.object
        if ob is None or ob.type != "ARMATURE":
            return False
        return bool(ob.jacobian_ik.use_live or live.last_error(ob))  # or why it went off

    def draw(self, context: Any) -> None:
        layout: Any = self.layout
        ob = context.object
        props = ob.jacobian_ik
        message = live.last_error(ob)
        if message:
            layout.label(text=message, icon="ERROR")
            return
        col = layout.column(align=True)
        col.label(text=f"Iterations: {props.live_iterations}, {1000 * props.live_time:.2f} ms")
        tolerance = max(props.tolerance, 1e-9)
        for goal in props.goals:
            if not goal.enabled:
                continue
            text = f"{goal.bone}: {goal.error:.2e}"
            if goal.rotation_weight > 0:
                text += f", {math.degrees(goal.rotation_error):.2f}°"
            text += "" if goal.reachable else " (out of reach)"
            icon = "CHECKMARK" if goal.error <= tolerance else "ERROR"
            col.label(text=text, icon=icon if goal.reachable else "CANCEL")
