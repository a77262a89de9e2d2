"""View3D > Sidebar > IK: goals, solver settings, Solve and Bake, last results. Panels only draw."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bpy.stub_internal.rna_enums import RegionTypeItems, SpaceTypeItems

import bpy

from ..bridge import rig
from ..bridge.errors import RigError
from ..bridge.settings import SETTINGS_FIELDS, SHOWN_IF, method_name, method_properties
from ..solvers import kernel, warmup
from .live import VIEW3D_PT_jacobian_ik_live, draw_live_toggle


def _armature(context: Any) -> Any:
    ob = context.object
    return ob if ob is not None and ob.type == "ARMATURE" else None


class JACOBIAN_IK_UL_goals(bpy.types.UIList):
    """The goal list: enabled toggle, bone and target."""

    def draw_item(
        self,
        context: Any,
        layout: Any,
        data: Any | None,
        item: Any | None,
        icon: int | None,
        active_data: Any,
        active_property: str | None,
        index: int | None = 0,
        flt_flag: int | None = 0,
    ) -> None:
        goal: Any = item
        row = layout.row(align=True)
        row.prop(goal, "enabled", text="")
        row.label(text=goal.bone or "(no bone)", icon="BONE_DATA")
        target = goal.target.name if goal.target else "(no target)"
        if goal.target_bone:
            target += f" : {goal.target_bone}"
        row.label(text=target, icon="OBJECT_DATA" if goal.target else "ERROR")


class _IKPanel:
    bl_space_type: SpaceTypeItems = "VIEW_3D"
    bl_region_type: RegionTypeItems = "UI"
    bl_category = "IK"

    @classmethod
    def poll(cls, context: Any) -> bool:
        return _armature(context) is not None


class VIEW3D_PT_jacobian_ik(_IKPanel, bpy.types.Panel):
    bl_label = "Jacobian IK"

    def draw(self, context: Any) -> None:
        layout: Any = self.layout
        props = context.object.jacobian_ik
        row = layout.row()
        row.template_list(
            "JACOBIAN_IK_UL_goals", "", props, "goals", props, "active_goal_index", rows=3
        )
        col = row.column(align=True)
        col.operator("jacobian_ik.add_goal", icon="ADD", text="")
        col.operator("jacobian_ik.remove_goal", icon="REMOVE", text="")
        col.separator()
        col.operator("jacobian_ik.import_constraints", icon="CONSTRAINT_BONE", text="")
        col.operator("jacobian_ik.restore_constraints", icon="LOOP_BACK", text="")

        row = layout.row(align=True)
        row.scale_y = 1.4
        row.operator("jacobian_ik.solve", icon="CON_KINEMATIC")
        row.operator("jacobian_ik.bake", icon="KEYINGSET")
        if warmup.running():  # once after install (solvers/warmup.py)
            layout.label(text="Building the compiled solver: a solve waits for it", icon="TIME")
        draw_live_toggle(layout, props)
        if "rig_id" in context.object.data:  # a generated Rigify rig
            layout.operator("jacobian_ik.bake_rigify_fk", icon="ARMATURE_DATA")


class VIEW3D_PT_jacobian_ik_goal(_IKPanel, bpy.types.Panel):
    bl_label = "Goal"
    bl_parent_id = "VIEW3D_PT_jacobian_ik"

    @classmethod
    def poll(cls, context: Any) -> bool:
        ob = _armature(context)
        return ob is not None and 0 <= ob.jacobian_ik.active_goal_index < len(ob.jacobian_ik.goals)

    def draw(self, context: Any) -> None:
        layout: Any = self.layout
        layout.use_property_split = True
        ob = context.object
        goal = ob.jacobian_ik.goals[ob.jacobian_ik.active_goal_index]
        layout.prop_search(goal, "bone", ob.data, "bones")
        layout.prop(goal, "target")
        if goal.target is not None and goal.target.type == "ARMATURE":
            layout.prop_search(goal, "target_bone", goal.target.data, "bones")
        layout.prop(goal, "type")
        if goal.type == "AIM":
            layout.prop(goal, "aim_axis")
        layout.prop_search(goal, "chain_root", ob.data, "bones")
        row = layout.row()
        row.active = not goal.chain_root
        row.prop(goal, "chain_length")
        layout.prop(goal, "use_transform_locks")
        _draw_chain_note(layout, ob, goal)
        layout.prop(goal, "use_tail")
        layout.prop(goal, "use_stretch")
        layout.prop(goal, "position_weight")
        if goal.type != "AIM":
            layout.prop(goal, "rotation_weight")
        layout.prop(goal, "pole_target")
        if goal.pole_target is not None and goal.pole_target.type == "ARMATURE":
            layout.prop_search(goal, "pole_target_bone", goal.pole_target.data, "bones")
        if goal.pole_target is not None:
            layout.prop(goal, "pole_angle")
        layout.prop(goal, "support")


def _draw_chain_note(layout: Any, ob: Any, goal: Any) -> None:
    """A line under the chain settings: a bad chain root, or the chain's locked bones."""
    if not goal.bone or goal.bone not in ob.data.bones:
        return
    try:
        locked = rig.locked_in_chain(ob, goal)
    except RigError as exc:
        layout.label(text=str(exc), icon="ERROR")
        return
    if locked:
        layout.label(text=f"Locked, never moved: {', '.join(locked)}", icon="LOCKED")


class VIEW3D_PT_jacobian_ik_solver(_IKPanel, bpy.types.Panel):
    bl_label = "Solver"
    bl_parent_id = "VIEW3D_PT_jacobian_ik"

    def draw(self, context: Any) -> None:
        layout: Any = self.layout
        layout.use_property_split = True
        props = context.object.jacobian_ik
        for field in SETTINGS_FIELDS:  # the settings and the method's declared parameters
            shown_if = SHOWN_IF.get(field)
            if shown_if is None or getattr(props, shown_if[0]) == shown_if[1]:
                layout.prop(props, field)
            if field == "method":
                for name in method_properties(props.method):
                    layout.prop(props, name)
                if kernel.enabled() and method_name(props.method) not in kernel.DAMPING:
                    # measured: SDLS bakes a double-Y tree in 84 s, LM in 1.1 (README)
                    hint = "Not compiled: bakes take several times LM's time"
                    layout.label(text=hint, icon="INFO")


class VIEW3D_PT_jacobian_ik_results(_IKPanel, bpy.types.Panel):
    bl_label = "Last Run"
    bl_parent_id = "VIEW3D_PT_jacobian_ik"
    bl_options = {"DEFAULT_CLOSED"}  # noqa: RUF012

    def draw(self, context: Any) -> None:
        layout: Any = self.layout
        props = context.object.jacobian_ik
        if props.last_frames == 0:
            layout.label(text="Not solved yet")
            return
        col = layout.column(align=True)
        col.label(text=f"{props.last_frames} frame(s), {props.last_converged} converged")
        col.label(text=f"Iterations (most): {props.last_iterations}")
        col.label(text=f"Time: {props.last_time:.3f} s, keys: {props.last_keys}")
        if props.last_balance >= 0:
            col.label(text=f"Centre of mass off support (max): {props.last_balance:.3f}")
        col = layout.column(align=True)
        for goal in props.goals:
            if goal.enabled:
                text = f"{goal.bone}: max {goal.error:.2e}, mean {goal.error_mean:.2e}"
                if goal.type == "AIM":
                    text = f"{goal.bone}: aim {math.degrees(goal.rotation_error):.2f}°"
                    ok = goal.rotation_error < math.radians(0.5)
                    col.label(text=text, icon="CHECKMARK" if ok else "ERROR")
                    continue
                if goal.rotation_weight > 0:
                    text += f", rotation {math.degrees(goal.rotation_error):.2f}°"
                col.label(text=text, icon="CHECKMARK" if goal.error < 1e-3 else "ERROR")


classes = (
    JACOBIAN_IK_UL_goals,
    VIEW3D_PT_jacobian_ik,
    VIEW3D_PT_jacobian_ik_goal,
    VIEW3D_PT_jacobian_ik_solver,
    VIEW3D_PT_jacobian_ik_results,
    VIEW3D_PT_jacobian_ik_live,
)


def register() -> None:
    for cls in classes:
        bpy.utils.register_class(cls)


def unregister() -> None:
    for cls in reversed(classes):
        bpy.utils.unregister_class(cls)
