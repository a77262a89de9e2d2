"""Solve operators: the current frame, or bake a frame range into keyframes."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import bpy
from bpy.props import EnumProperty, IntProperty

from ..bridge import RigError, RunReport, run
from ..properties import MODE_ITEMS
from . import poll

if TYPE_CHECKING:
    from bpy.stub_internal.rna_enums import OperatorReturnItems


def _report_run(op: Any, report: RunReport) -> None:
    for message in report.warnings:
        op.report({"WARNING"}, message)
    worst = float(report.position_error.max()) if report.position_error.size else 0.0
    op.report(
        {"INFO"},
        f"Solved {len(report.frames)} frame(s) in {report.total_time:.3f} s: largest error "
        f"{worst:.2e}, {report.converged} converged, {report.keys} keys",
    )


class JACOBIAN_IK_OT_solve(bpy.types.Operator):
    """Solve the goals at the current frame (keyed when auto-keying is on)"""

    bl_idname = "jacobian_ik.solve"
    bl_label = "Solve"
    bl_options = {"REGISTER", "UNDO"}  # noqa: RUF012

    @classmethod
    def poll(cls, context: Any) -> bool:
        return poll.armature_with_goals(cls, context)

    def execute(self, context: Any) -> set[OperatorReturnItems]:
        scene = context.scene
        try:
            report = run(
                context.object,
                scene,
                None,
                view_layer=context.view_layer,
                keyframe=scene.tool_settings.use_keyframe_insert_auto,
            )
        except RigError as exc:
            self.report({"ERROR"}, str(exc))
            return {"CANCELLED"}
        _report_run(self, report)
        return {"FINISHED"}


class JACOBIAN_IK_OT_bake(bpy.types.Operator):
    """Solve every frame of a range in one batched solve and key the chains' rotations"""

    bl_idname = "jacobian_ik.bake"
    bl_label = "Bake"
    bl_options = {"REGISTER", "UNDO"}  # noqa: RUF012

    frame_start: IntProperty(name="Start", description="First frame (default: the scene's)")  # type: ignore[valid-type]
    frame_end: IntProperty(name="End", description="Last frame (default: the scene's)")  # type: ignore[valid-type]
    mode: EnumProperty(name="Mode", items=MODE_ITEMS, description="Default: the armature's mode")  # type: ignore[valid-type]

    @classmethod
    def poll(cls, context: Any) -> bool:
        return poll.armature_with_goals(cls, context)

    def invoke(self, context: Any, event: Any) -> set[OperatorReturnItems]:
        self._fill_defaults(context)
        return context.window_manager.invoke_props_dialog(self)

    def _fill_defaults(self, context: Any) -> None:
        scene = context.scene
        if not self.properties.is_property_set("frame_start"):
            self.frame_start = scene.frame_start
        if not self.properties.is_property_set("frame_end"):
            self.frame_end = scene.frame_end
        if not self.properties.is_property_set("mode"):
            self.mode = context.object.jacobian_ik.mode

    def execute(self, context: Any) -> set[OperatorReturnItems]:
        self._fill_defaults(context)
        if self.frame_end < self.frame_start:
            self.report({"ERROR"}, f"Empty frame range {self.frame_start}..{self.frame_end}")
            return {"CANCELLED"}
        progress, done = _progress(context, f"Baking {context.object.name}")
        try:
            report = run(
                context.object,
                context.scene,
                range(self.frame_start, self.frame_end + 1),
                view_layer=context.view_layer,
                mode=self.mode,
                progress=progress,
            )
        except RigError as exc:
            self.report({"ERROR"}, str(exc))
            return {"CANCELLED"}
        finally:
            done()
        _report_run(self, report)
        return {"FINISHED"}


def _progress(context: Any, label: str) -> tuple[Callable[[float], None], Callable[[], None]]:
    """A progress bar in the UI, printed lines (every 10 %) in background mode."""
    if bpy.app.background or context.window_manager is None:
        last = [-1]

        def update_line(x: float) -> None:
            tenth = int(x * 10)
            if tenth > last[0]:
                last[0] = tenth
                print(f"{label}: {tenth * 10} %", flush=True)

        return update_line, lambda: None

    wm = context.window_manager
    wm.progress_begin(0, 100)

    def update_bar(x: float) -> None:
        wm.progress_update(int(100 * x))

    return update_bar, wm.progress_end
