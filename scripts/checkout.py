"""Load this checkout as the add-on package ``jacobian_ik`` in a Python with bpy from PyPI.

Used by the scripts, benchmarks and tests that run the add-on without installing it (inside a
Blender with the extension installed, use ``bl_ext.user_default.jacobian_ik`` instead).
"""

from __future__ import annotations

import atexit
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]


def load_checkout(register: bool = True) -> ModuleType:
    """Import the repository root as ``jacobian_ik`` (once) and, by default, register it.

    Registration happens when asked and the add-on is not registered yet (whoever registered it
    unregisters it), so a process that imported the package first without Blender (the
    benchmarks, the tests) can still register it. Registration is undone at exit: bpy 4.2
    crashes at exit with add-on classes registered.
    """
    module = sys.modules.get("jacobian_ik")
    if module is None:
        spec = importlib.util.spec_from_file_location(
            "jacobian_ik", ROOT / "__init__.py", submodule_search_locations=[str(ROOT)]
        )
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules["jacobian_ik"] = module
        spec.loader.exec_module(module)
    if register and not _registered():
        module.register()
        atexit.register(module.unregister)
    return module


def _registered() -> bool:
    import bpy

    return hasattr(bpy.types.Object, "jacobian_ik")
