"""Poll helpers that say why an operator is unavailable (``poll_message_set``)."""

from __future__ import annotations

from typing import Any


def armature(cls: Any, context: Any) -> bool:
    """The context has an armature object to work on."""
    ob = context.object
    if ob is None or ob.type != "ARMATURE":
        cls.poll_message_set("Select an armature object")
        return False
    if ob.library is not None:
        cls.poll_message_set("The armature is linked from a library")
        return False
    if ob.mode == "EDIT":
        cls.poll_message_set("Leave edit mode first")
        return False
    return True


def armature_with_goals(cls: Any, context: Any) -> bool:
    """An armature with at least one enabled goal."""
    if not armature(cls, context):
        return False
    if not any(g.enabled for g in context.object.jacobian_ik.goals):
        cls.poll_message_set("The armature has no enabled goals: add one first")
        return False
    return True
