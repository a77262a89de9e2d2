"""Solve an armature's goals for the current frame or a frame range: read, solve once, write.

This is the scripting API the operators and the headless script use::

    from bl_ext.user_default.jacobian_ik.bridge import run
    report = run(ob, scene, frames=range(1, 251))
    print(report.summary())
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..solvers import IKError, solve
from . import rig, write
from .errors import RigError
from .settings import solver_settings

Array = NDArray[np.float64]


@dataclass
class RunReport:
    """What a run did: per-frame, per-goal errors, solver statistics, timings and keys."""

    frames: list[int]
    goal_names: list[str]
    position_error: Array  # (F, E) world units
    rotation_error: Array  # (F, E) radians
    rotation_weight: Array  # (E,) goals with weight 0 are position only
    iterations: NDArray[np.int64]  # (F,)
    converged: int
    method: str
    mode: str
    read_time: float
    solve_time: float
    write_time: float
    keys: int
    warnings: list[str] = field(default_factory=list)

    @property
    def total_time(self) -> float:
        return self.read_time + self.solve_time + self.write_time

    def summary(self) -> dict[str, Any]:
        """A JSON-ready summary: frames, per-goal error statistics, iterations, times, keys."""
        goals = {}
        for e, name in enumerate(self.goal_names):
            err = self.position_error[:, e]
            stats = {
                "mean": float(err.mean()),
                "max": float(err.max()),
                "p95": float(np.percentile(err, 95)),
                "under_1e-3": float(np.mean(err < 1e-3)),
            }
            if self.rotation_weight[e] > 0:
                stats["rotation_max"] = float(self.rotation_error[:, e].max())
            goals[f"{e + 1}:{name}"] = stats
        return {
            "frames": len(self.frames),
            "frame_start": self.frames[0],
            "frame_end": self.frames[-1],
            "method": self.method,
            "mode": self.mode,
            "converged_frames": self.converged,
            "iterations_mean": float(self.iterations.mean()),
            "iterations_max": int(self.iterations.max()),
            "goals": goals,
            "time": {
                "read": self.read_time,
                "solve": self.solve_time,
                "write": self.write_time,
                "total": self.total_time,
            },
            "keys": self.keys,
            "warnings": self.warnings,
        }


def run(
    ob: Any,
    scene: Any,
    frames: Iterable[int] | None = None,
    *,
    view_layer: Any = None,
    mode: str | None = None,
    keyframe: bool = True,
    progress: Callable[[float], None] | None = None,
) -> RunReport:
    """Solve ``ob``'s enabled goals and write the result; on failure raise RigError, write nothing.

    frames: None solves the current frame as it is (pose channels are set, and keyed when
        ``keyframe``); a range of frames is read frame by frame, solved in one batched call and
        keyed (only inside the range). mode: 'CONVERGE' or 'TRACK' (default: the stored mode).
    progress: called with a fraction in [0, 1].
    """

    def report_progress(x: float) -> None:
        if progress is not None:
            progress(x)

    if frames is None:
        frame_list = [scene.frame_current]
        if view_layer is None:
            view_layer = scene.view_layers[0]
        evaluate = rig.current_evaluator(view_layer)
    else:
        frame_list = [int(f) for f in frames]
        evaluate = rig.frame_evaluator(scene)
    if not frame_list:
        raise RigError("the frame range is empty")
    if ob is None or ob.type != "ARMATURE":
        raise RigError("the active object is not an armature")
    props = ob.jacobian_ik
    try:
        settings = solver_settings(props, mode)
    except IKError as exc:
        raise RigError(f"settings: {exc}") from exc

    original_frame = scene.frame_current
    t0 = time.perf_counter()
    try:
        evaluate(frame_list[0])
        model = rig.build_model(ob)
        free_names = [model.names[b] for b in model.free]
        seeds = write.current_rotations(ob, free_names)
        data = rig.read_frames(ob, model, frame_list, evaluate, lambda x: report_progress(0.45 * x))
    except IKError as exc:  # the solver rejected the skeleton or goals built from the rig
        raise RigError(f"rig: {exc}") from exc
    finally:
        if frames is not None:
            scene.frame_set(original_frame)
    t1 = time.perf_counter()
    try:
        result = solve(model.skeleton, data.goals, settings, pose=data.pose)
    except IKError as exc:
        raise RigError(f"solver: {exc}") from exc
    report_progress(0.9)
    t2 = time.perf_counter()

    channels = write.rotation_channels(ob, free_names, result.pose.rotations[:, model.free], seeds)
    keys = 0
    if frames is None:
        write.set_pose_channels(ob, channels)
    if frames is not None or keyframe:
        keys = write.write_keys(ob, channels, frame_list)
    if frames is not None:
        scene.frame_set(original_frame)  # show the keyed pose
    t3 = time.perf_counter()
    report_progress(1.0)

    report = RunReport(
        frames=frame_list,
        goal_names=[g.bone for g in model.goals],
        position_error=np.asarray(result.position_error, dtype=np.float64),
        rotation_error=np.asarray(result.rotation_error, dtype=np.float64),
        rotation_weight=np.array([g.rotation_weight for g in model.goals], dtype=np.float64),
        iterations=np.asarray(result.iterations, dtype=np.int64),
        converged=int(np.sum(result.success)),
        method=settings.method,
        mode=settings.mode,
        read_time=t1 - t0,
        solve_time=t2 - t1,
        write_time=t3 - t2,
        keys=keys,
        warnings=model.warnings,
    )
    store_results(ob, model, report)
    return report


def store_results(ob: Any, model: rig.RigModel, report: RunReport) -> None:
    """Keep the last run's results on the armature's properties (shown by the panel)."""
    props = ob.jacobian_ik
    for goal in props.goals:
        goal.error = goal.error_mean = goal.rotation_error = 0.0
    for e, goal in enumerate(model.goals):
        goal.error = float(report.position_error[:, e].max())
        goal.error_mean = float(report.position_error[:, e].mean())
        if goal.rotation_weight > 0:
            goal.rotation_error = float(report.rotation_error[:, e].max())
    props.last_frames = len(report.frames)
    props.last_converged = report.converged
    props.last_iterations = int(report.iterations.max())
    props.last_time = report.total_time
    props.last_keys = report.keys
