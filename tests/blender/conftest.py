"""Blender test set-up: bpy (from PyPI) in background mode, a throwaway HOME, and the repository
root registered as the add-on package ``jacobian_ik``. Helpers live in blender_helpers.py."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any

import pytest

# Blender reads its user configuration from HOME when bpy is imported: keep it out of the
# developer's real configuration.
_HOME = tempfile.mkdtemp(prefix="jacobian_ik_home_")
atexit.register(shutil.rmtree, _HOME, ignore_errors=True)
os.environ["HOME"] = _HOME
os.environ["XDG_CONFIG_HOME"] = os.path.join(_HOME, ".config")

bpy = pytest.importorskip("bpy", reason="bpy (Blender as a Python module) is not installed")

from blender_helpers import add_goal, chain_bones, make_armature, make_empty  # noqa: E402

from scripts.checkout import load_checkout  # noqa: E402


@pytest.fixture(scope="session")
def addon() -> Iterator[ModuleType]:
    module = load_checkout(register=False)
    module.register()
    yield module
    module.unregister()


@pytest.fixture
def clean(addon: ModuleType) -> ModuleType:
    """An empty scene with the add-on registered."""
    bpy.ops.wm.read_factory_settings(use_empty=True)
    return addon


@pytest.fixture
def arm_chain(clean: ModuleType) -> Callable[..., Any]:
    """A factory for a 3-bone chain with one goal towards an Empty."""

    def build(target: tuple[float, float, float] = (1.5, 1.5, 0.5), **goal: Any) -> tuple[Any, Any]:
        ob = make_armature("Arm", chain_bones(3))
        empty = make_empty("Target", target)
        add_goal(ob, "b2", empty, **goal)
        return ob, empty

    return build
