"""Registration, the solver-method enum, and the extension package: validate, build, install."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from types import ModuleType
from typing import Any

import bpy
import pytest
from blender_helpers import ROOT


def test_unregister_and_register_again(addon: ModuleType) -> None:
    assert hasattr(bpy.types.Object, "jacobian_ik")
    addon.unregister()
    try:
        assert not hasattr(bpy.types.Object, "jacobian_ik")
        assert not hasattr(bpy.types, "VIEW3D_PT_jacobian_ik")
        assert not _op_exists("solve")
    finally:
        addon.register()
    assert hasattr(bpy.types.Object, "jacobian_ik")
    assert _op_exists("bake")


def _op_exists(name: str) -> bool:
    try:
        getattr(bpy.ops.jacobian_ik, name).get_rna_type()
    except KeyError:
        return False
    return True


def test_every_solver_method_has_an_enum_item(addon: ModuleType) -> None:
    from jacobian_ik.properties import METHOD_ITEMS
    from jacobian_ik.solvers import METHODS

    assert {item[0].lower() for item in METHOD_ITEMS} == set(METHODS)


def test_settings_map_to_solver(clean: Any) -> None:
    from jacobian_ik.bridge.settings import solver_settings

    ob = bpy.data.objects.new("A", bpy.data.armatures.new("A"))
    props = ob.jacobian_ik
    assert (props.method, props.tolerance, props.max_iterations) == ("LM", pytest.approx(1e-5), 500)
    props.method, props.mode, props.clamp_distance = "SDLS", "TRACK", 0.5
    s = solver_settings(props)
    assert (s.method, s.mode, s.clamp_distance, s.max_step) == ("sdls", "track", 0.5, None)
    assert set(s.params) == {"gamma_max"}


def blender_ext() -> Path:
    """The extension tool shipped inside the bpy wheel."""
    tool = Path(bpy.utils.system_resource("SCRIPTS")) / "addons_core/bl_pkg/cli/blender_ext.py"
    assert tool.is_file(), f"{tool} not found"
    return tool


@pytest.fixture(scope="module")
def built_zip(tmp_path_factory: Any) -> Path:
    tool = blender_ext()
    subprocess.run(
        [sys.executable, str(tool), "validate", str(ROOT)], check=True, capture_output=True
    )
    out = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [sys.executable, str(tool), "build", "--source-dir", str(ROOT), "--output-dir", str(out)],
        check=True,
        capture_output=True,
    )
    (zip_path,) = out.glob("jacobian_ik-*.zip")
    return zip_path


def test_package_excludes_dev_files(built_zip: Path) -> None:
    import zipfile

    names = zipfile.ZipFile(built_zip).namelist()
    assert "blender_manifest.toml" in names and "__init__.py" in names
    assert "solvers/solve.py" in names and "bridge/run.py" in names
    for bad in (
        "tests/",
        "scripts/",
        "docs/",
        "benchmarks/",
        ".ci/",
        "pyproject.toml",
        ".gitignore",
    ):
        assert not any(n.startswith(bad) for n in names), bad
    assert not any("__pycache__" in n or n.endswith(".blend") for n in names)


def test_zip_installs_and_runs(built_zip: Path, tmp_path: Path) -> None:
    """Install the zip as "Install from Disk" does, in a fresh Blender of this line (built with
    this line's own extension tool), then solve, bake and live-solve through the installed add-on.
    """
    script = textwrap.dedent(
        f"""
        import bpy
        bpy.ops.extensions.package_install_files(
            filepath={str(built_zip)!r}, repo="user_default", enable_on_install=True)
        import bl_ext.user_default.jacobian_ik as addon
        arm = bpy.data.armatures.new("A"); ob = bpy.data.objects.new("A", arm)
        bpy.context.scene.collection.objects.link(ob)
        bpy.context.view_layer.objects.active = ob
        bpy.ops.object.mode_set(mode="EDIT")
        parent = None
        for i in range(3):
            b = arm.edit_bones.new(f"b{{i}}"); b.head, b.tail = (0, i, 0), (0, i + 1, 0)
            b.parent, b.use_connect, parent = parent, parent is not None, b
        bpy.ops.object.mode_set(mode="OBJECT")
        with bpy.context.temp_override(object=ob, active_object=ob):
            bpy.ops.jacobian_ik.add_goal(bone="b2")
        goal = ob.jacobian_ik.goals[0]
        target = goal.target
        target.location = (1.0, 1.5, 0.5)
        with bpy.context.temp_override(object=ob, active_object=ob):
            assert bpy.ops.jacobian_ik.solve() == {{"FINISHED"}}
        assert goal.error < 1e-4, goal.error

        def tip_error():
            bpy.context.view_layer.update()
            tail = ob.matrix_world @ ob.pose.bones["b2"].tail
            return (tail - target.matrix_world.translation).length

        # bake: the target moves over frames 1-10, playback follows it
        for f, x in ((1, 1.0), (10, 0.4)):
            target.location = (x, 1.5, 0.5)
            target.keyframe_insert("location", frame=f)
        with bpy.context.temp_override(object=ob, active_object=ob):
            assert bpy.ops.jacobian_ik.bake(frame_start=1, frame_end=10) == {{"FINISHED"}}
        assert ob.animation_data.action is not None
        worst = 0.0
        for f in range(1, 11):
            bpy.context.scene.frame_set(f)
            worst = max(worst, tip_error())
        assert worst < 1e-4, worst
        # live: a moved target is followed on the next depsgraph update
        target.animation_data_clear()
        ob.animation_data_clear()
        ob.jacobian_ik.use_live = True
        target.location = (0.7, 1.2, 0.9)
        assert tip_error() < 1e-4, tip_error()
        ob.jacobian_ik.use_live = False
        print("BAKE_LIVE_OK", bpy.app.version_string, worst)
        # the compiled loops: built by the children that enabling the add-on started (solvers/
        # warmup.py) into the extension's user folder, loaded from there, never compiled here
        from bl_ext.user_default.jacobian_ik.solvers import kernel, warmup
        if kernel.enabled():
            warmup.wait()
            assert all(warmup.built(kernel.CACHE_DIR, k) for k in range(3)), kernel.CACHE_DIR
            stats = {{k: (sum(d.stats.cache_hits.values()), sum(d.stats.cache_misses.values()))
                      for k, d in kernel._COMPILED.items()}}
            assert stats and all(m == 0 and h == 1 for h, m in stats.values()), stats
            print("KERNEL_FROM_CHILD", stats)
        bpy.ops.wm.save_as_mainfile(filepath={str(tmp_path / "goals.blend")!r})
        print("INSTALLED", addon.__name__, addon.__file__)
        """
    )
    # a later session: opening a file with goals loads the loops (solvers/warmup.py
    # ``preload``), before any solve
    later = textwrap.dedent(
        f"""
        import bpy
        bpy.ops.preferences.addon_enable(module="bl_ext.user_default.jacobian_ik")
        from bl_ext.user_default.jacobian_ik.solvers import kernel
        assert not kernel._COMPILED
        bpy.ops.wm.open_mainfile(filepath={str(tmp_path / "goals.blend")!r})
        stats = {{k: (sum(d.stats.cache_hits.values()), sum(d.stats.cache_misses.values()))
                  for k, d in kernel._COMPILED.items()}}
        print("PRELOADED", kernel.enabled(), stats)
        assert not kernel.enabled() or (
            sorted(stats) == [0, 1, 2] and all(v == (1, 0) for v in stats.values())), stats
        """
    )
    env = {
        "HOME": str(tmp_path),
        "XDG_CONFIG_HOME": str(tmp_path / ".config"),
        "PATH": "/usr/bin:/bin",
    }
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "INSTALLED bl_ext.user_default.jacobian_ik" in done.stdout
    assert "BAKE_LIVE_OK" in done.stdout
    assert str(tmp_path) in done.stdout  # installed under the throwaway HOME
    again = subprocess.run(
        [sys.executable, "-c", later], env=env, capture_output=True, text=True, timeout=300
    )
    assert again.returncode == 0, again.stdout + again.stderr
    from jacobian_ik.solvers import kernel

    assert f"PRELOADED {kernel.numba is not None}" in again.stdout
