"""One import name for the add-on in the tests and the benchmarks: ``jacobian_ik``. Importing
the top-level ``solvers`` too would load a second copy whose exceptions and classes are not the
first's; the rigs they share live in tests/rigs, not in benchmarks/."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def imported_modules(path: Path) -> list[tuple[int, str]]:
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.append((node.lineno, node.module))
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "import_module":
            if node.args and isinstance(node.args[0], ast.Constant):
                out.append((node.lineno, str(node.args[0].value)))
    return out


def test_tests_and_benchmarks_import_the_package_as_jacobian_ik() -> None:
    files = sorted((ROOT / "tests").rglob("*.py")) + sorted((ROOT / "benchmarks").rglob("*.py"))
    assert len(files) > 40
    wrong = [
        f"{path.relative_to(ROOT)}:{line}: {name}"
        for path in files
        for line, name in imported_modules(path)
        if name.split(".")[0] in {"solvers", "bridge", "operators", "panels", "properties"}
        or name.startswith(("benchmarks.rigs", "benchmarks.zoo_rigs"))
    ]
    assert not wrong, "import these as jacobian_ik.<module> (tests/conftest.py):\n" + "\n".join(
        wrong
    )


def test_the_check_sees_a_top_level_import(tmp_path: Path) -> None:
    source = tmp_path / "example.py"
    source.write_text(
        "import numpy\nfrom solvers import solve\nfrom jacobian_ik.solvers import Pose\n"
    )
    assert imported_modules(source) == [(1, "numpy"), (2, "solvers"), (3, "jacobian_ik.solvers")]
