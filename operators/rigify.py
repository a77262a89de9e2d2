"""Rigify: bake the FK controls of a generated rig's limbs from its IK over a frame range."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import bpy
from bpy.props import BoolProperty, EnumProperty, IntProperty

from ..bridge import RigError
from ..bridge.rigify import LIMB_ITEMS, bake_fk
from . import poll

if TYPE_CHECKING:
    from bpy.stub_internal.rna_enums import OperatorReturnItems


class JACOBIAN_IK_OT_bake_rigify_fk(bpy.types.Operator):
    """Key the FK controls of a Rigify rig's limbs so they follow what the IK does over a frame
    range (Rigify's IK-to-FK snap, every frame), then switch the limbs to FK"""

    bl_idname = "jacobian_ik.bake_rigify_fk"
    bl_label = "Bake Rigify FK from IK"
    bl_options = {"REGISTER", "UNDO"}  # noqa: RUF012

    frame_start: IntProperty(name="Start", description="First frame (default: the scene's)")  # type: ignore[valid-type]
    frame_end: IntProperty(name="End", description="Last frame (default: the scene's)")  # type: ignore[valid-type]
    limbs: EnumProperty(  # type: ignore[valid-type]
        name="Limbs",
        items=LIMB_ITEMS,
        options={"ENUM_FLAG"},
        default={"ARM_L", "ARM_R", "LEG_L", "LEG_R"},
        description="The limbs whose FK controls are baked",
    )
    switch_to_fk: BoolProperty(  # type: ignore[valid-type]
        name="Switch to FK",
        description="Turn the limbs' IK_FK switch to 1.0 (FK) afterwards: keyed over the range "
        "when it is animated, else set",
        default=True,
    )

    @classmethod
    def poll(cls, context: Any) -> bool:
        return poll.armature(cls, context)

    def invoke(self, context: Any, event: Any) -> set[OperatorReturnItems]:
        self._fill_defaults(context)
        return context.window_manager.invoke_props_dialog(self)

    def _fill_defaults(self, context: Any) -> None:
        if not self.properties.is_property_set("frame_start"):
            self.frame_start = context.scene.frame_start
        if not self.properties.is_property_set("frame_end"):
            self.frame_end = context.scene.frame_end

    def execute(self, context: Any) -> set[OperatorReturnItems]:
        self._fill_defaults(context)
        if self.frame_end < self.frame_start:
            self.report({"ERROR"}, f"Empty frame range {self.frame_start}..{self.frame_end}")
            return {"CANCELLED"}
        try:
            report = bake_fk(
                context.object,
                context.scene,
                range(self.frame_start, self.frame_end + 1),
                set(self.limbs),
                view_layer=context.view_layer,
                switch=self.switch_to_fk,
            )
        except RigError as exc:
            self.report({"ERROR"}, str(exc))
            return {"CANCELLED"}
        for message in report.warnings:
            self.report({"WARNING"}, message)
        switch = ""
        if self.switch_to_fk:
            switch = ", IK_FK keyed to FK" if report.switch_keyed else ", IK_FK set to FK"
        self.report(
            {"INFO"},
            f"Baked the FK of {', '.join(report.limbs)} over {len(report.frames)} frame(s): "
            f"{report.keys} keys, largest FK-IK distance {report.error:.2e}{switch}",
        )
        return {"FINISHED"}
