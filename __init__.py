"""Jacobian IK: Jacobian-based inverse kinematics for Blender armatures (extension entry point).

The solver lives in ``solvers`` (numpy only); ``bridge`` reads rigs and writes poses and keys;
``operators`` and ``panels`` are the user interface.
"""

from . import operators, panels, properties


def register() -> None:
    properties.register()
    operators.register()
    panels.register()


def unregister() -> None:
    panels.unregister()
    operators.unregister()
    properties.unregister()
