"""Solve an armature's goals for the current frame or a frame range: read, solve once, write.

This is the scripting API the operators and the headless script use::

    from bl_ext.user_default.jacobian_ik.bridge import run
    report = run(ob, scene, frames=range(1, 251))
    print(report.summary())
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Generator, Iterable, Sequence, Sized
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..solvers import Goals, IKError, Pose, Settings, Solver, SolveResult, flips, kernel, solve
from ..solvers.smooth import smooth as smooth_jitter
from . import actions, full_body, limits, poles, reduce, rig, starts, write
from .errors import Cancelled, RigError
from .settings import solver_settings
from .suspend import suspended

Array = NDArray[np.float64]

CHUNK_FRAMES = 500
"""Frames read and solved at a time: a long bake's working memory does not grow with its length
(only the solved rotations of the chain bones are kept until all frames are solved)."""
MAX_FRAMES = 100_000
"""Most frames one run solves (about 70 minutes at 24 fps); longer ranges are refused, to be
baked in parts: Blender keeps every key in memory (4 keys a bone a frame)."""


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
    full_keys: int = 0  # keys a full bake writes (every frame of every channel)
    # of solve_time, the seconds of a bake's passes over the whole range: the flip repair
    # (``solvers.flips.repair``) and the jitter smoothing (``solvers.smooth``)
    repair_time: float = 0.0
    smooth_time: float = 0.0
    # (F,) horizontal distance of the centre of mass from the support point (world units),
    # None when no goal has ``support`` on
    balance_distance: Array | None = None
    aim: NDArray[np.bool_] | None = None  # (E,) AIM goals (their error is the angle)
    # (F, E) each goal's state at each frame: "met", "out_of_reach" (farther than its chain
    # reaches), "conflict" (within reach, held off by the other goals of its IK tree)
    goal_status: NDArray[np.str_] | None = None

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
            if self.aim is not None and self.aim[e]:
                angle = np.degrees(self.rotation_error[:, e])
                stats = {"aim_max_deg": float(angle.max()), "aim_mean_deg": float(angle.mean())}
            if self.goal_status is not None:
                for state in ("met", "out_of_reach", "conflict"):
                    stats[f"frames_{state}"] = int(np.sum(self.goal_status[:, e] == state))
            goals[f"{e + 1}:{name}"] = stats
        out = {
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
                "solve_flip_repair": self.repair_time,
                "solve_smoothing": self.smooth_time,
                "write": self.write_time,
                "total": self.total_time,
            },
            "keys": self.keys,
            "full_keys": self.full_keys,
            "warnings": self.warnings,
        }
        if self.balance_distance is not None:
            d = self.balance_distance
            out["balance"] = {"max": float(d.max()), "mean": float(d.mean())}
        return out


@dataclass
class Prepared:
    """An armature read into the solver model once: goals, joint limits and IK stretch, poles
    (after the goals, as secondary effectors) and the reader of the poles' targets. Bakes,
    live posing and ``api.solve_pose`` all solve through ``prepare`` and ``solve_frames``."""

    model: rig.RigModel
    poles: poles.PoleReader


@dataclass
class LiveHooks:
    """What live posing (bridge/live_model.py) adds to ``solve_frames``: the armature's prepared
    one-frame ``solver``; ``start(data, goals)`` sets the start pose after the read (it may
    raise to skip the solve); the ``depsgraph`` to read from (a render's)."""

    solver: Solver
    start: Callable[[rig.FrameData, Goals], None]
    depsgraph: Any = None


def prepare(ob: Any) -> Prepared:
    """The solver model of ``ob`` at the current evaluation; IKError when the skeleton built
    from the rig is rejected, RigError for bad goals."""
    model = rig.build_model(ob)
    model = limits.apply_rig_limits(ob, model, ob.jacobian_ik.max_stretch)
    pole_list, pole_warnings = poles.find_poles(ob, model)
    model = poles.add_poles(model, pole_list)
    model.warnings.extend(pole_warnings)
    sk = model.skeleton
    # a bone's turns do not move a point at its own head
    head = (sk.eff_bone[:, None] == sk.dof_bone[None, :]) & sk.dof_rotational[None, :]
    head &= ~np.any(sk.eff_offset != 0.0, axis=1)[:, None]
    for e, goal in enumerate(model.goals):
        if not np.any(sk.dof_moves[e] & ~head[e]):  # a locked chain, or the head of a chain of 1
            model.warnings.append(
                f"{rig.goal_label(e, goal)}: no bone of its chain can move it (every one locked, "
                "or its effector is the head of its only bone): it stays where it is; lengthen "
                "its chain, use its tail or turn the goal off"
            )
    return Prepared(model, poles.PoleReader(ob, pole_list))


def solve_frames(
    ob: Any,
    prepared: Prepared,
    frames: Sequence[int],
    evaluate: Callable[[int], None],
    settings: Settings,
    *,
    last_pose: Pose | None = None,
    resume: dict[str, Any] | None = None,
    live: LiveHooks | None = None,
    recalled: starts.Recalled | None = None,
) -> tuple[rig.FrameData, Goals, SolveResult, float]:
    """Read ``frames`` (``evaluate`` moves the scene to each) and solve them in one call: the
    data read, the goals solved, the result and when the reading ended (perf_counter).

    Converge mode starts every frame from its read pose (chains with a pole from their rest
    pose); track mode starts from ``last_pose``'s last frame when given, with the method's
    state ``resume`` carried on, so chunks equal one solve. ``live``: see ``LiveHooks``.
    ``recalled``: where the chain bones' channels hold an earlier bake's keys, the poses that
    bake started from (bridge/starts.py). Raises IKError."""
    model, reader = prepared.model, prepared.poles
    dg = None if live is None else live.depsgraph
    data = rig.read_frames(ob, model, frames, reader.wrap(evaluate, dg), depsgraph=dg)
    if data.unscale is not None and reader.poles:  # the poles' targets in the unscaled model
        reader.unscale(data.unscale[:, len(model.goals) :])
    goals = reader.goals(data.goals, len(frames))
    if recalled is not None:
        free_names = [model.names[b] for b in model.free]
        recalled.apply(free_names, list(model.free), list(frames), data.pose)
    if live is not None:
        live.start(data, goals)
    if settings.mode == "converge":
        reader.reset_start(data.pose, model)
    if last_pose is not None and settings.mode == "track":
        # frame f starts from frame f-1's result across chunks too, with the method's state and
        # the adaptive clamp carried on (resume): chunks equal one solve (the bones no chain
        # moves keep the frame's own pose, as within a chunk)
        moved = model.free
        data.pose.rotations[0, moved] = last_pose.rotations[-1, moved]
        data.pose.locations[0, moved] = last_pose.locations[-1, moved]
        data.pose.stretch[0, moved] = last_pose.stretch[-1, moved]
    t1 = time.perf_counter()

    def solve_from(g: Goals, p: Pose, r: dict[str, Any] | None = None) -> SolveResult:
        if live is not None:
            return live.solver.solve(g, pose=p, resume=r)
        return solve(model.skeleton, g, settings, pose=p, resume=r)

    result = solve_from(goals, data.pose, resume)
    if settings.mode == "converge":  # move_root with poles: a second pass
        result = full_body.poles_follow_root(
            model, reader, data.goals, data.pose, result, solve_from
        )
    return data, goals, result, t1


def run(
    ob: Any,
    scene: Any,
    frames: Iterable[int] | None = None,
    *,
    view_layer: Any = None,
    mode: str | None = None,
    keyframe: bool = True,
    progress: Callable[[float], bool | None] | None = None,
    reduce_keys: bool = False,
    key_tolerance: float = 0.1,
    position_tolerance: float = 1e-3,
    new_action: bool = False,
) -> RunReport:
    """Solve ``ob``'s enabled goals and write the result; on failure raise RigError, write nothing.

    frames: None solves the current frame as it is (pose channels are set, and keyed when
        ``keyframe``); a range of frames (at most MAX_FRAMES) is read frame by frame, solved in
        batched calls of CHUNK_FRAMES frames and keyed (only inside the range) once every frame
        is solved; each frame starts from the chain bones' animated pose, or where an earlier
        bake of it started while its keys are unchanged (bridge/starts.py: baking again gives
        the same keys). mode: 'CONVERGE' or 'TRACK' (default: the stored mode).
    progress: called with a fraction in [0, 1] after each chunk; when it returns True the run
        stops and raises Cancelled, having written nothing.
    reduce_keys: a lean bake (bridge/reduce.py): keep only the keys Blender's Bezier curves
        need to reproduce every channel within ``key_tolerance`` (degrees) and every goal's
        effector within ``position_tolerance`` (world units).
    new_action: bake into a copy of the current action (bridge/actions.py); the source is kept.
    """
    steps = run_steps(
        ob,
        scene,
        frames,
        view_layer=view_layer,
        mode=mode,
        keyframe=keyframe,
        reduce_keys=reduce_keys,
        key_tolerance=key_tolerance,
        position_tolerance=position_tolerance,
        new_action=new_action,
    )
    while True:
        try:
            fraction = next(steps)
        except StopIteration as done:
            if progress is not None:
                progress(1.0)
            return done.value
        if progress is not None and progress(fraction):
            steps.close()  # restores the scene's frame
            raise Cancelled("cancelled: nothing was written")


def run_steps(
    ob: Any,
    scene: Any,
    frames: Iterable[int] | None = None,
    *,
    view_layer: Any = None,
    mode: str | None = None,
    keyframe: bool = True,
    reduce_keys: bool = False,
    key_tolerance: float = 0.1,
    position_tolerance: float = 1e-3,
    new_action: bool = False,
) -> Generator[float, None, RunReport]:
    """:func:`run` one chunk at a time: yields the fraction done after each solved chunk and
    returns the report; nothing is written before the last chunk is solved, so closing the
    generator early (a cancelled modal bake) leaves the rig as it was."""
    frame_list, evaluate = _frames(scene, frames, view_layer)
    if ob is None or ob.type != "ARMATURE":
        raise RigError("the active object is not an armature")
    rig.check_editable(ob, keys=frames is not None or keyframe)
    layer = view_layer or scene.view_layers[0]
    rig.check_evaluated(ob, layer)
    try:
        settings = solver_settings(ob.jacobian_ik, mode)
    except IKError as exc:
        raise RigError(f"settings: {exc}") from exc

    # the compiled loop's threads: Blender's own count (the Performance panel, ``blender -t``)
    kernel.set_threads(scene.render.threads)
    original_frame = scene.frame_current
    try:
        solved = yield from _solve_chunks(
            ob, frame_list, evaluate, settings, reduce_keys, layer.update, frames is not None
        )
    finally:
        if frames is not None:
            with suspended():
                scene.frame_set(original_frame)
    t2 = time.perf_counter()
    model = solved.model
    lean = (key_tolerance, position_tolerance) if reduce_keys else None
    keys, full_keys = _write(ob, solved, frame_list, frames is not None, keyframe, new_action, lean)
    if frames is not None:
        with suspended():
            scene.frame_set(original_frame)  # show the keyed pose
    t3 = time.perf_counter()

    distances = [x[1] for x in solved.body_parts if x[1] is not None]
    report = RunReport(
        frames=frame_list,
        goal_names=[g.bone for g in model.goals],
        position_error=solved.position_error,
        rotation_error=solved.rotation_error,
        rotation_weight=np.array([g.rotation_weight for g in model.goals], dtype=np.float64),
        iterations=solved.iterations,
        converged=int(np.sum(solved.success)),
        method=settings.method,
        mode=settings.mode,
        read_time=solved.read_time,
        solve_time=solved.solve_time,
        write_time=t3 - t2,
        keys=keys,
        warnings=model.warnings,
        full_keys=full_keys,
        repair_time=solved.passes_time[0],
        smooth_time=solved.passes_time[1],
        balance_distance=np.concatenate(distances) if distances else None,
        aim=np.array([getattr(g, "type", "REACH") == "AIM" for g in model.goals], dtype=bool),
        goal_status=solved.goal_status,
    )
    store_results(ob, model, report)
    return report


def _write(
    ob: Any,
    solved: _Solved,
    frame_list: list[int],
    bake: bool,
    keyframe: bool,
    new_action: bool,
    lean: tuple[float, float] | None,
) -> tuple[int, int]:
    """Write the solved rotations: one frame's pose (keyed with ``keyframe``), or a bake's keys
    (into a copy of the action with ``new_action``; only the keys needed with ``lean``, the
    key and position tolerances); (keys written, keys of a full bake). An action that animates
    other objects too is named in the warnings. Keys written in bulk tag nothing, so the
    armature is tagged: with NLA tracks the depsgraph kept evaluating the channels the action
    had before (a bake over a pushed-down walk played the walk back, 2.2 m off)."""
    channels = _channels(ob, solved)
    shared = actions.shared_with(ob) if (not new_action if bake else keyframe) else []
    if shared:
        solved.model.warnings.append(
            f"action {ob.animation_data.action.name!r} also animates {', '.join(shared)}: the "
            "keys written change it there too (New Action bakes into a copy)"
        )
    if not bake:
        write.set_pose_channels(ob, channels)
        keys = full_keys = write.write_keys(ob, channels, frame_list) if keyframe else 0
    else:
        if new_action:
            actions.new_action_for_bake(ob)
        if lean is not None:
            out = _write_lean(ob, channels, frame_list, solved, *lean)
            keys, full_keys = out.keys, out.full_keys
        else:
            keys = full_keys = write.write_keys(ob, channels, frame_list)
        if keys and solved.starts is not None:
            model = solved.model
            moved = {model.names[model.root]} if model.root >= 0 else set()
            starts.record(
                ob,
                solved.recalled,
                solved.free_names,
                frame_list,
                solved.starts,
                solved.seeds,
                moved,
            )
    if keys:
        ob.update_tag()
    return keys, full_keys


def _frames(
    scene: Any, frames: Iterable[int] | None, view_layer: Any
) -> tuple[list[int], Callable[[int], None]]:
    """The frames to solve and how to move the scene to one: the current frame as it is
    (``frames`` None) or each frame of the range; RigError for an empty or too long range."""
    if frames is None:
        if view_layer is None:
            view_layer = scene.view_layers[0]
        return [scene.frame_current], rig.current_evaluator(view_layer)
    if isinstance(frames, Sized) and len(frames) > MAX_FRAMES:
        raise RigError(
            f"{len(frames):,} frames: a bake is limited to {MAX_FRAMES:,} frames, "
            "bake the range in parts"
        )
    frame_list = [int(f) for f in frames]
    if not frame_list:
        raise RigError("the frame range is empty")
    if len(frame_list) > MAX_FRAMES:
        raise RigError(
            f"{len(frame_list):,} frames: a bake is limited to {MAX_FRAMES:,} frames, "
            "bake the range in parts"
        )
    return frame_list, rig.frame_evaluator(scene)


@dataclass
class _Solved:
    """Every chunk's result, joined: what the writing and the report need."""

    model: rig.RigModel
    free_names: list[str]
    seeds: list[Array]  # the chain bones' rotations before the run (continuity of the keys)
    stretched: list[int]  # the model's bones with IK stretch
    rotations: Array  # (F, free, 3, 3)
    position_error: Array  # (F, E) the goals' (the poles' effectors come after them)
    rotation_error: Array  # (F, E)
    iterations: NDArray[np.int64]
    success: NDArray[np.bool_]
    # per chunk: stretch of the stretched bones, and for a lean bake the start pose (the
    # bones the solver does not move) and the armature's world matrices
    extra: list[tuple[Array, Pose | None, Array | None]]
    body_parts: list[tuple[Array, Array | None]]  # per chunk: root locations, balance distances
    read_time: float
    solve_time: float
    passes_time: tuple[float, float]  # of solve_time: the flip repair's, the smoothing's
    # the largest factor from the solver's errors to the scene's (a bone above the chains
    # scaled: ``rig.FrameData.error_scale``; 1 when none is)
    error_scale: float = 1.0
    goal_status: NDArray[np.str_] | None = None  # (F, E) the goals' (``RunReport``)
    # the records of an earlier bake that held, and the chain bones' start pose (F, free) of
    # this one, None when too many to keep (bridge/starts.py)
    recalled: starts.Recalled = field(default_factory=starts.Recalled)
    starts: Pose | None = None


def _solve_chunks(
    ob: Any,
    frame_list: list[int],
    evaluate: Callable[[int], None],
    settings: Settings,
    reduce_keys: bool,
    update: Callable[[], None],
    bake: bool,
) -> Generator[float, None, _Solved]:
    """Read and solve ``frame_list`` CHUNK_FRAMES frames at a time (yielding the fraction done
    after each); RigError when the solver rejects the rig or a chunk. Writes nothing. A
    ``bake`` starts where an earlier bake of these frames started (bridge/starts.py); a
    single frame (Solve) from its channels, as live posing does."""
    read_time = solve_time = 0.0
    last_pose = None
    resume: dict[str, Any] | None = None
    t0 = time.perf_counter()
    try:
        evaluate(frame_list[0])
        prepared = prepare(ob)
        model = prepared.model
    except IKError as exc:  # the solver rejected the skeleton built from the rig
        raise RigError(f"rig: {exc}") from exc
    free_names = [model.names[b] for b in model.free]
    with suspended():
        rig.check_target_dependence(ob, free_names, update)
    recalled = starts.Recalled.load(ob, free_names) if bake else starts.Recalled()
    seeds = recalled.seeds(free_names, write.current_rotations(ob, free_names))
    stretched = limits.stretch_bones(model)
    read_time += time.perf_counter() - t0
    chunks: list[tuple[rig.FrameData, Goals, SolveResult]] = []
    for first in range(0, len(frame_list), CHUNK_FRAMES):
        t0 = time.perf_counter()
        chunk = frame_list[first : first + CHUNK_FRAMES]
        try:
            data, goals, result, t1 = solve_frames(
                ob,
                prepared,
                chunk,
                evaluate,
                settings,
                last_pose=last_pose,
                resume=resume,
                recalled=recalled,
            )
        except IKError as exc:
            raise RigError(f"solver: {exc}") from exc
        last_pose, resume = result.pose, result.resume
        # kept for the flip repair over the whole range; not the residual per iteration
        chunks.append((data, goals, replace(result, history=result.history[-1:])))
        read_time += t1 - t0
        solve_time += time.perf_counter() - t1
        yield 0.9 * (first + len(chunk)) / len(frame_list)
    t1 = time.perf_counter()
    try:
        results, passes = _repair_flips(model, prepared, settings, chunks)
    except IKError as exc:
        raise RigError(f"solver: {exc}") from exc
    solve_time += time.perf_counter() - t1
    n_goals = len(model.goals)
    scales = [
        float(d.error_scale[:, :n_goals].max()) for d, _, _ in chunks if d.error_scale is not None
    ]
    return _Solved(
        model,
        free_names,
        seeds,
        stretched,
        *_gather(model, chunks, results, stretched, reduce_keys),
        read_time,
        solve_time,
        passes,
        max(scales, default=1.0),
        _statuses(results, n_goals),
        recalled,
        _started(model, chunks),
    )


def _started(
    model: rig.RigModel, chunks: list[tuple[rig.FrameData, Goals, SolveResult]]
) -> Pose | None:
    """The chain bones' start pose (F, free) of every chunk, for ``starts.record``; None when
    there are more than it keeps."""
    if sum(len(d.frames) for d, _, _ in chunks) * len(model.free) * 9 > starts.MAX_VALUES:
        return None
    free = model.free
    return flips.join_poses(
        [
            Pose(d.pose.rotations[:, free], d.pose.locations[:, free], d.pose.stretch[:, free])
            for d, _, _ in chunks
        ]
    )


def _statuses(results: list[SolveResult], n_goals: int) -> NDArray[np.str_] | None:
    """The goals' states over the chunks' frames (``RunReport.goal_status``)."""
    if any(r.goal_status is None for r in results):
        return None
    return np.concatenate([np.asarray(r.goal_status)[:, :n_goals] for r in results])


def _gather(
    model: rig.RigModel,
    chunks: list[tuple[rig.FrameData, Goals, SolveResult]],
    results: list[SolveResult],
    stretched: list[int],
    reduce_keys: bool,
) -> tuple[
    Array,
    Array,
    Array,
    NDArray[np.int64],
    NDArray[np.bool_],
    list[tuple[Array, Pose | None, Array | None]],
    list[tuple[Array, Array | None]],
]:
    """The chunks' results joined: rotations of the free bones, position and rotation errors
    of the goals, iterations, success; per chunk what the writer needs besides (stretch, the
    read pose and base for lean keys) and the root's path and balance."""
    n_goals = len(model.goals)  # the poles' effectors come after the goals'
    pieces: list[tuple[Array, Array, Array, NDArray[np.int64], NDArray[np.bool_]]] = []
    extra: list[tuple[Array, Pose | None, Array | None]] = []
    body_parts: list[tuple[Array, Array | None]] = []
    for (data, goals, _), result in zip(chunks, results, strict=True):
        body_parts.append((result.pose.locations[:, max(model.root, 0)], result.balance_distance))
        position_error = np.asarray(result.position_error[:, :n_goals], dtype=np.float64)
        if data.error_scale is not None:  # a scaled bone above the chains: the scene's units
            position_error = position_error * data.error_scale[:, :n_goals]
        pieces.append(
            (
                result.pose.rotations[:, model.free],
                position_error,
                np.asarray(result.rotation_error[:, :n_goals], dtype=np.float64),
                np.asarray(result.iterations, dtype=np.int64),
                np.asarray(result.success, dtype=bool),
            )
        )
        extra.append(
            (
                result.pose.stretch[:, stretched],
                data.pose if reduce_keys else None,
                np.asarray(goals.base, dtype=np.float64) if reduce_keys else None,
            )
        )
    rotations, position, rotation, iterations, success = (
        np.concatenate(parts) for parts in zip(*pieces, strict=True)
    )
    return rotations, position, rotation, iterations, success, extra, body_parts


def _repair_flips(
    model: rig.RigModel,
    prepared: Prepared,
    settings: Settings,
    chunks: list[tuple[rig.FrameData, Goals, SolveResult]],
) -> tuple[list[SolveResult], tuple[float, float]]:
    """Each chunk's result, with the post-passes of converge mode run once over the whole range
    (the chunks joined, so they do not depend on where chunks end): ``solvers.flips.repair``
    re-solves the frames where a bone turns by more than ``Settings.flip_angle`` from their
    solved neighbours, then ``solvers.smooth`` takes the jitter out of the motion in the goals'
    null space (``Settings.smooth_passes``). Not with Move Root and poles (their second pass,
    ``full_body``). With the seconds each pass took."""
    results = [c[2] for c in chunks]
    frames = sum(r.pose.frames for r in results)
    if (
        settings.mode != "converge"
        or (settings.flip_angle <= 0.0 and settings.smooth_passes <= 0)
        or frames < 3
        or (model.root >= 0 and prepared.poles.poles)
    ):
        return results, (0.0, 0.0)
    start = flips.join_poses([c[0].pose for c in chunks])
    goals = flips.join_goals([c[1] for c in chunks])
    whole = flips.join_results(results)
    t0 = time.perf_counter()
    if settings.flip_angle > 0.0:
        whole, _ = flips.repair(model.skeleton, goals, settings, start, whole)
    t1 = time.perf_counter()
    whole, _ = smooth_jitter(model.skeleton, goals, settings, whole, settings.smooth_passes)
    passes = (t1 - t0, time.perf_counter() - t1)
    out, first = [], 0
    for r in results:
        index = np.arange(first, first + r.pose.frames)
        first += r.pose.frames
        out.append(flips.take_result(whole, index))
    return out, passes


def _channels(ob: Any, solved: _Solved) -> list[write.Channel]:
    """The channels to write: the chain bones' rotations, stretch, and Move Root's location;
    RigError when a value is not finite (nothing is written)."""
    model = solved.model
    channels = write.rotation_channels(ob, solved.free_names, solved.rotations, solved.seeds)
    channels += limits.stretch_channels(ob, model, np.concatenate([x[0] for x in solved.extra]))
    if model.root >= 0:  # move_root: the root's location (its rotation is in ``channels``)
        root_locations = np.concatenate([x[0] for x in solved.body_parts])
        channels += full_body.root_channels(model.names[model.root], root_locations)
    finite = np.all(np.isfinite(solved.rotations))
    if not finite or not all(np.isfinite(c.values).all() for c in channels):
        raise RigError("solver: the result contains NaN or inf; nothing was written")
    return channels


def _write_lean(
    ob: Any,
    channels: list[write.Channel],
    frame_list: list[int],
    solved: _Solved,
    key_tolerance: float,
    position_tolerance: float,
) -> reduce.ReduceReport:
    """A lean bake's keys (bridge/reduce.py), checked against the solved effectors (in the
    solver's model: where a bone above the chains is scaled, the position tolerance over the
    largest scale, so the scene's effectors keep to it)."""
    poses = [x[1] for x in solved.extra if x[1] is not None]
    template = Pose(*(np.concatenate([getattr(p, a) for p in poses]) for a in Pose.__annotations__))
    lean = reduce.write_reduced(
        ob,
        channels,
        frame_list,
        solved.model.skeleton,
        template,
        np.concatenate([x[2] for x in solved.extra if x[2] is not None]),
        len(solved.model.goals),
        math.radians(key_tolerance),
        position_tolerance / solved.error_scale,
    )
    return replace(lean, position_error=lean.position_error * solved.error_scale)


def store_results(ob: Any, model: rig.RigModel, report: RunReport) -> None:
    """Keep the last run's results on the armature's properties (shown by the panel)."""
    props = ob.jacobian_ik
    for goal in props.goals:
        goal.error = goal.error_mean = goal.rotation_error = 0.0
    for e, goal in enumerate(model.goals):
        goal.error = float(report.position_error[:, e].max())
        goal.error_mean = float(report.position_error[:, e].mean())
        if goal.rotation_weight > 0 or getattr(goal, "type", "REACH") == "AIM":
            goal.rotation_error = float(report.rotation_error[:, e].max())
    props.last_frames = len(report.frames)
    props.last_converged = report.converged
    props.last_iterations = int(report.iterations.max())
    props.last_time = report.total_time
    props.last_keys = report.keys
    d = report.balance_distance
    props.last_balance = -1.0 if d is None else float(d.max())
