"""Stash an IK constraint on a goal (remove it from the bone, keep its settings) and restore it.

Import IK Constraints removes the constraints it converts instead of muting them: Blender 5.0
evaluates a rig whose IK chains overlap with different roots differently from one pass over the
frames to the next while those constraints exist, even muted or at influence 0, so a baked rig
would not play back the same way twice. What is needed to put a constraint back exactly is kept
on the goal (``goal.stash``): its bone, name, place in the stack, its object pointers (target,
pole target) and every other writable setting as JSON (chain count, iterations, use tail,
stretch, weights, pole angle and sub-target, influence, mute, spaces, ...). Keys on the
constraint's settings stay in the action under the constraint's path and apply again once it is
back under its name. Drivers would be deleted with the constraint (Rigify drives the mute of its
pole IK constraints): they are parked instead, muted and under the path ``PARK`` + their path,
and put back as they were.
"""

from __future__ import annotations

import json
from typing import Any

# Set first and kept as pointers on the stash: the sub-targets are only valid once these are.
POINTERS = ("target", "pole_target")
PARK = "jacobian_ik_stash."


def settings_of(con: Any) -> dict[str, Any]:
    """Every writable setting of ``con`` but the object pointers of ``POINTERS`` and its name,
    and its type. Other object pointers (``space_object``) are kept by name."""
    out: dict[str, Any] = {}
    for prop in con.bl_rna.properties:
        key = prop.identifier
        if prop.is_readonly or key in POINTERS or key in ("name", "rna_type", "enabled"):
            continue
        value = getattr(con, key)
        if prop.type == "POINTER":
            out[key] = {"object": value.name if value is not None else None}
        elif prop.type == "ENUM" and prop.is_enum_flag:
            out[key] = sorted(value)
        elif prop.type in {"BOOLEAN", "INT", "FLOAT"} and getattr(prop, "array_length", None):
            out[key] = list(value)
        elif prop.type in {"BOOLEAN", "INT", "FLOAT", "STRING", "ENUM"}:
            out[key] = value
    out["type"] = con.type
    return out


def stash(con: Any, bone: str, index: int, store: Any) -> None:
    """Keep ``con`` (the ``index``-th constraint of pose bone ``bone``) in ``store`` (a goal's
    ``stash``). The caller removes the constraint."""
    store.stored = True
    store.bone, store.name, store.index = bone, con.name, index
    store.target, store.pole_target = con.target, con.pole_target
    store.settings = json.dumps(settings_of(con), sort_keys=True)
    store.drivers = json.dumps(_park_drivers(con, bone))


def _constraint_path(bone: str, name: str) -> str:
    return f'pose.bones["{_escape(bone)}"].constraints["{_escape(name)}"].'


def _escape(name: str) -> str:
    import bpy

    return str(bpy.utils.escape_identifier(name))


def _park_drivers(con: Any, bone: str) -> list[tuple[str, int, bool]]:
    """Mute the drivers of ``con`` and move them under ``PARK``: (path, index, mute) of each."""
    ad = con.id_data.animation_data
    if ad is None:
        return []
    prefix = _constraint_path(bone, con.name)
    parked = []
    for fc in ad.drivers:
        if fc.data_path.startswith(prefix):
            parked.append((fc.data_path, fc.array_index, fc.mute))
            fc.data_path, fc.mute = PARK + fc.data_path, True
    return parked


def _unpark_drivers(ob: Any, parked: list[list[Any]]) -> None:
    ad = ob.animation_data
    if ad is None:
        return
    for path, index, mute in parked:
        fc = ad.drivers.find(PARK + path, index=index)
        if fc is not None:
            fc.data_path, fc.mute = path, mute


def restore(ob: Any, store: Any, stashed_before: int = 0) -> Any:
    """Put the constraint kept in ``store`` back on its bone of ``ob`` at its place in the
    stack, with its name and settings; ``store`` is emptied. Returns the constraint.

    ``stashed_before``: how many constraints of the same bone that were above it in the stack
    are still stashed. Raises KeyError when the bone is gone."""
    pbone = ob.pose.bones[store.bone]
    settings = json.loads(store.settings)
    # a new constraint becomes the bone's active one: keep the active one as it was
    active = next((c for c in pbone.constraints if c.active), None)
    con = pbone.constraints.new(settings.get("type", "IK"))
    con.name = store.name
    for key in POINTERS:
        setattr(con, key, getattr(store, key))
    for key, value in settings.items():
        if key == "type":
            continue
        if isinstance(value, dict):
            name = value.get("object")
            value = None if name is None else _object(name)
        elif isinstance(value, list) and key in con.bl_rna.properties:
            prop = con.bl_rna.properties[key]
            value = set(value) if prop.type == "ENUM" else value
        setattr(con, key, value)
    if not settings.get("active") and active is not None:
        active.active = True
    count = len(pbone.constraints)
    pbone.constraints.move(count - 1, max(0, min(store.index - stashed_before, count - 1)))
    _unpark_drivers(ob, json.loads(store.drivers or "[]"))
    store.stored = False
    store.target = store.pole_target = None
    store.settings = store.drivers = ""
    return con


def stashed_before(goals: Any, store: Any) -> int:
    """How many of ``goals`` hold a stashed constraint of ``store``'s bone above ``store``'s."""
    return sum(
        1
        for g in goals
        if g.stash.stored and g.stash.bone == store.bone and g.stash.index < store.index
    )


def _object(name: str) -> Any:
    import bpy

    return bpy.data.objects.get(name)
