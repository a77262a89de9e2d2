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
    """The solver's compiled loops (solvers/kernel.py) keep their numba cache in the extension's
    own user folder (never the add-on folder). Once per install (and after an update) a child
    process builds them there (solvers/warmup.py: about 80 s on a 2-core machine, beside
    Blender, not in it: a background compile in Blender's process crashed a test process once);
    a solve that comes first waits for it. Later sessions load them from the cache."""
    import os

    import bpy

    from .solvers import kernel, warmup

    try:
        kernel.CACHE_DIR = bpy.utils.extension_path_user(__package__, path="numba", create=True)
    except (ValueError, OSError):  # not installed as an extension (a checkout in tests)
        kernel.CACHE_DIR = None
    warmup.start(kernel.CACHE_DIR, __package__, os.path.dirname(os.path.abspath(__file__)))


def unregister() -> None:
    from . import draw, live, operators, panels, properties

    draw.unregister()
    live.unregister()
    panels.unregister()
    operators.unregister()
    properties.unregister()
