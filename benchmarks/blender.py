"""What the Blender-side benchmarks share: bpy with a throwaway HOME, the add-on, the checkout's
state, and the two bakes timed side by side (Blender's Bake Action, ours through the public
``jacobian_ik.bridge.run``)."""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from scripts.checkout import load_checkout
from tests.rigs.scenes import RigSpec, chain_bones

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"

bpy: Any = None  # set by import_bpy(), after HOME points at a throwaway folder


def import_bpy() -> None:
    """Import bpy with HOME in a throwaway folder (Blender reads its user config from HOME)."""
    global bpy
    if bpy is not None:
        return
    if "bpy" not in sys.modules:
        home = tempfile.mkdtemp(prefix="jacobian_ik_bench_home_")
        atexit.register(shutil.rmtree, home, ignore_errors=True)
        os.environ["HOME"] = home
        os.environ["XDG_CONFIG_HOME"] = os.path.join(home, ".config")
    import bpy as _bpy

    bpy = _bpy


def load_addon() -> ModuleType:
    """bpy imported and this checkout registered as the add-on ``jacobian_ik``."""
    import_bpy()
    return load_checkout()


def warm_kernel() -> None:
    """The solver's compiled loops loaded (or compiled) before any bake is timed, as the installed
    add-on loads them when goals are added or imported or a file with goals is opened
    (solvers/warmup.py ``preload``): the first rig's bake is timed as warm as the others."""
    from jacobian_ik.solvers import warmup

    warmup.run()


def git_state() -> str:
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=ROOT,
            capture_output=True,
            text=True,
        ).stdout.strip()
    except OSError:
        return "unknown"
    return f"{head}{' + uncommitted changes' if dirty else ''}"


def count_keys(ob: Any) -> int:
    from jacobian_ik.bridge.write import object_fcurves

    return sum(len(fc.keyframe_points) for fc in object_fcurves(ob))


def override(ob: Any, pose_bones: list[Any] | None = None) -> Any:
    kw: dict[str, Any] = {
        "object": ob,
        "active_object": ob,
        "selected_objects": [ob],
        "selected_editable_objects": [ob],
    }
    if pose_bones is not None:
        kw["selected_pose_bones"] = pose_bones
    return bpy.context.temp_override(**kw)


@dataclass
class Bake:
    time: float
    keys: int
    split: dict[str, float] = field(default_factory=dict)
    ok: bool = True
    solver: dict[str, Any] = field(default_factory=dict)


def bake_blender(ob: Any, spec: RigSpec, frames: int) -> Bake:
    """Blender's Bake Action of the chains' bones (visual keying, into the current action)."""
    keys0 = count_keys(ob)
    scene = bpy.context.scene
    # evaluation alone (what the IK costs per frame_set), for the time split
    t0 = time.perf_counter()
    for f in range(1, frames + 1):
        scene.frame_set(f)
    t_eval = time.perf_counter() - t0
    scene.frame_set(1)
    elapsed, ok = bake_action(ob, chain_bones(ob, spec), frames)
    return Bake(elapsed, count_keys(ob) - keys0, {"frame_set_with_ik": t_eval}, ok)


def bake_action(ob: Any, names: Collection[str], frames: int) -> tuple[float, bool]:
    """Blender's Bake Action of the bones ``names`` over frames 1..``frames`` (visual keying,
    into the current action): (seconds, whether it finished)."""
    for pb in ob.pose.bones:
        if hasattr(pb, "select"):
            pb.select = pb.name in names
        else:  # Blender before 5.0
            ob.data.bones[pb.name].select = pb.name in names
    with override(ob, [ob.pose.bones[n] for n in names]):
        t0 = time.perf_counter()
        result = bpy.ops.nla.bake(
            frame_start=1,
            frame_end=frames,
            only_selected=True,
            visual_keying=True,
            clear_constraints=False,
            use_current_action=True,
            bake_types={"POSE"},
        )
        return time.perf_counter() - t0, result == {"FINISHED"}


def bake_ours(ob: Any, frames: int, method: str, mode: str) -> Bake:
    """``jacobian_ik.import_constraints`` (the IK constraints become goals), then the bake as
    the operator runs it: ``jacobian_ik.bridge.run`` over the range, whose report gives the
    time split and the solver's figures."""
    from jacobian_ik.bridge import RigError, run

    keys0 = count_keys(ob)
    with override(ob):
        t0 = time.perf_counter()
        imported = bpy.ops.jacobian_ik.import_constraints()
        ob.jacobian_ik.method = method
        t1 = time.perf_counter()
        try:
            rep = run(
                ob,
                bpy.context.scene,
                range(1, frames + 1),
                view_layer=bpy.context.view_layer,
                mode=mode,
            )
        except RigError as exc:
            print(f"our bake failed: {exc}", file=sys.stderr)
            rep = None
        t2 = time.perf_counter()
    split = {"import": t1 - t0, "bake": t2 - t1}
    solver: dict[str, Any] = {}
    if rep is not None:
        split |= {"read": rep.read_time, "solve": rep.solve_time, "write": rep.write_time}
        split |= {"flip_repair": rep.repair_time, "smoothing": rep.smooth_time}
        solver = {
            "converged": rep.converged,
            "iterations_mean": float(rep.iterations.mean()),
            "iterations_max": int(rep.iterations.max()),
            "solver_error_max": float(rep.position_error.max()),
        }
    ok = imported == {"FINISHED"} and rep is not None
    return Bake(t2 - t0, count_keys(ob) - keys0, split, ok, solver)
