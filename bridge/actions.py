"""Bake into a new action: the source action is copied, kept and left untouched.

``new_action_for_bake(ob)`` copies the armature's current action (all its channels, so the
new action plays back on its own exactly like the source plus the baked chains) as
``"<action>_jik"`` (``"<object>_jik"`` when there is none: a new empty action; a copy baked
again gets Blender's numbering, ``"<action>_jik.001"``), assigns the
copy to the armature and gives the source a fake user, so it is kept in the file even with no
other user: both can be compared, or mixed in the NLA (push either one down to a track).
"""

from __future__ import annotations

from typing import Any

import bpy

SUFFIX = "_jik"


def base_name(name: str) -> str:
    """``name`` without the suffix of an earlier bake's copy (``"Walk_jik.002"`` -> ``"Walk"``),
    so baking a copy into a new action again gives ``Walk_jik.003``, not ``Walk_jik.002_jik``."""
    stem, dot, number = name.rpartition(".")
    if dot and number.isdigit() and stem.endswith(SUFFIX):
        name = stem
    return name.removesuffix(SUFFIX)


def new_action_for_bake(ob: Any) -> tuple[Any, Any | None]:
    """Assign a new action to ``ob`` for a bake; returns (new action, source action or None)."""
    if ob.animation_data is None:
        ob.animation_data_create()
    ad = ob.animation_data
    source = ad.action
    if source is None:
        action = bpy.data.actions.new(f"{ob.name}{SUFFIX}")
    else:
        slot = getattr(ad, "action_slot", None)
        action = source.copy()
        action.name = f"{base_name(source.name)}{SUFFIX}"  # Blender numbers repeats: .001
        source.use_fake_user = True
    ad.action = action
    if source is not None and slot is not None and hasattr(action, "slots"):
        # Blender 4.4+: keep the slot the object used (the copy has the same slots)
        match = action.slots.get(slot.identifier) if hasattr(action.slots, "get") else None
        if match is not None:
            ad.action_slot = match
    return action, source


def shared_with(ob: Any) -> list[str]:
    """The other objects that ``ob``'s action animates, as their action (through the same slot,
    Blender 4.4+) or in an NLA strip: keys baked into it change their animation too."""
    ad = ob.animation_data
    action = ad.action if ad is not None else None
    if action is None or action.users < 2:
        return []
    slot = getattr(ad, "action_slot", None)
    out = []
    for other in bpy.data.objects:
        other_ad = other.animation_data
        if other == ob or other_ad is None:
            continue
        uses = [(other_ad.action, getattr(other_ad, "action_slot", None))] + [
            (strip.action, getattr(strip, "action_slot", None))
            for track in other_ad.nla_tracks
            for strip in track.strips
        ]
        # (with slots, only the same slot animates; an object with none assigned is not)
        if any(a == action and (slot is None or s == slot) for a, s in uses):
            out.append(other.name)
    return out
