"""The compiled loops built once after install, in separate processes (``start``).

numba compiles each of ``kernel.LOOPS`` on its first use and keeps it on disk
(``kernel.CACHE_DIR``): about 20-40 s each, once per install, and a bake or drag that comes first
waits for it. ``start`` runs those compiles in child processes when the add-on is registered, one
per loop, side by side: each imports this package under the add-on's own module name (a cache
refers to its module by name) and solves a small rig (``run``) with the same argument types as a
bake and live posing, its own loop compiled and the others in numpy, so later sessions and the
first bake load them from the cache instead. Separate processes, not threads: a background
compile beside Blender's own work crashed a test process once; a child shares nothing with
Blender but the cache folder. ``wait`` lets the first call of a loop wait for the child that
builds it rather than compile it again beside it; ``preload`` loads them in this process.

Pure Python and numpy (no bpy): the children run the Python that runs Blender
(``sys.executable``) with the parent's ``sys.path`` (where Blender put the extension's numba
wheels).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from typing import Any

import numpy as np

MARKER = "warm-{stamp}-py{major}{minor}-numba{numba}-loop{loop}.json"
"""Written into the cache folder by a child when it is done: whether it built its loop (or why
not), for the kernel's sources (their stamp), the Python and numba in its name. A register that
finds it starts no child for that loop."""
WAIT = 300.0
"""The longest a call waits for a running child (seconds); then it compiles itself."""

NICE = (5, 15, 15)
"""Each loop's child runs below Blender's priority (POSIX ``nice``; Windows: below normal, idle),
the solve's loop above the others: it is the one a first solve waits for. On a 2-core machine
(otherwise idle): one child building all three in turn took 77 s; three side by side at one
priority 76-79 s each; with these priorities the solve's loop is ready after 36 s, all three
after 51 s."""

_CHILDREN: dict[int, subprocess.Popen[bytes]] = {}
_PRELOADED: list[bool] = []


def marker_path(cache_dir: str, loop: int) -> str | None:
    """Where the marker of ``loop``'s build for this checkout, Python and numba goes; None
    without numba."""
    from . import kernel

    if kernel.numba is None:
        return None
    stamp = kernel.source_stamp(os.path.dirname(os.path.abspath(kernel.__file__)))[:16]
    name = MARKER.format(
        stamp=stamp,
        major=sys.version_info.major,
        minor=sys.version_info.minor,
        numba=kernel.numba.__version__,
        loop=loop,
    )
    return os.path.join(cache_dir, name)


def built(cache_dir: str, loop: int) -> bool | None:
    """Whether a child built ``loop`` (True), tried and failed (False), or never ran (None)."""
    try:
        with open(marker_path(cache_dir, loop) or "", encoding="utf-8") as f:
            return bool(json.load(f).get("built"))
    except (OSError, ValueError):
        return None


def start(cache_dir: str | None, package: str, addon_dir: str) -> bool:
    """Start a child for each loop not built into ``cache_dir`` yet, for the add-on ``package``
    (its module name, e.g. ``bl_ext.user_default.jacobian_ik``) found in ``addon_dir``; False
    when there is nothing to do (no cache folder, numba missing or switched off, every loop
    built or tried, or being built) or no Python to run them with."""
    from . import kernel

    if cache_dir is None or not kernel.enabled():
        return False
    python = sys.executable
    if not python or "python" not in os.path.basename(python).lower():
        return False  # (an embedding that reports its own binary: no child)
    kernel.BEFORE_COMPILE = wait
    started = False
    for loop in range(len(kernel.LOOPS)):
        if running(loop) or built(cache_dir, loop) is not None:
            continue
        argv = json.dumps([package, addon_dir, cache_dir, loop, NICE[loop], sys.path])
        low = "BELOW_NORMAL_PRIORITY_CLASS" if NICE[loop] < 10 else "IDLE_PRIORITY_CLASS"
        windows = getattr(subprocess, "CREATE_NO_WINDOW", 0) | getattr(subprocess, low, 0)
        try:
            with open(os.path.join(cache_dir, f"warmup-loop{loop}.log"), "wb") as log:
                _CHILDREN[loop] = subprocess.Popen(
                    [python, "-I", "-c", _CHILD_CODE, argv],
                    stdin=subprocess.DEVNULL,
                    stdout=log,  # what a failed child said
                    stderr=subprocess.STDOUT,
                    creationflags=windows,  # Windows: no console, the child's priority
                )
        except OSError:
            return started
        started = True
    return started


def running(loop: int | None = None) -> bool:
    """A child started by ``start`` (for ``loop``, or any) is still building."""
    loops = list(_CHILDREN) if loop is None else [loop]
    return any(k in _CHILDREN and _CHILDREN[k].poll() is None for k in loops)


def wait(loop: int | None = None, timeout: float = WAIT) -> None:
    """Wait for the running child of ``loop`` (or every child), up to ``timeout`` seconds in
    all, so the loops load from the cache rather than compile here too."""
    end = time.monotonic() + timeout
    for k, child in list(_CHILDREN.items()):
        if (loop is None or k == loop) and child.poll() is None:
            try:
                child.wait(max(end - time.monotonic(), 0.0))
            except subprocess.TimeoutExpired:
                pass


def preload() -> bool:
    """Load every loop in this process from the cache the children built (``run``: the small
    rig's solves take milliseconds once loaded), so that the session's first bake or drag does
    not (0.2-0.6 s). Nothing unless every loop is built and no child runs (this never starts a
    compile on purpose), or when done before in this process."""
    from . import kernel

    cache = kernel.CACHE_DIR
    if _PRELOADED or cache is None or not kernel.enabled() or running():
        return False
    if not all(built(cache, k) for k in range(len(kernel.LOOPS))):
        return False
    _PRELOADED.append(True)
    run()
    return True


# A child: the add-on's package imported under its own name from its folder (its __init__
# imports bpy only in register), below empty parent packages (``bl_ext.user_default``), then
# ``main``.
_CHILD_CODE = """
import importlib, importlib.util, json, os, sys, types
package, addon_dir, cache_dir, loop, nice, path = json.loads(sys.argv[1])
sys.path[:] = path
if hasattr(os, "nice"):
    os.nice(nice)
parts = package.split(".")
for i in range(1, len(parts)):
    parent = types.ModuleType(".".join(parts[:i]))
    parent.__path__ = []
    sys.modules.setdefault(parent.__name__, parent)
spec = importlib.util.spec_from_file_location(
    package, os.path.join(addon_dir, "__init__.py"), submodule_search_locations=[addon_dir])
module = importlib.util.module_from_spec(spec)
sys.modules[package] = module
spec.loader.exec_module(module)
warmup = importlib.import_module(package + ".solvers.warmup")
sys.exit(warmup.main(cache_dir, loop))
"""


def main(cache_dir: str, loop: int) -> int:
    """A child's work: build ``loop`` into ``cache_dir``, then write its marker."""
    from . import kernel

    kernel.CACHE_DIR = cache_dir
    marker = marker_path(cache_dir, loop)
    if marker is None:
        return 1
    t0 = time.perf_counter()
    error = None
    try:
        ok = run(only=loop) == [loop]
    except Exception as exc:  # recorded, so later sessions do not start a child that fails again
        ok, error = False, f"{type(exc).__name__}: {exc}"
    tmp = f"{marker}.{os.getpid()}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        seconds = round(time.perf_counter() - t0, 1)
        error = error or next(iter(kernel.BROKEN), None)
        json.dump({"seconds": seconds, "built": ok, "error": error}, f)
    os.replace(tmp, marker)
    return 0 if ok else 1


def run(only: int | None = None) -> list[int]:
    """Solve, repair and smooth a small two-level rig over a few frames (what a bake does) and
    one frame through a ``Solver`` (what live posing does): every loop of ``kernel.LOOPS``
    runs, or only the loop ``only`` compiled and the others in numpy (as where they do not
    load). The loops that ran compiled, by number."""
    from . import flips, kernel, smooth
    from .goals import Goals
    from .skeleton import Pose
    from .solve import Settings, solve
    from .solver import Solver

    ran: set[int] = set()
    call = kernel._call

    def spy(*args: Any, loop: int = 0) -> None:
        if only is not None and loop != only:
            raise kernel.KernelUnavailable("built by another child")
        call(*args, loop=loop)
        ran.add(loop)

    kernel._call = spy
    try:
        skeleton = rig()
        goals = Goals(position=targets(skeleton, 12))
        settings = Settings()
        start_pose = Pose.rest(skeleton.n_bones, 12)
        result = solve(skeleton, goals, settings, start_pose)
        result, _ = flips.repair(skeleton, goals, settings, start_pose, result)
        smooth.smooth(skeleton, goals, settings, result, settings.smooth_passes)
        Solver(skeleton, settings).solve(Goals(position=targets(skeleton, 1)))
    except kernel.KernelUnavailable:
        pass
    finally:
        kernel._call = call
    return sorted(ran)


def rig() -> Any:
    """A torso: hips (fixed), spine of 3, neck and head, two arms of shoulder, upper arm,
    forearm and hand; the hands' chains run through the spine, the head's from the chest (two
    levels of goal priority)."""
    from .skeleton import Effector, Joint, Skeleton
    from .so3 import exp_so3

    names = ["hips", "spine0", "spine1", "spine2", "neck", "head"]
    parents = [-1, 0, 1, 2, 3, 4]
    lengths = [0.1, 0.18, 0.18, 0.18, 0.1, 0.2]
    turns = [np.eye(3)] * 6
    for side, k in (("L", 1.0), ("R", -1.0)):
        names += [f"shoulder.{side}", f"upper_arm.{side}", f"forearm.{side}", f"hand.{side}"]
        parents += [3, len(names) - 4, len(names) - 3, len(names) - 2]
        lengths += [0.15, 0.3, 0.27, 0.1]
        side_turn = np.array([[0.0, k, 0.0], [-k, 0.0, 0.0], [0.0, 0.0, 1.0]])  # +Y to -/+X
        turns += [side_turn, np.eye(3), exp_so3(np.array([0.2, 0.0, 0.0])), np.eye(3)]
    rest = np.stack([np.eye(4)] * len(names))
    for b, p in enumerate(parents):
        rest[b, :3, :3] = turns[b]
        if p >= 0:
            rest[b, 1, 3] = lengths[p]
    rest[0, :3, 3] = (0.0, 0.0, 1.0)
    joints = [Joint.fixed()] + [Joint.ball()] * (len(names) - 1)

    def tip(b: int) -> tuple[float, float, float]:
        return (0.0, lengths[b], 0.0)

    effectors = [
        Effector(5, tip(5), "head", (3, 4, 5)),
        Effector(9, tip(9), "hand.L", (1, 2, 3, 6, 7, 8, 9)),
        Effector(13, tip(13), "hand.R", (1, 2, 3, 10, 11, 12, 13)),
    ]
    return Skeleton(parents, rest, joints, effectors, names=names)


def targets(skeleton: Any, frames: int) -> np.ndarray:
    """Targets that move smoothly: the head up and forward, the hands sweeping outward until
    they pull apart beyond what both can reach."""
    from .skeleton import Pose

    tips = skeleton.forward_kinematics(Pose.rest(skeleton.n_bones)).points[0]
    t = np.linspace(0.0, 1.0, frames)[:, None]
    out = np.repeat(tips[None], frames, axis=0)
    out[:, 0] += np.hstack([0.0 * t, 0.1 * t, 0.05 * t])
    out[:, 1] += np.hstack([0.6 * t, 0.2 * t, 0.3 - 0.2 * t])
    out[:, 2] += np.hstack([-0.6 * t, 0.3 * t, -0.1 * t])
    return out
