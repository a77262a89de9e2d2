"""Live solving: armatures with ``jacobian_ik.use_live`` follow their targets as they move.

A ``depsgraph_update_post`` handler re-solves the current frame of every live armature whose
targets (or itself) changed, warm-started from the current pose, and writes the chain bones'
rotation channels (keyed at the current frame when auto-keying is on). It is registered while
at least one armature is live (``sync_handler``, called by the property's update callback and
after a file is loaded) and removed otherwise and on unregister.

Re-entry: Blender evaluates once more after the handler without calling handlers again, so
writing the pose does not trigger it; a flag guards against a nested evaluation anyway, and an
update whose targets, armature and pose are what the last solve saw and wrote is skipped.
The rig model is cached per armature (by name) and rebuilt when the goals, the solver
settings, the rest pose or (when the armature itself was updated) the chains' IK settings
change. The cache holds no Blender data, so undo and file loads cannot leave it dangling.
"""

from __future__ import annotations

from typing import Any

import bpy
from bpy.app.handlers import persistent

from .bridge.errors import RigError
from .bridge.live_model import LiveModel, LiveResult
from .bridge.settings import solver_settings
from .solvers import IKError

_models: dict[str, LiveModel] = {}
_errors: dict[str, str] = {}  # armature name -> the message of its last failed rebuild
_busy = False


def live_armatures() -> list[Any]:
    """Armature objects of the open file with live solving on."""
    return [
        ob
        for ob in bpy.data.objects
        if ob.type == "ARMATURE" and ob.library is None and ob.jacobian_ik.use_live
    ]


def handler_installed() -> int:
    """How many times our handler is in ``depsgraph_update_post`` (0 or 1)."""
    return sum(h is on_depsgraph_update for h in bpy.app.handlers.depsgraph_update_post)


def sync_handler() -> None:
    """Install the depsgraph handler (once) when an armature is live, remove it otherwise."""
    handlers = bpy.app.handlers.depsgraph_update_post
    wanted = bool(live_armatures())
    while not wanted and on_depsgraph_update in handlers:
        handlers.remove(on_depsgraph_update)
    if wanted and on_depsgraph_update not in handlers:
        handlers.append(on_depsgraph_update)
    live = {ob.name for ob in live_armatures()}
    for name in list(_models):
        if name not in live:
            del _models[name]


def use_live_changed(props: Any, context: Any) -> None:
    """Update callback of ``use_live``."""
    sync_handler()


def last_error(ob: Any) -> str:
    """Why the live armature ``ob`` is not being solved ('' when it is)."""
    return _errors.get(ob.name, "")


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
    ob: Any, scene: Any, *, check_ik: bool = False, force: bool = False
) -> LiveResult | None:
    """One live update of ``ob``: solve the current frame if something moved, write the pose,
    key it when auto-keying is on. None when skipped; raises RigError on bad input."""
    model = _model(ob, check_ik)
    frame = scene.frame_current if scene.tool_settings.use_keyframe_insert_auto else None
    try:
        live = model.update(ob, keyframe_at=frame, force=force)
    except IKError as exc:
        raise RigError(f"solver: {exc}") from exc
    if live is not None:
        store(ob, live)
    return live


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


@persistent
def on_depsgraph_update(scene: Any, depsgraph: Any) -> None:
    """Re-solve every live armature of ``scene`` (see the module docstring)."""
    global _busy
    if _busy:
        return
    _busy = True
    try:
        updated: set[str] | None = None
        for ob in live_armatures():
            if scene.objects.get(ob.name) is None or ob.mode == "EDIT":
                continue
            if updated is None:
                updated = _updated_names(depsgraph)
            check_ik = ob.name in updated or ob.data.name in updated
            try:
                update_armature(ob, scene, check_ik=check_ik)
            except RigError as exc:  # a half-made goal while editing: keep the last pose
                _models.pop(ob.name, None)
                _errors[ob.name] = str(exc)
            else:
                _errors.pop(ob.name, None)
    finally:
        _busy = False


@persistent
def on_load_post(*_args: Any) -> None:
    """A file was loaded: forget the old file's models, (re)install the handler as needed."""
    _models.clear()
    _errors.clear()
    sync_handler()


def register() -> None:
    if on_load_post not in bpy.app.handlers.load_post:
        bpy.app.handlers.load_post.append(on_load_post)
    if isinstance(bpy.data, bpy.types.BlendData):  # not during Blender's start-up
        sync_handler()


def unregister() -> None:
    for handlers, fn in (
        (bpy.app.handlers.depsgraph_update_post, on_depsgraph_update),
        (bpy.app.handlers.load_post, on_load_post),
    ):
        while fn in handlers:
            handlers.remove(fn)
    _models.clear()
    _errors.clear()
