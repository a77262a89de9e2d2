"""Jacobian IK solver core: pure numpy, no Blender.

Build a ``Skeleton`` from arrays, describe ``Goals``, call ``solve``; see docs/solver-api.md
and the README's scripting section.
"""

from .aim import AXIS_VECTORS
from .balance import Balance
from .errors import GoalError, IKError, SettingsError, SkeletonError
from .goals import Goals
from .methods import METHODS, Method, make_method
from .skeleton import Effector, Joint, Pose, Skeleton
from .so3 import angle_axis, exp_so3
from .solve import Settings, SolveResult, solve
from .solver import Solver

__all__ = [
    "AXIS_VECTORS",
    "METHODS",
    "Balance",
    "Effector",
    "GoalError",
    "Goals",
    "IKError",
    "Joint",
    "Method",
    "Pose",
    "Settings",
    "SettingsError",
    "Skeleton",
    "SkeletonError",
    "SolveResult",
    "Solver",
    "angle_axis",
    "exp_so3",
    "make_method",
    "solve",
]
