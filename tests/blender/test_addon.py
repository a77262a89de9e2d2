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
    assert (props.method, props.tolerance, props.max_iterations) == ("LM", pytest.approx(1e-5), 100)
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
    """Install the zip as "Install from Disk" does, in a fresh Blender, and bake with it."""
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
        b = arm.edit_bones.new("b"); b.head, b.tail = (0, 0, 0), (0, 1, 0)
        bpy.ops.object.mode_set(mode="OBJECT")
        with bpy.context.temp_override(object=ob, active_object=ob):
            bpy.ops.jacobian_ik.add_goal(bone="b")
            ob.jacobian_ik.goals[0].target.location = (0.5, 0.5, 0.5)
            assert bpy.ops.jacobian_ik.solve() == {{"FINISHED"}}
        assert ob.jacobian_ik.goals[0].error < 0.5, ob.jacobian_ik.goals[0].error
        print("INSTALLED", addon.__name__, addon.__file__)
        """
    )
    env = {
        "HOME": str(tmp_path),
        "XDG_CONFIG_HOME": str(tmp_path / ".config"),
        "PATH": "/usr/bin:/bin",
    }
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "INSTALLED bl_ext.user_default.jacobian_ik" in done.stdout
    assert str(tmp_path) in done.stdout  # installed under the throwaway HOME
