"""Operators: goals (add, remove, import IK constraints), solving (current frame, bake) and
Rigify FK bakes."""

import bpy

from .goals import (
    JACOBIAN_IK_OT_add_goal,
    JACOBIAN_IK_OT_import_constraints,
    JACOBIAN_IK_OT_remove_goal,
    JACOBIAN_IK_OT_restore_constraints,
)
from .rigify import JACOBIAN_IK_OT_bake_rigify_fk
from .solve import JACOBIAN_IK_OT_bake, JACOBIAN_IK_OT_solve

classes = (
    JACOBIAN_IK_OT_add_goal,
    JACOBIAN_IK_OT_remove_goal,
    JACOBIAN_IK_OT_import_constraints,
    JACOBIAN_IK_OT_restore_constraints,
    JACOBIAN_IK_OT_solve,
    JACOBIAN_IK_OT_bake,
    JACOBIAN_IK_OT_bake_rigify_fk,
)


def register() -> None:
    for cls in classes:
        bpy.utils.register_class(cls)


def unregister() -> None:
    for cls in reversed(classes):
        bpy.utils.unregister_class(cls)
