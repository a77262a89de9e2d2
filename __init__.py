"""Jacobian IK: Jacobian-based inverse kinematics for Blender armatures (extension entry point).

The solver lives in ``solvers`` (numpy only); ``bridge`` reads rigs and writes poses and keys;
``operators`` and ``panels`` are the user interface.
"""

# The submodules import bpy, so they are imported when Blender registers the add-on, not when
# the package is imported: the numpy-only solver stays usable (and testable) without Blender.


def register() -> None:
    import bpy

    from . import draw, live, operators, panels, properties

    properties.register()
    operators.register()
    panels.register()
    live.register()
    draw.register()
    _kernel_cache()
    if _on_load_post not in bpy.app.handlers.load_post:
        bpy.app.handlers.load_post.append(bpy.app.handlers.persistent(_on_load_post))


def _kernel_cache() -> None:
    """The solver's compiled loops (solvers/kernel.py) keep their numba cache in the extension's
    own user folder (never the add-on folder). Once per install (and after an update) child
    processes build them there (solvers/warmup.py: 36-51 s on a 2-core machine, beside
    Blender, not in it: a background compile in Blender's process crashed a test process once);
    a solve that comes first waits for its loop. Later sessions load them from the cache."""
    import os

    import bpy

    from .solvers import kernel, warmup

    try:
        kernel.CACHE_DIR = bpy.utils.extension_path_user(__package__, path="numba", create=True)
    except (ValueError, OSError):  # not installed as an extension (a checkout in tests)
        kernel.CACHE_DIR = None
    warmup.start(kernel.CACHE_DIR, __package__, os.path.dirname(os.path.abspath(__file__)))


def preload_kernel() -> None:
    """Load the compiled loops from their cache now (solvers/warmup.py ``preload``: never a
    compile), so the session's first bake or drag does not wait 0.2-0.6 s for it: when a file
    with goals is opened and when goals are added. In Blender's UI at the next idle moment (a
    timer), headless at once."""
    import bpy

    from .solvers import warmup

    if bpy.app.background:
        warmup.preload()
    elif not bpy.app.timers.is_registered(_preload_timer):
        bpy.app.timers.register(_preload_timer, first_interval=0.1)


def _preload_timer() -> None:
    from .solvers import warmup

    warmup.preload()


def _on_load_post(*_args: object) -> None:
    """A file was opened: preload the compiled loops if any armature in it has goals."""
    import bpy

    props = (getattr(ob, "jacobian_ik", None) for ob in bpy.data.objects if ob.type == "ARMATURE")
    if any(p is not None and len(p.goals) for p in props):
        preload_kernel()


def unregister() -> None:
    import bpy

    from . import draw, live, operators, panels, properties
    from .solvers import kernel

    while _on_load_post in bpy.app.handlers.load_post:
        bpy.app.handlers.load_post.remove(_on_load_post)
    if bpy.app.timers.is_registered(_preload_timer):
        bpy.app.timers.unregister(_preload_timer)
    draw.unregister()
    live.unregister()
    kernel.stop_threads()
    panels.unregister()
    operators.unregister()
    properties.unregister()
