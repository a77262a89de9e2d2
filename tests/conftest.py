"""Shared by every test folder: the add-on's one import name, and an optional hard exit.

Tests import the package as ``jacobian_ik`` (``jacobian_ik.solvers``, ``jacobian_ik.bridge``):
this checkout, loaded unregistered here (tests/blender/conftest.py registers it). The top-level
``solvers`` the repository root also offers is never imported by a test (test_import_name.py).

Some bpy builds crash (4.2) or hang (4.5) when the interpreter tears down after the tests.
``scripts/test_line.sh`` sets ``JIK_HARD_EXIT=1``: once pytest has printed its summary, the
process ends with pytest's exit status without the interpreter's teardown.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from scripts.checkout import load_checkout

load_checkout(register=False)

_status = {"exit": 0}


def pytest_sessionfinish(session: Any, exitstatus: int) -> None:
    _status["exit"] = int(exitstatus)


def pytest_unconfigure(config: Any) -> None:
    if os.environ.get("JIK_HARD_EXIT"):
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(_status["exit"])
