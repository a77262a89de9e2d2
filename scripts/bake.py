"""Bake the Jacobian IK goals of a .blend headless and print a JSON summary.

With the bpy module from PyPI (this checkout is loaded as the add-on):

    .venv/bin/python scripts/bake.py rig.blend --start 1 --end 250 --method LM --output baked.blend

Inside Blender with the extension installed (the file is opened by Blender):

    blender -b rig.blend --python scripts/bake.py -- --start 1 --end 250 --output baked.blend

Every armature with enabled goals is baked (or only ``--object``). The summary (frames, per-goal
error statistics, iterations, times, keys) is one JSON line on stdout starting with ``{"file"``
(``--json`` also writes it to a file); progress goes to stderr.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import bpy


def addon() -> ModuleType:
    """The installed extension when Blender has one, else this checkout."""
    if hasattr(bpy.types.Object, "jacobian_ik"):
        for name, module in sys.modules.items():
            if name.startswith("bl_ext.") and name.endswith(".jacobian_ik"):
                return module
    from checkout import load_checkout  # type: ignore[import-not-found]  # bpy from PyPI

    return load_checkout()


ROOT = Path(__file__).resolve().parents[1]


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("blend", nargs="?", help="the .blend to bake (omit inside Blender)")
    parser.add_argument("--start", type=int, help="first frame (default: the scene's)")
    parser.add_argument("--end", type=int, help="last frame (default: the scene's)")
    parser.add_argument(
        "--method", help="solver method, e.g. LM, SDLS, DLS (default: the stored one)"
    )
    parser.add_argument("--mode", choices=["CONVERGE", "TRACK"], help="default: the stored mode")
    parser.add_argument("--object", help="bake only this armature")
    parser.add_argument("--output", help="save the baked file here (default: do not save)")
    parser.add_argument("--json", help="also write the summary to this file")
    return parser.parse_args(argv)


def main(argv: list[str]) -> int:
    args = parse(argv)
    jik = addon()
    if args.blend:
        bpy.ops.wm.open_mainfile(filepath=args.blend)
    scene: Any = bpy.context.scene  # registered properties are not in the stubs
    start = scene.frame_start if args.start is None else args.start
    end = scene.frame_end if args.end is None else args.end
    if args.object:
        ob: Any = bpy.data.objects.get(args.object)
        obs = [ob]
        if ob is None or ob.type != "ARMATURE":
            print(f"error: no armature {args.object!r}", file=sys.stderr)
            return 2
    else:
        obs = [
            ob
            for ob in scene.objects
            if ob.type == "ARMATURE" and any(g.enabled for g in ob.jacobian_ik.goals)
        ]
    if not obs:
        print("error: no armature with enabled goals", file=sys.stderr)
        return 2

    summary: dict[str, Any] = {"file": bpy.data.filepath, "armatures": {}}
    t0 = time.perf_counter()
    for ob in obs:
        if args.method:
            ob.jacobian_ik.method = args.method.upper()

        shown = [-1]

        def progress(x: float, name: str = ob.name, shown: list[int] = shown) -> None:
            if int(10 * x) > shown[0]:  # a line every 10 %
                shown[0] = int(10 * x)
                print(f"{name}: {10 * shown[0]} %", file=sys.stderr, flush=True)

        try:
            report = jik.bridge.run(
                ob, scene, range(start, end + 1), mode=args.mode, progress=progress
            )
        except jik.bridge.RigError as exc:
            print(f"error: {ob.name}: {exc}", file=sys.stderr)
            return 1
        summary["armatures"][ob.name] = report.summary()
    summary["time"] = time.perf_counter() - t0
    if args.output:
        bpy.ops.wm.save_as_mainfile(filepath=args.output)
        summary["output"] = args.output
    text = json.dumps(summary)
    if args.json:
        with open(args.json, "w") as f:
            f.write(text)
    print(text, flush=True)
    return 0


if __name__ == "__main__":
    argv = sys.argv[sys.argv.index("--") + 1 :] if "--" in sys.argv else sys.argv[1:]
    code = main(argv)
    if bpy.app.version < (4, 3, 0) and not bpy.app.binary_path:
        # bpy 4.2 as a Python module can crash while the interpreter tears down, after all the
        # work is done and saved: leave with the script's own exit code instead
        import os

        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)
