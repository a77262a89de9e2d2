"""Lean bakes on smooth target motion: keys written versus a full bake, and playback error.

The demo's 20-bone character (scripts/demo.py: hands circling, feet stepping, hips bobbing;
4 goals, chain length 3), 250 frames, baked once in full and then with ``reduce_keys`` at a few
tolerances. The playback error is measured by Blender itself (``frame_set`` with the keys, no
IK): the distance of each goal's effector from where the full bake puts it.

    .venv/bin/python benchmarks/lean_bake.py [--frames 250] [--zoo N [--seeds 1 2 ...]] [--out F]

With ``--zoo N`` also N rigs of the zoo (tests/rigs/zoo_rigs.py) per seed (default seed 1), each
baked in full and lean (the operator's default tolerances) on fresh scenes: keys, the goal
tails' playback distance and the largest bone rotation difference from the full bake (both by
Blender's playback, no IK). ``--out F`` also writes the tables as markdown to F. The exit
status is 1 when a playback error exceeds its tolerance.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import bpy as _bpy
import numpy as np

bpy: Any = _bpy
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # tests.rigs.zoo_rigs, also when run as a file
sys.path.insert(0, str(ROOT / "scripts"))  # demo.py: the character and the add-on loader
TOLERANCES = [(0.1, 1e-3), (0.25, 2e-3), (0.5, 5e-3), (1.0, 1e-2)]  # (degrees, world units)


def _tips(ob: Any, names: list[str], frames: int) -> np.ndarray:
    scene = bpy.context.scene
    out = np.empty((frames, len(names), 3))
    for f in range(frames):
        scene.frame_set(f + 1)
        for e, name in enumerate(names):
            out[f, e] = ob.matrix_world @ ob.pose.bones[name].tail
    return out


def benchmark(
    frames: int = 250, tolerances: list[tuple[float, float]] | None = None
) -> list[dict[str, Any]]:
    import demo  # scripts/ is on sys.path (see the imports)
    from checkout import load_checkout

    load_checkout()
    demo.FRAMES = frames
    bpy.ops.wm.read_factory_settings(use_empty=True)
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, frames
    ob = demo.build_rig()
    names = ["hand.L", "hand.R", "foot.L", "foot.R"]
    with bpy.context.temp_override(object=ob, active_object=ob):
        for name in names:
            bpy.ops.jacobian_ik.add_goal(bone=name, chain_length=3)
            if name.startswith("foot"):
                ob.jacobian_ik.goals[-1].rotation_weight = 1.0
    demo.animate(ob, {g.bone: g.target for g in ob.jacobian_ik.goals})
    rows = []

    def bake(**kw: Any) -> tuple[int, float]:
        t = time.perf_counter()
        with bpy.context.temp_override(object=ob, active_object=ob):
            assert bpy.ops.jacobian_ik.bake(frame_start=1, frame_end=frames, **kw) == {"FINISHED"}
        return ob.jacobian_ik.last_keys, time.perf_counter() - t

    full_keys, full_time = bake()
    reference = _tips(ob, names, frames)
    rows.append(
        {
            "bake": "full",
            "tolerance": "-",
            "keys": full_keys,
            "ratio": 1.0,
            "playback_error": 0.0,
            "time": full_time,
        }
    )
    for degrees, distance in tolerances or TOLERANCES:
        keys, seconds = bake(reduce_keys=True, key_tolerance=degrees, position_tolerance=distance)
        error = float(np.linalg.norm(_tips(ob, names, frames) - reference, axis=2).max())
        rows.append(
            {
                "bake": "lean",
                "tolerance": f"{degrees} deg, {distance:g}",
                "keys": keys,
                "ratio": full_keys / keys,
                "playback_error": error,
                "position_tolerance": distance,
                "time": seconds,
            }
        )
    return rows


def _state(ob: Any, names: list[str], frames: int) -> tuple[np.ndarray, np.ndarray]:
    """Per frame: the goal bones' world tails and every pose bone's local rotation (quaternion)."""
    scene = bpy.context.scene
    tips = np.empty((frames, len(names), 3))
    quats = np.empty((frames, len(ob.pose.bones), 4))
    for f in range(frames):
        scene.frame_set(f + 1)
        for e, name in enumerate(names):
            tips[f, e] = ob.matrix_world @ ob.pose.bones[name].tail
        for b, pb in enumerate(ob.pose.bones):
            quats[f, b] = pb.matrix_basis.to_quaternion()
    return tips, quats


def zoo_rows(
    seed: int = 1, count: int = 5, frames: int = 250, tolerances: tuple[float, float] | None = None
) -> list[dict[str, Any]]:
    """Full against lean bakes (the operator's default tolerances unless given) on zoo rigs
    (tests/rigs/zoo_rigs.py): keys, the goal tails' playback distance from the full bake's and
    the largest bone rotation difference (degrees)."""
    from checkout import load_checkout

    from benchmarks import vs_blender
    from benchmarks import zoo as zoo_bench
    from benchmarks.common import rough
    from tests.rigs.zoo_rigs import zoo

    vs_blender.import_bpy()  # sets vs_blender.bpy (bpy is imported already, see the imports)
    load_checkout()
    rows = []
    for rig in zoo(seed, count):
        spec, _ = zoo_bench.spec_of(rig, frames)
        names = [g.bone for g in rig.goals]
        results = []
        for lean in (False, True):  # each on a fresh scene: the same solve, two ways to key it
            ob, _ = zoo_bench.build(rig, spec, frames)
            kw: dict[str, Any] = {"reduce_keys": lean}
            if lean and tolerances is not None:
                kw |= {"key_tolerance": tolerances[0], "position_tolerance": tolerances[1]}
            override = {"object": ob, "active_object": ob, "selected_objects": [ob]}
            with bpy.context.temp_override(**override):
                assert bpy.ops.jacobian_ik.import_constraints() == {"FINISHED"}
                op = bpy.ops.jacobian_ik.bake
                assert op(frame_start=1, frame_end=frames, **kw) == {"FINISHED"}
            results.append((ob.jacobian_ik.last_keys, *_state(ob, names, frames)))
        (full_keys, tips, quats), (lean_keys, lean_tips, lean_quats) = results
        dot = np.abs(np.sum(quats * lean_quats, axis=2))
        rows.append(
            {
                "rig": rig.name,
                "kind": rig.kind,
                "bones": len(rig.bones),
                "keys_full": full_keys,
                "keys_lean": lean_keys,
                "ratio": full_keys / max(lean_keys, 1),
                "playback_error": float(np.linalg.norm(lean_tips - tips, axis=2).max()),
                "rotation_error_deg": float(np.degrees(2 * np.arccos(np.clip(dot, 0, 1))).max()),
                "rough": rough(quats),
            }
        )
    return rows


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return lines + ["| " + " | ".join(r) + " |" for r in rows]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--frames", type=int, default=250)
    parser.add_argument("--zoo", type=int, default=0, help="also N zoo rigs per seed, defaults")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1], help="zoo seeds")
    parser.add_argument("--out", type=Path, help="also write the tables (markdown) here")
    args = parser.parse_args()
    rows = benchmark(args.frames)
    lines = [f"Lean bake, demo character, {args.frames} frames", ""]
    lines += _table(
        ["bake", "tolerance", "keys", "fewer", "playback error", "time s"],
        [
            [
                r["bake"],
                r["tolerance"],
                str(r["keys"]),
                f"{r['ratio']:.1f}x",
                f"{r['playback_error']:.2e}",
                f"{r['time']:.2f}",
            ]
            for r in rows
        ],
    )
    ok = all(r["playback_error"] <= r.get("position_tolerance", 0.0) + 1e-5 for r in rows)
    if args.zoo:
        zoo = [(seed, z) for seed in args.seeds for z in zoo_rows(seed, args.zoo, args.frames)]
        ok &= all(z["playback_error"] <= 1e-3 + 1e-5 for _, z in zoo)
        ok &= all(z["rotation_error_deg"] <= 0.1 + 1e-3 for _, z in zoo)
        lines += ["", f"Zoo rigs, lean at the default 0.1 deg / 1 mm, {args.frames} frames", ""]
        lines += [
            "Errors: the lean bake's playback against the full bake's (goal tails, bone",
            "rotations). Rough: share of the full bake's (frame, bone) samples more than 0.1 deg",
            "off the cubic through the bone's two frames on either side (jitter of the solved",
            "motion, which a lean bake keys where a full bake does).",
            "",
        ]
        lines += _table(
            ["seed", "rig", "bones", "full", "lean", "fewer", "pos err", "rot deg", "rough"],
            [
                [
                    str(seed),
                    z["rig"],
                    str(z["bones"]),
                    str(z["keys_full"]),
                    str(z["keys_lean"]),
                    f"{z['ratio']:.1f}x",
                    f"{z['playback_error']:.2e}",
                    f"{z['rotation_error_deg']:.3f}",
                    f"{100 * z['rough']:.0f} %",
                ]
                for seed, z in zoo
            ],
        )
    print("\n".join(lines))
    if args.out:
        args.out.write_text("\n".join(lines) + "\n")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
