"""Solve operators: the current frame, or bake a frame range into keyframes."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import bpy
import numpy as np
from bpy.props import BoolProperty, EnumProperty, FloatProperty, IntProperty

from ..bridge import Cancelled, RigError, RunReport, run, run_steps
from ..properties import MODE_ITEMS
from . import poll

if TYPE_CHECKING:
    from bpy.stub_internal.rna_enums import OperatorReturnItems


def _report_run(op: Any, report: RunReport) -> None:
    for message in report.warnings:
        op.report({"WARNING"}, message)
    for message in _goal_states(report):
        op.report({"INFO"}, message)
    worst = float(report.position_error.max()) if report.position_error.size else 0.0
    op.report(
        {"INFO"},
        f"Solved {len(report.frames)} frame(s) in {report.total_time:.3f} s: largest error "
        f"{worst:.2e}, {report.converged} converged, {report.keys} keys"
        + (f" (full bake: {report.full_keys})" if report.keys != report.full_keys else "")
        + _full_body_text(report),
    )


def _goal_states(report: RunReport) -> list[str]:
    """A line per goal not met on every frame: on how many frames it was met, out of reach
    (and how far off at most), and in reach but held (``solve.goal_status``'s "conflict")."""
    status = report.goal_status
    if status is None:
        return []
    lines = []
    frames = len(report.frames)
    for e, name in enumerate(report.goal_names):
        states = status[:, e]
        far, held = states == "out_of_reach", states == "conflict"
        if not (far.any() or held.any()):
            continue
        text = f"goal {e + 1} ({name}): met on {int(np.sum(states == 'met'))} of {frames} frames"
        if far.any():
            off = float(report.position_error[far, e].max())
            text += f", out of reach on {int(far.sum())} ({off:.3g} off at most)"
        if held.any():
            text += (
                f", in reach but not met on {int(held.sum())} (other goals of its IK tree, "
                "limits or locks hold it)"
            )
        lines.append(text)
    return lines


def _full_body_text(report: RunReport) -> str:
    """The aim goals' largest angle and the centre of mass's largest distance from support."""
    text = ""
    if report.aim is not None and np.any(report.aim):
        angle = math.degrees(float(report.rotation_error[:, report.aim].max()))
        text += f", aim within {angle:.2f}°"
    if report.balance_distance is not None:
        text += f", centre of mass off support {float(report.balance_distance.max()):.3f}"
    return text


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
    """Solve every frame of a range in batched solves and key the chains' rotations (Esc cancels)"""

    bl_idname = "jacobian_ik.bake"
    bl_label = "Bake"
    bl_options = {"REGISTER", "UNDO"}  # noqa: RUF012

    frame_start: IntProperty(name="Start", description="First frame (default: the scene's)")  # type: ignore[valid-type]
    frame_end: IntProperty(name="End", description="Last frame (default: the scene's)")  # type: ignore[valid-type]
    mode: EnumProperty(name="Mode", items=MODE_ITEMS, description="Default: the armature's mode")  # type: ignore[valid-type]
    reduce_keys: BoolProperty(  # type: ignore[valid-type]
        name="Lean Keys",
        description="Keep only the keys needed to reproduce the solved motion within the "
        "tolerances (Bezier curves, checked with Blender's own evaluation)",
        default=False,
    )
    key_tolerance: FloatProperty(  # type: ignore[valid-type]
        name="Key Tolerance",
        description="Lean keys: largest rotation difference of a bone, in degrees",
        default=0.1,
        min=1e-4,
        soft_max=5.0,
    )
    position_tolerance: FloatProperty(  # type: ignore[valid-type]
        name="Position Tolerance",
        description="Lean keys: largest distance of a goal's effector from its solved place",
        default=1e-3,
        min=1e-6,
        unit="LENGTH",
    )
    new_action: BoolProperty(  # type: ignore[valid-type]
        name="New Action",
        description="Bake into a copy of the current action (<action>_jik); the source action "
        "is kept (fake user) and left untouched",
        default=False,
    )

    @classmethod
    def poll(cls, context: Any) -> bool:
        return poll.armature_with_goals(cls, context)

    def _options(self) -> dict[str, Any]:
        return {
            "reduce_keys": self.reduce_keys,
            "key_tolerance": self.key_tolerance,
            "position_tolerance": self.position_tolerance,
            "new_action": self.new_action,
        }

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
        frames = range(self.frame_start, self.frame_end + 1)
        if not bpy.app.background and context.window is not None:
            return self._start_modal(context, frames)
        progress, done = _progress(context, f"Baking {context.object.name}")
        try:
            report = run(
                context.object,
                context.scene,
                frames,
                view_layer=context.view_layer,
                mode=self.mode,
                progress=progress,
                **self._options(),
            )
        except Cancelled as exc:
            self.report({"WARNING"}, f"Bake {exc}")
            return {"CANCELLED"}
        except RigError as exc:
            self.report({"ERROR"}, str(exc))
            return {"CANCELLED"}
        finally:
            done()
        _report_run(self, report)
        return {"FINISHED"}

    def _start_modal(self, context: Any, frames: range) -> set[OperatorReturnItems]:
        """In the UI: solve a chunk per timer event so Esc can cancel between chunks."""
        self._steps = run_steps(
            context.object,
            context.scene,
            frames,
            view_layer=context.view_layer,
            mode=self.mode,
            **self._options(),
        )
        wm = context.window_manager
        self._timer = wm.event_timer_add(0.01, window=context.window)
        wm.progress_begin(0, 100)
        wm.modal_handler_add(self)
        return {"RUNNING_MODAL"}

    def _end_modal(self, context: Any) -> None:
        wm = context.window_manager
        wm.event_timer_remove(self._timer)
        wm.progress_end()

    def modal(self, context: Any, event: Any) -> set[OperatorReturnItems]:
        if event.type == "ESC":
            self._steps.close()  # nothing is written before the last chunk is solved
            self._end_modal(context)
            self.report({"WARNING"}, "Bake cancelled: nothing was written")
            return {"CANCELLED"}
        if event.type != "TIMER":
            return {"RUNNING_MODAL"}  # the scene stays as it is while baking
        try:
            fraction = next(self._steps)
        except StopIteration as done:
            self._end_modal(context)
            _report_run(self, done.value)
            return {"FINISHED"}
        except RigError as exc:
            self._end_modal(context)
            self.report({"ERROR"}, str(exc))
            return {"CANCELLED"}
        context.window_manager.progress_update(int(100 * fraction))
        return {"RUNNING_MODAL"}


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
