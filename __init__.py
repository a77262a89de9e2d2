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
    _kernel_cache()


def _kernel_cache() -> None:
    """The solver's compiled loop (solvers/kernel.py) keeps its numba cache in the extension's
    own user folder (never the add-on folder). It compiles on the first solve that uses it, in
    the calling thread (a background compile beside Blender's own work crashed a test process
    once), 20-35 s once per install, then loads from this cache in about 0.6 s."""
    import bpy

    from .solvers import kernel

    try:
        kernel.CACHE_DIR = bpy.utils.extension_path_user(__package__, path="numba", create=True)
    except (ValueError, OSError):  # not installed as an extension (a checkout in tests)
        kernel.CACHE_DIR = None


def unregister() -> None:
    from . import draw, live, operators, panels, properties

    draw.unregister()
    live.unregister()
    panels.unregister()
    operators.unregister()
    properties.unregister()
