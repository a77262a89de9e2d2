"""Jacobian IK against Blender's own IK (Standard solver), side by side in one Blender session.

Run from the repository root with ``.venv/bin/python -m benchmarks.vs_blender [--frames 250]
[--quick]``; writes ``benchmarks/results/vs_blender.md`` and ``vs_blender.json`` and prints the
table. Three rigs (benchmarks/vs_blender_rigs.py), each baked on a fresh scene by Blender's Bake
Action and by ours (``import_constraints``, then ``bridge.run`` as the bake operator runs it),
interleaved, then played back with the IK muted (benchmarks/playback.py). What is measured and
how reachability is decided: docs/benchmarks.md#against-blenders-ik.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from tests.rigs.scenes import build, chain_bones

from . import blender
from .blender import import_bpy  # noqa: F401  (benchmarks/lean_bake.py calls it from here)
from .playback import Playback, chain_reachability, playback, reference_tree_solve
from .vs_blender_report import BLENDER, REFERENCE, markdown
from .vs_blender_rigs import RIGS

REACH_PROOF = 1e-4  # a frame of the tree is reachable when a solve got every tip this close

METHODS = [
    (BLENDER, None, None),
    ("ours LM converge", "LM", "CONVERGE"),
    ("ours SDLS converge", "SDLS", "CONVERGE"),
    ("ours LM track", "LM", "TRACK"),
]


def stats(err: np.ndarray, reachable: np.ndarray, best: np.ndarray) -> dict[str, Any]:
    excess = (err - best)[~reachable]
    return {
        "mean": float(err.mean()),
        "rms": float(np.sqrt(np.mean(err**2))),
        "max": float(err.max()),
        "reachable_samples": int(reachable.sum()),
        "unreachable_samples": int((~reachable).sum()),
        "reachable_under_1e-3": float(np.mean(err[reachable] < 1e-3))
        if reachable.any()
        else float("nan"),
        "reachable_mean": float(err[reachable].mean()) if reachable.any() else float("nan"),
        "reachable_max": float(err[reachable].max()) if reachable.any() else float("nan"),
        "unreachable_excess_mean": float(excess.mean()) if excess.size else float("nan"),
        "unreachable_excess_max": float(excess.max()) if excess.size else float("nan"),
    }


def run(
    frames: int = 250,
    repeats: int = 3,
    rigs: str = "ABC",
    methods: list[str] | None = None,
    reference_starts: int = 5,
    log: Callable[[str], None] = print,
) -> dict[str, Any]:
    blender.load_addon()
    blender.warm_kernel()
    bpy = blender.bpy
    chosen = [m for m in METHODS if methods is None or m[0] in methods or m[1] is None]
    out: dict[str, Any] = {
        "blender": bpy.app.version_string,
        "checkout": blender.git_state(),
        "openblas_threads": os.environ.get("OPENBLAS_NUM_THREADS", "default"),
        "load_average_start": os.getloadavg()[0],
        "frames": frames,
        "repeats": repeats,
        "rigs": {},
    }
    for key in rigs:
        spec = RIGS[key]
        times: dict[str, list[blender.Bake]] = {m[0]: [] for m in chosen}
        playbacks: dict[str, Playback] = {}
        for r in range(repeats):
            for label, method, mode in chosen:
                ob, empties, _ = build(spec, frames)
                n_chain = len(chain_bones(ob, spec))
                if method is None:
                    bake = blender.bake_blender(ob, spec, frames)
                else:
                    bake = blender.bake_ours(ob, frames, method, mode or "CONVERGE")
                if not bake.ok:
                    raise RuntimeError(f"{spec.key} / {label}: the bake did not finish")
                times[label].append(bake)
                log(f"{spec.key} run {r + 1}/{repeats} {label}: {bake.time:.3f} s")
                if r == 0:
                    playbacks[label] = playback(ob, spec, empties, frames)
        # reachability (playback of any method gives the same roots: bones above the chains
        # are not baked)
        first = playbacks[chosen[0][0]]
        if spec.key == "A":
            ob_ref, _, _ = build(spec, frames)
            with blender.override(ob_ref):
                bpy.ops.jacobian_ik.import_constraints()
            ref, ref_ss = reference_tree_solve(ob_ref, frames, reference_starts)
            proven = ref.max(axis=1) < REACH_PROOF
            for pb in playbacks.values():
                proven |= pb.error.max(axis=1) < REACH_PROOF
            reachable = np.repeat(proven[:, None], len(spec.constraints), axis=1)
            _, best = chain_reachability(first)
            best = np.where(reachable, 0.0, best)
            rule = (
                f"frame (jointly) reachable when a solve got all 4 tips within {REACH_PROOF:g} "
                f"(reference LM from {reference_starts} starts, or any baked result); "
                "unreachable: single-chain bound max(0, d - L)"
            )
        else:
            reachable, best = chain_reachability(first)
            rule = "d from the chain root within [max(0, 2 l_max - L), L]"
        rows = {}
        for label, _, _ in chosen:
            pb = playbacks[label]
            bakes = times[label]
            split_keys = bakes[0].split.keys()
            chain_ok, _ = chain_reachability(pb)
            rows[label] = {
                "single_chain_reachable_under_1e-3": float(np.mean(pb.error[chain_ok] < 1e-3)),
                "single_chain_reachable_samples": int(chain_ok.sum()),
                "time_median": statistics.median(b.time for b in bakes),
                "times": [b.time for b in bakes],
                "split_median": {
                    k: statistics.median(b.split[k] for b in bakes) for k in split_keys
                },
                "keys": bakes[0].keys,
                "jumps_over_10deg": pb.jumps,
                "max_jump_deg": pb.max_jump_deg,
                "jumps_by_bone": pb.jumps_by_bone,
                "solver": bakes[0].solver,
                **stats(pb.error, reachable, best),
            }
        if spec.key == "A":
            chain_ok, _ = chain_reachability(first)
            rows[REFERENCE] = {
                "single_chain_reachable_under_1e-3": float(np.mean(ref_ss[chain_ok] < 1e-3)),
                "single_chain_reachable_samples": int(chain_ok.sum()),
                "time_median": float("nan"),
                "times": [],
                "split_median": {},
                "keys": 0,
                "jumps_over_10deg": -1,
                "max_jump_deg": float("nan"),
                "jumps_by_bone": {},
                "solver": {},
                **stats(ref_ss, reachable, best),
            }
        out["rigs"][key] = {
            "title": spec.title,
            "description": spec.description,
            "bones": len(spec.bones),
            "goals": len(spec.constraints),
            "chain_bones": n_chain,
            "reachability_rule": rule,
            "methods": rows,
        }
    out["load_average_end"] = os.getloadavg()[0]
    out["targets"] = check_targets(out)
    return out


def check_targets(out: dict[str, Any]) -> dict[str, Any]:
    """The issue's targets, for ours (LM converge, the default) against Blender's bake."""
    bl, ours = BLENDER, "ours LM converge"
    res: dict[str, Any] = {}
    rigs = out["rigs"]
    if "A" in rigs and ours in rigs["A"]["methods"]:
        b, o = rigs["A"]["methods"][bl], rigs["A"]["methods"][ours]
        speedup = b["time_median"] / o["time_median"]
        res["A: >= 10x faster, lower error"] = {
            "speedup": speedup,
            "met": bool(speedup >= 10 and o["mean"] < b["mean"] and o["rms"] < b["rms"]),
            "detail": f"{speedup:.1f}x faster; mean error {o['mean']:.3g} vs {b['mean']:.3g}, "
            f"rms {o['rms']:.3g} vs {b['rms']:.3g}; reachable under 1e-3 "
            f"{o['reachable_under_1e-3']:.1%} vs {b['reachable_under_1e-3']:.1%}",
        }
    if "B" in rigs and ours in rigs["B"]["methods"]:
        b, o = rigs["B"]["methods"][bl], rigs["B"]["methods"][ours]
        met = (
            o["time_median"] <= b["time_median"]
            and o["reachable_under_1e-3"] >= b["reachable_under_1e-3"]
        )
        res["B: as fast, as accurate"] = {
            "speedup": b["time_median"] / o["time_median"],
            "met": bool(met),
            "detail": f"{o['time_median']:.3f} s vs {b['time_median']:.3f} s; under 1e-3 "
            f"{o['reachable_under_1e-3']:.1%} vs {b['reachable_under_1e-3']:.1%}",
        }
    if "C" in rigs and ours in rigs["C"]["methods"]:
        o = rigs["C"]["methods"][ours]
        res["C: >= 99 % reachable under 1e-3"] = {
            "met": bool(o["reachable_under_1e-3"] >= 0.99),
            "detail": f"{o['reachable_under_1e-3']:.1%} (Blender "
            f"{rigs['C']['methods'][bl]['reachable_under_1e-3']:.1%})",
        }
    jumps = []
    for key, rig in rigs.items():
        if ours in rig["methods"]:
            jumps.append(
                (
                    key,
                    rig["methods"][ours]["jumps_over_10deg"],
                    rig["methods"][bl]["jumps_over_10deg"],
                )
            )
    res["no more joint jumps > 10 deg than Blender"] = {
        "met": all(o <= b for _, o, b in jumps),
        "detail": ", ".join(f"{k}: {o} vs {b}" for k, o, b in jumps),
    }
    return res


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=250)
    parser.add_argument("--repeats", type=int, default=None, help="default 3 (1 with --quick)")
    parser.add_argument("--quick", action="store_true", help="1 run, LM and Blender only")
    parser.add_argument("--rigs", default="ABC", help="which rigs, e.g. 'C'")
    parser.add_argument("--out", type=Path, default=blender.RESULTS, help="folder for the results")
    args = parser.parse_args(argv)
    repeats = args.repeats or (1 if args.quick else 3)
    methods = ["ours LM converge"] if args.quick else None
    out = run(
        args.frames,
        repeats,
        args.rigs.upper(),
        methods,
        reference_starts=2 if args.quick else 5,
        log=lambda s: print(s, file=sys.stderr, flush=True),
    )
    text = markdown(out)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "vs_blender.md").write_text(text)
    (args.out / "vs_blender.json").write_text(json.dumps(out, indent=1) + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
