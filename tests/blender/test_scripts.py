"""The headless bake script, run as a user would (a separate Python with bpy)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import bpy
from blender_helpers import ROOT, add_goal, chain_bones, make_armature, make_empty


def test_bake_script(clean: Any, tmp_path: Path) -> None:
    ob = make_armature("Arm", chain_bones(3))
    target = make_empty("T", (1.0, 1.5, 0.5))
    target.keyframe_insert("location", frame=1)
    target.location = (-1.0, 2.0, 0.0)
    target.keyframe_insert("location", frame=10)
    add_goal(ob, "b2", target)
    source = tmp_path / "rig.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(source))
    output = tmp_path / "baked.blend"
    env = {"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts" / "bake.py"),
            str(source),
            "--start=1",
            "--end=10",
            "--method=DLS",
            f"--output={output}",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    # Blender's own messages may come after it (C and Python buffer stdout separately)
    (line,) = [line for line in done.stdout.splitlines() if line.startswith('{"file"')]
    summary = json.loads(line)
    arm = summary["armatures"]["Arm"]
    assert arm["frames"] == 10 and arm["method"] == "dls"
    assert arm["goals"]["1:b2"]["max"] < 1e-4
    assert "100 %" in done.stderr
    assert output.is_file()
