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
    _warm_up_kernel()


def _warm_up_kernel() -> None:
    """Compile (or load from the user folder's cache) the solver's compiled loop in a background
    thread, so that the first solve does not wait for it (solvers/kernel.py)."""
    import bpy

    from .solvers import kernel
    from .solvers.solver import warm_up_kernel

    try:  # the extension's own user folder (never the add-on folder)
        kernel.CACHE_DIR = bpy.utils.extension_path_user(__package__, path="numba", create=True)
    except (ValueError, OSError):  # not installed as an extension (a checkout in tests)
        kernel.CACHE_DIR = None
    warm_up_kernel()


def unregister() -> None:
    from . import draw, live, operators, panels, properties

    draw.unregister()
    live.unregister()
    panels.unregister()
    operators.unregister()
    properties.unregister()
