"""Does a frame solved live depend on how it was reached? Seeded zoo rigs, three ways in.

Each rig (``tests/rigs/zoo_rigs.py``: humanoids, spiders, tentacles, trees from a seed; position
goals, chain bones at rest, no keys on them) gets Empties keyed on every frame along the zoo's
paths (some frames out of reach), Live on, and every frame is reached three ways: playing
forward (frame_set 1, 2, ..., F), playing backward (F, ..., 1), and by a jump (from the frame
half the range away). For each way of starting a frame change (``bridge.live_model.FRAME_START``)
it reports

- ``tip``: the largest distance between a goal's tip reached forward or backward and by the
  jump, over the *reachable* goals (independent IK tree, target within 95 % of the reach),
- ``unmet``: reachable goal samples farther than 1e-4 from their target, any way,
- ``pose``: the largest joint angle between the pose reached forward or backward and by the jump,
  and the share of frames whose poses agree within 1e-3 rad,
- ``flips``: frame steps played forward (and, for comparison, the jumps' poses in frame order)
  with a joint turning more than 10 degrees,
- ``solves``: solves per frame change (a second one: the neighbour's solution tried).

    .venv/bin/python benchmarks/live_paths.py [--seeds 1,2,3] [--count 4] [--frames 60]
        [--starts previous,animated,hybrid] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

import bpy  # noqa: E402

from tests.rigs.zoo_rigs import geometry, targets, zoo  # noqa: E402

KINDS = ("humanoid", "spider", "tentacle", "tree")
FLIP = np.radians(10.0)


def build(rig: Any, frames: int) -> tuple[Any, list[Any], list[str], np.ndarray]:
    """The rig with position goals towards Empties keyed along the zoo's paths; the goals'
    bones, and which goals are reachable (independent tree, within 95 % of the reach)."""
    from checkout import load_checkout

    load_checkout()
    bpy.ops.wm.read_factory_settings(use_empty=True)
    arm = bpy.data.armatures.new(rig.name)
    ob = bpy.data.objects.new(rig.name, arm)
    bpy.context.scene.collection.objects.link(ob)
    bpy.context.view_layer.objects.active = ob
    bpy.ops.object.mode_set(mode="EDIT")
    for name, head, tail, parent, connected in rig.bones:
        eb = arm.edit_bones.new(name)
        eb.head, eb.tail = head, tail
        if parent is not None:
            eb.parent, eb.use_connect = arm.edit_bones[parent], connected
    bpy.ops.object.mode_set(mode="OBJECT")
    geo = geometry(rig)
    path = targets(rig, geo, frames)
    empties = []
    for e, g in enumerate(rig.goals):
        empty = bpy.data.objects.new(f"T{e}", None)
        bpy.context.scene.collection.objects.link(empty)
        for f in range(frames):
            empty.location = path[f, e].tolist()
            empty.keyframe_insert("location", frame=f + 1)
        goal = ob.jacobian_ik.goals.add()
        goal.bone, goal.target, goal.chain_length = g.bone, empty, g.chain
        empties.append(empty)
    alone = np.array([geo.tree.count(geo.tree[e]) == 1 for e in range(len(rig.goals))])
    rho = np.linalg.norm(path - geo.base[None], axis=2) / geo.reach[None]
    reachable = alone[None, :] & (rho <= 0.95)
    return ob, empties, [g.bone for g in rig.goals], reachable


def snapshot(ob: Any, bones: list[str], chain: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """The goal tips (E, 3) and the chain bones' rotations (K, 3, 3) as evaluated (drawn)."""
    ev = ob.evaluated_get(bpy.context.evaluated_depsgraph_get())
    world = np.array(ev.matrix_world)
    tips = np.array([world[:3, :3] @ np.array(ev.pose.bones[b].tail) + world[:3, 3] for b in bones])
    rots = np.array([np.array(ev.pose.bones[n].matrix_basis)[:3, :3] for n in chain])
    return tips, rots


def angles(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    cos = (np.einsum("kij,kij->k", a, b) - 1.0) / 2.0
    return np.arccos(np.clip(cos, -1.0, 1.0))


def measure(rig: Any, frames: int, start: str = "previous") -> dict[str, Any]:
    """The three ways into every frame with frame changes started as ``start``."""
    ob, empties, bones, reachable = build(rig, frames)
    addon = sys.modules["jacobian_ik"]
    default = addon.bridge.live_model.FRAME_START
    addon.bridge.live_model.FRAME_START = start
    scene = bpy.context.scene
    scene.frame_set(1)
    ob.jacobian_ik.use_live = True
    chain = addon.live._model(ob, True).free_names
    solves: list[int] = []
    original = addon.live.update_armature

    def counted(*args: Any, **kw: Any) -> Any:
        res = original(*args, **kw)
        if res is not None and kw.get("start") == "frame":
            solves.append(res.candidates)
        return res

    addon.live.update_armature = counted
    ways: dict[str, dict[int, tuple[np.ndarray, np.ndarray]]] = {}
    try:
        for way, order in (("forward", range(1, frames + 1)), ("backward", range(frames, 0, -1))):
            ways[way] = {}
            for f in order:
                scene.frame_set(f)
                ways[way][f] = snapshot(ob, bones, chain)
        ways["jump"] = {}
        for f in range(1, frames + 1):
            scene.frame_set((f - 1 + frames // 2) % frames + 1)
            scene.frame_set(f)
            ways["jump"][f] = snapshot(ob, bones, chain)
    finally:
        addon.live.update_armature = original
        addon.bridge.live_model.FRAME_START = default
    ob.jacobian_ik.use_live = False
    tip_diff, pose_diff, unmet = 0.0, [], 0
    for f in range(1, frames + 1):
        scene.frame_set(f)  # Live is off: the targets at f
        target = np.array([np.array(e.matrix_world.translation) for e in empties])
        jump_tips, jump_rots = ways["jump"][f]
        ok = reachable[f - 1]
        for way in ("forward", "backward", "jump"):
            tips, rots = ways[way][f]
            unmet += int(np.sum(np.linalg.norm(tips - target, axis=1)[ok] > 1e-4))
            if way != "jump":
                if ok.any():
                    d = np.linalg.norm(tips - jump_tips, axis=1)[ok].max()
                    tip_diff = max(tip_diff, float(d))
                pose_diff.append(float(angles(rots, jump_rots).max(initial=0.0)))

    def flips(way: str) -> int:
        steps = [
            angles(ways[way][f][1], ways[way][f + 1][1]).max(initial=0.0) for f in range(1, frames)
        ]
        return int(np.sum(np.array(steps) > FLIP))

    pose = np.array(pose_diff)
    return {
        "rig": rig.name,
        "start": start,
        "goals": len(bones),
        "reachable_samples": int(reachable.sum()),
        "tip": tip_diff,
        "unmet": unmet,
        "pose_max": float(pose.max()),
        "pose_agree": float(np.mean(pose <= 1e-3)),
        "flips_forward": flips("forward"),
        "flips_backward": flips("backward"),
        "flips_jumps": flips("jump"),
        "solves_per_frame": float(np.mean(solves)),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument("--count", type=int, default=4, help="rigs per seed (kinds cycled)")
    parser.add_argument("--frames", type=int, default=60)
    parser.add_argument("--starts", default="previous,animated,hybrid")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    rows = []
    head = f"{'rig':<16}{'start':<10}{'tip':>9}{'unmet':>6}{'pose max':>9}{'agree':>7}"
    print(head + f"{'flips fwd/bwd/jumps':>21}{'solves':>8}")
    for seed in (int(s) for s in args.seeds.split(",")):
        for rig in zoo(seed, args.count, KINDS):
            for start in args.starts.split(","):
                r = measure(rig, args.frames, start)
                r["seed"] = seed
                rows.append(r)
                print(
                    f"{seed}:{r['rig']:<14}{start:<10}{r['tip']:9.1e}{r['unmet']:6d}"
                    f"{r['pose_max']:9.3f}{r['pose_agree']:7.2f}"
                    f"{r['flips_forward']:>9d}/{r['flips_backward']}/{r['flips_jumps']:<6d}"
                    f"{r['solves_per_frame']:8.2f}",
                    flush=True,
                )
    print(f"load average {os.getloadavg()[0]:.2f}")
    for start in args.starts.split(","):
        mine = [r for r in rows if r["start"] == start]
        print(
            f"{start}: tip max {max(r['tip'] for r in mine):.1e}, unmet "
            f"{sum(r['unmet'] for r in mine)}, poses agreeing "
            f"{np.mean([r['pose_agree'] for r in mine]):.2f}, flips forward "
            f"{sum(r['flips_forward'] for r in mine)}, backward "
            f"{sum(r['flips_backward'] for r in mine)}, jumps "
            f"{sum(r['flips_jumps'] for r in mine)}, solves per frame "
            f"{np.mean([r['solves_per_frame'] for r in mine]):.2f}"
        )
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
