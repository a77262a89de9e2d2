"""Run by test_determinism.py in a fresh Python with bpy: open a .blend, import its IK
constraints, bake frames 1..F with the defaults (a lean bake with ``lean``) and save every
F-curve's keys (points, handles and handle types) to an .npz.

Usage: python tests/blender/bake_keys.py FILE.blend FRAMES OUT.npz [lean]
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def main(blend: str, frames: int, out: str, lean: bool) -> None:
    home = tempfile.mkdtemp(prefix="jacobian_ik_keys_home_")
    os.environ["HOME"], os.environ["XDG_CONFIG_HOME"] = home, os.path.join(home, ".config")
    import bpy
    import numpy as np

    sys.path.insert(0, str(ROOT))
    from scripts.checkout import load_checkout

    load_checkout()
    bpy.ops.wm.open_mainfile(filepath=blend)
    ob = next(o for o in bpy.data.objects if o.type == "ARMATURE")
    with bpy.context.temp_override(
        object=ob, active_object=ob, selected_objects=[ob], selected_editable_objects=[ob]
    ):
        assert bpy.ops.jacobian_ik.import_constraints() == {"FINISHED"}
        bake = bpy.ops.jacobian_ik.bake
        assert bake(frame_start=1, frame_end=frames, reduce_keys=lean) == {"FINISHED"}
    arrays = {}
    from jacobian_ik.bridge.write import object_fcurves

    for fc in object_fcurves(ob):
        n = len(fc.keyframe_points)
        buf = np.empty(6 * n, dtype=np.float32)
        for i, attr in enumerate(("co", "handle_left", "handle_right")):
            fc.keyframe_points.foreach_get(attr, buf[2 * i * n : 2 * (i + 1) * n])
        arrays[f"{fc.data_path}[{fc.array_index}]"] = buf
        types = [(k.handle_left_type, k.handle_right_type) for k in fc.keyframe_points]
        arrays[f"{fc.data_path}[{fc.array_index}] types"] = np.array(types, dtype=str)
    np.savez(out, **arrays)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4:] == ["lean"])
    sys.stdout.flush()
    os._exit(0)  # skip the interpreter's teardown: some bpy builds (4.2) crash in it
