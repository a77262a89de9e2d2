"""Long bakes hold: bake 1,000 and 10,000 frames of the 20-bone demo humanoid (4 goals) and
report time and peak memory, to show that memory stays bounded (the bake solves CHUNK_FRAMES
frames at a time and keeps only the chain bones' rotations until it writes the keys).

    .venv/bin/python -m benchmarks.long_bake [--frames 1000 10000]

Peak memory: tracemalloc's peak of Python/numpy allocations during the bake (Blender's own keys
are allocated in C and not counted there), and the growth of the process's maximum resident
set size (``resource.getrusage``; it only grows, so runs go from short to long).
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))  # demo.py: the character and the add-on loader
os.environ.setdefault("HOME", tempfile.mkdtemp(prefix="jacobian_ik_home_"))


def fcurves(action: Any) -> list[Any]:
    """Every F-curve of an action: layered (4.4+) or ``action.fcurves`` (4.2)."""
    if not hasattr(action, "layers"):
        return list(action.fcurves)
    return [
        fc
        for layer in action.layers
        for strip in layer.strips
        for bag in strip.channelbags
        for fc in bag.fcurves
    ]


def build(demo: Any) -> Any:
    """The demo character with its 4 goals; targets and hips cycle over the whole range."""
    bpy = demo.bpy
    bpy.ops.wm.read_factory_settings(use_empty=True)
    ob = demo.build_rig()
    goals = {}
    for name in ("hand.L", "hand.R", "foot.L", "foot.R"):
        with bpy.context.temp_override(object=ob, active_object=ob):
            bpy.ops.jacobian_ik.add_goal(bone=name, chain_length=3)
        goals[name] = ob.jacobian_ik.goals[-1].target
        if name.startswith("foot"):
            ob.jacobian_ik.goals[-1].rotation_weight = 1.0
    demo.animate(ob, goals)
    for owner in [ob, *goals.values()]:
        for fc in fcurves(owner.animation_data.action):
            fc.modifiers.new("CYCLES")
    return ob


def max_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # kB on Linux


def bake(ob: Any, frames: int) -> dict[str, Any]:
    from jacobian_ik.bridge import run

    bpy = sys.modules["bpy"]
    for fc in fcurves(ob.animation_data.action):  # every bake starts without rotation keys
        if "rotation" in fc.data_path:
            fc.keyframe_points.clear()
    rss0 = max_rss_mb()
    tracemalloc.start()
    t0 = time.perf_counter()
    report = run(ob, bpy.context.scene, range(1, frames + 1), mode="CONVERGE")
    elapsed = time.perf_counter() - t0
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return {
        "frames": frames,
        "time": elapsed,
        "ms_per_frame": 1000 * elapsed / frames,
        "read": report.read_time,
        "solve": report.solve_time,
        "write": report.write_time,
        "converged": report.converged,
        "keys": report.keys,
        "peak_python_mb": peak / 2**20,
        "max_rss_growth_mb": max_rss_mb() - rss0,
        "max_rss_mb": max_rss_mb(),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, nargs="+", default=[1000, 10000])
    args = parser.parse_args(argv)
    import demo  # scripts/ is on sys.path (see the imports)
    from checkout import load_checkout

    load_checkout()
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from common import table

    chunk = sys.modules["jacobian_ik.bridge.run"].CHUNK_FRAMES
    ob = build(demo)
    rows = [bake(ob, n) for n in sorted(args.frames)]
    header = list(rows[0])
    print(f"20-bone humanoid, 4 goals (feet with rotation), LM converge, chunks of {chunk} frames")
    print(table(header, [[r[h] for h in header] for r in rows]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
