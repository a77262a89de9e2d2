"""Operators: goals (add, remove, import IK constraints) and solving (current frame, bake)."""

import bpy

from .goals import (
    JACOBIAN_IK_OT_add_goal,
    JACOBIAN_IK_OT_import_constraints,
    JACOBIAN_IK_OT_remove_goal,
    JACOBIAN_IK_OT_restore_constraints,
)
from .solve import JACOBIAN_IK_OT_bake, JACOBIAN_IK_OT_solve

classes = (
    JACOBIAN_IK_OT_add_goal,
    JACOBIAN_IK_OT_remove_goal,
    JACOBIAN_IK_OT_import_constraints,
    JACOBIAN_IK_OT_restore_constraints,
    JACOBIAN_IK_OT_solve,
    JACOBIAN_IK_OT_bake,
)


def register() -> None:
    for cls in classes:
        bpy.utils.register_class(cls)


def unregister() -> None:
    for cls in reversed(classes):
        bpy.utils.unregister_class(cls)
