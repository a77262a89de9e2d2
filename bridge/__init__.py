"""Blender side of Jacobian IK: read armatures and goals into the solver, write poses and keys.

Scripting entry point: :func:`run` (``from bl_ext.user_default.jacobian_ik.bridge import run``).
"""

from .errors import RigError
from .run import RunReport, run

__all__ = ["RigError", "RunReport", "run"]
