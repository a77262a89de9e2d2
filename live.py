"""Live solving: armatures with ``jacobian_ik.use_live`` follow their targets as they move.

Three handlers, installed while at least one armature is live (``sync_handler``, called by the
property's update callback and after a file is loaded) and removed otherwise and on unregister:

- ``depsgraph_update_post`` (a target or the armature was moved, e.g. dragged): re-solve the
  current frame of every live armature whose inputs changed, warm-started from the current
  pose, and write the chain bones' rotation channels. With auto-keying on, the drag's keys are
  written once when it ends (``_key_timer``), not on every update.
- ``frame_change_post`` (scrubbing, playback, ``frame_set``, rendering): solve the new frame
  before it is drawn or rendered, read and solved as a Converge bake reads and solves it. Playing
  (the frame next to the one solved last) starts from that frame's solution, so the pose stays
  coherent; a jump starts from the animated pose. Either way every goal within reach is met (a
  neighbour's start that misses one is retried from the animated pose), so a frame's goals do
  not depend on how it was reached; on redundant chains the pose may (``FRAME_START`` in
  bridge/live_model.py; docs/live.md has the measurements). The targets and the pose are read as
  the handler's depsgraph evaluated them (a render's own depsgraph included, poles too);
  Blender evaluates the scene once more after the handler when it wrote something, so what is
  drawn or rendered is the solved pose. Nothing is keyed.
- ``frame_change_pre``: keys still pending from a drag are written before the frame changes.

Re-entry: a flag makes the handlers return at once while one of them runs, and an update whose
targets, armature and pose are what the last solve saw and wrote is skipped. A goal that cannot
be solved (deleted target, NaN, a missing bone) switches Live off for that armature with the
message in ``last_error`` (shown in the panel), so it does not fail on every frame; armatures
without enabled goals are not solved at all. The rig model is cached per armature (by name)
and rebuilt when the goals, the solver settings, the rest pose or (when the armature itself
was updated) the chains' IK settings change. Every update points it at the current goal items
and pole objects first, so undo and file loads cannot leave it dangling.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import bpy
from bpy.app.handlers import persistent

from .bridge.errors import RigError
from .bridge.live_model import LiveModel, LiveResult
from .bridge.settings import solver_settings
from .bridge.suspend import is_suspended
from .solvers import IKError

_models: dict[str, LiveModel] = {}
_errors: dict[str, str] = {}  # armature name -> why it is not (or no longer) solved
_pending_keys: dict[str, int] = {}  # armature name -> the frame a drag's keys are due at
_busy = False

# While a drag runs, the key timer looks again this often (seconds).
KEY_POLL = 0.1


def live_armatures() -> list[Any]:
    """Armature objects of the open file with live solving on."""
    return [ob for ob in _armatures() if ob.jacobian_ik.use_live]


# The names of the file's own armature objects when they were last listed, and the user counts
# of the file's armature data then (``_armatures``).
_armature_names: tuple[tuple[int, ...], list[str]] | None = None


def _armatures() -> list[Any]:
    """The file's own (not linked) armature objects: by name from the last listing while the
    armature data have the users they had then (an armature object added, duplicated, deleted
    or given other data changes them) and each name still gives an armature (a rename), else
    listed again. Every handler call asks, and going through a scene of 5,000 objects took
    0.47 ms; the armature data are few."""
    global _armature_names
    users = tuple(arm.users for arm in bpy.data.armatures)
    objects = bpy.data.objects
    if _armature_names is not None and _armature_names[0] == users:
        kept = [objects.get((name, None)) for name in _armature_names[1]]
        if all(ob is not None and ob.type == "ARMATURE" for ob in kept):
            return kept
    found = [ob for ob in objects if ob.type == "ARMATURE" and ob.library is None]
    _armature_names = (users, [ob.name for ob in found])
    return found


def _handler_lists() -> list[tuple[list[Any], Callable[..., None]]]:
    """(Blender's handler list, our handler) of every handler live solving installs."""
    h = bpy.app.handlers
    return [
        (h.depsgraph_update_post, on_depsgraph_update),
        (h.frame_change_post, on_frame_change),
        (h.frame_change_pre, on_frame_change_pre),
    ]


def handler_installed() -> int:
    """How many times our depsgraph handler is in ``depsgraph_update_post`` (0 or 1)."""
    return sum(h is on_depsgraph_update for h in bpy.app.handlers.depsgraph_update_post)


def frame_handler_installed() -> int:
    """How many times our frame handler is in ``frame_change_post`` (0 or 1)."""
    return sum(h is on_frame_change for h in bpy.app.handlers.frame_change_post)


def sync_handler() -> None:
    """Install the handlers (once) when an armature is live, remove them otherwise.

    Inside one of our handlers Blender is iterating a handler list, and removing from it then
    would skip the handler after ours: the removal is deferred to a timer in that case."""
    wanted = bool(live_armatures())
    if not wanted and _busy:
        if not bpy.app.timers.is_registered(_deferred_sync):
            bpy.app.timers.register(_deferred_sync, first_interval=0.0)
        return
    for handlers, fn in _handler_lists():
        while not wanted and fn in handlers:
            handlers.remove(fn)
        if wanted and fn not in handlers:
            handlers.append(fn)
    live = {ob.name for ob in live_armatures()}
    for name in list(_models):
        if name not in live:
            del _models[name]
    for name in list(_pending_keys):
        if name not in live:
            del _pending_keys[name]


def _deferred_sync() -> None:
    """Timer: ``sync_handler`` outside our handlers."""
    sync_handler()


def use_live_changed(props: Any, context: Any) -> None:
    """Update callback of ``use_live``."""
    ob = props.id_data
    if props.use_live and ob is not None:
        _errors.pop(ob.name, None)  # switched on again: try again
    sync_handler()


def last_error(ob: Any) -> str:
    """Why the live armature ``ob`` is not being solved, or why Live was switched off ('')."""
    return _errors.get(ob.name, "")


def has_goals(ob: Any) -> bool:
    """Whether ``ob`` has an enabled goal (armatures without one are never solved)."""
    return any(g.enabled for g in ob.jacobian_ik.goals)


def _model(ob: Any, check_ik: bool) -> LiveModel:
    """The cached model of ``ob``, rebuilt when it no longer matches; raises RigError."""
    try:
        model = _models.get(ob.name)
        if model is None or not model.matches(ob, check_ik):
            _models.pop(ob.name, None)
            model = LiveModel(ob, solver_settings(ob.jacobian_ik))
            _models[ob.name] = model
    except IKError as exc:  # the settings, or the skeleton built from the rig, were rejected
        raise RigError(str(exc)) from exc
    return model


def store(ob: Any, live: LiveResult) -> None:
    """Show a live update on the armature's properties (the panel's feedback)."""
    props = ob.jacobian_ik
    res = live.result
    enabled = [g for g in props.goals if g.enabled]
    for e, goal in enumerate(enabled):
        goal.error = goal.error_mean = float(res.position_error[0, e])
        goal.rotation_error = float(res.rotation_error[0, e]) if goal.rotation_weight > 0 else 0.0
        if goal.reachable != bool(live.reachable[e]):
            goal.reachable = bool(live.reachable[e])
    props.live_iterations = int(res.iterations[0])
    props.live_time = live.total_time


def update_armature(
    ob: Any,
    scene: Any,
    *,
    check_ik: bool = False,
    force: bool = False,
    start: str = "current",
    depsgraph: Any = None,
) -> LiveResult | None:
    """One live update of ``ob``: solve the current frame if something moved (from ``start``,
    see ``LiveModel.solve``) and write the pose. Nothing is keyed here (see
    ``_key_timer``). None when skipped; raises RigError on bad input."""
    model = _model(ob, check_ik)
    try:
        live = model.update(
            ob, force=force, start=start, frame=scene.frame_current, depsgraph=depsgraph
        )
    except IKError as exc:
        raise RigError(f"solver: {exc}") from exc
    if live is not None:
        store(ob, live)
    return live


def switch_off(ob: Any, message: str) -> None:
    """A goal of ``ob`` cannot be solved: Live off for it, with the message in the panel."""
    _models.pop(ob.name, None)
    _pending_keys.pop(ob.name, None)
    _errors[ob.name] = f"Live switched off: {message}"
    ob.jacobian_ik.use_live = False  # its update callback removes the handlers if none is left
    print(f"Jacobian IK: {ob.name}: live solving switched off: {message}")


def _updated_names(depsgraph: Any) -> set[str]:
    """Names of the original objects and armatures this evaluation updated."""
    names = set()
    for update in depsgraph.updates:
        owner = update.id
        if isinstance(owner, bpy.types.Object | bpy.types.Armature):
            original = owner.original
            if original is not None:
                names.add(original.name)
    return names


def _scene_armatures(scene: Any) -> list[Any]:
    """The live armatures of ``scene`` that can be solved now (in it, not in edit mode, showing
    their pose, not the Rest Position, with an enabled goal). In Rest Position the pose is not
    evaluated: a solve there used the rest pose of the bones above the chains, and nothing of
    it shows; switched back to Pose Position, the next update solves."""
    return [
        ob
        for ob in live_armatures()
        if scene.objects.get(ob.name) is not None
        and ob.mode != "EDIT"
        and ob.data.pose_position != "REST"
        and has_goals(ob)
    ]


@persistent
def on_depsgraph_update(scene: Any, depsgraph: Any) -> None:
    """Re-solve every live armature of ``scene`` whose inputs moved (see the module
    docstring); with auto-keying on, note the frame to key when the drag ends."""
    global _busy
    if _busy or is_suspended():
        return
    _busy = True
    try:
        updated: set[str] | None = None
        auto_key = scene.tool_settings.use_keyframe_insert_auto
        for ob in _scene_armatures(scene):
            if updated is None:
                updated = _updated_names(depsgraph)
            check_ik = ob.name in updated or ob.data.name in updated
            try:
                live = update_armature(ob, scene, check_ik=check_ik)
            except RigError as exc:
                switch_off(ob, str(exc))
                continue
            _errors.pop(ob.name, None)
            if live is not None and auto_key:
                _pending_keys[ob.name] = scene.frame_current
        if _pending_keys and not bpy.app.timers.is_registered(_key_timer):
            bpy.app.timers.register(_key_timer, first_interval=KEY_POLL)
    finally:
        _busy = False


@persistent
def on_frame_change(scene: Any, depsgraph: Any = None) -> None:
    """Solve the new frame of every live armature of ``scene`` (see the module docstring)."""
    global _busy
    if _busy or is_suspended():
        return
    _busy = True
    try:
        for ob in _scene_armatures(scene):
            try:  # from the animated pose, or the neighbour's solution (FRAME_START)
                update_armature(ob, scene, force=True, start="frame", depsgraph=depsgraph)
            except RigError as exc:
                switch_off(ob, str(exc))
                continue
            _errors.pop(ob.name, None)
    finally:
        _busy = False


@persistent
def on_frame_change_pre(scene: Any, depsgraph: Any = None) -> None:
    """Before the frame changes: key what a drag left pending (its pose is still there)."""
    if _pending_keys and not _busy and not is_suspended():
        flush_keys()


def drag_running() -> bool:
    """Whether a transform (a drag of a target) is still running in some window."""
    wm = bpy.context.window_manager
    for window in getattr(wm, "windows", ()):
        for op in getattr(window, "modal_operators", ()):
            if op.bl_idname.startswith(("TRANSFORM_OT_", "VIEW3D_OT_", "GIZMO")):
                return True
    return False


def flush_keys() -> int:
    """Key the pose of every armature a drag left pending, at the drag's frame, as one undo
    step; returns the keys written."""
    global _busy
    pending = dict(_pending_keys)
    _pending_keys.clear()
    keys = 0
    _busy = True  # keying tags the armature: no re-solve for it
    try:
        for name, frame in pending.items():
            ob = bpy.data.objects.get(name)
            model = _models.get(name)
            if ob is None or model is None or not ob.jacobian_ik.use_live:
                continue
            keys += model.key_pose(ob, frame)
    finally:
        _busy = False
    if keys:
        try:  # all the drag's keys: one undo step
            bpy.ops.ed.undo_push(message="Jacobian IK: key live pose")
        except RuntimeError:  # no undo stack (background mode)
            pass
    return keys


def _key_timer() -> float | None:
    """Timer: once no drag runs any more, write the drag's keys (one per channel)."""
    if not _pending_keys:
        return None
    if drag_running():
        return KEY_POLL
    flush_keys()
    return None


@persistent
def on_load_post(*_args: Any) -> None:
    """A file was loaded: forget the old file's models, (re)install the handlers as needed."""
    global _armature_names
    _armature_names = None
    _models.clear()
    _errors.clear()
    _pending_keys.clear()
    sync_handler()


def register() -> None:
    if on_load_post not in bpy.app.handlers.load_post:
        bpy.app.handlers.load_post.append(on_load_post)
    if isinstance(bpy.data, bpy.types.BlendData):  # not during Blender's start-up
        sync_handler()


def unregister() -> None:
    for handlers, fn in (*_handler_lists(), (bpy.app.handlers.load_post, on_load_post)):
        while fn in handlers:
            handlers.remove(fn)
    for timer in (_key_timer, _deferred_sync):
        if bpy.app.timers.is_registered(timer):
            bpy.app.timers.unregister(timer)
    _models.clear()
    _errors.clear()
    _pending_keys.clear()
