"""Jacobian IK: Jacobian-based inverse kinematics for Blender armatures (extension entry point).

The solver lives in ``solvers`` (numpy only); ``bridge`` reads rigs and writes poses and keys;
``operators`` and ``panels`` are the user interface.
"""

# The submodules import bpy, so they are imported when Blender registers the add-on, not when
# the package is imported: the numpy-only solver stays usable (and testable) without Blender.


def register() -> None:
    from . import draw, live, operators, panels, properties

    properties.register()
    operators.register()
    panels.register()
    live.register()
    draw.register()


def unregister() -> None:
    from . import draw, live, operators, panels, properties

    draw.unregister()
    live.unregister()
    panels.unregister()
    operators.unregister()
    properties.unregister()
