"""Blender side of Jacobian IK: read armatures and goals into the solver, write poses and keys.

Scripting entry point: :func:`run` (``from bl_ext.user_default.jacobian_ik.bridge import run``).
"""

from .errors import Cancelled, RigError
from .run import RunReport, run, run_steps

__all__ = ["Cancelled", "RigError", "RunReport", "run", "run_steps"]
