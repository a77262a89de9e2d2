"""The product's functions stay short enough to read as one job each (issue 14): none in the
solver, the Blender bridge, the operators, the panels or the package's top-level modules is over
MAX_LINES lines, signature and docstring included."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MAX_LINES = 80
CHECKED = ("solvers", "bridge", "operators", "panels", ".")


def long_functions(source: str, limit: int = MAX_LINES) -> list[tuple[str, int]]:
    """(qualified name, lines) of every function in ``source`` longer than ``limit`` lines."""
    found: list[tuple[str, int]] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            name = prefix
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                name = f"{prefix}{child.name}."
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                assert child.end_lineno is not None
                lines = child.end_lineno - child.lineno + 1
                if lines > limit:
                    found.append((name[:-1], lines))
            visit(child, name)

    visit(ast.parse(source), "")
    return found


def _function(name: str, lines: int, indent: str = "") -> str:
    body = "".join(f"{indent}    x = {i}\n" for i in range(lines - 1))
    return f"{indent}def {name}():\n{body}"


def test_long_functions_are_found():
    source = "class A:\n" + _function("short", 80, "    ") + _function("long", 81, "    ")
    assert long_functions(source) == [("A.long", 81)]
    assert long_functions("def f():\n    def g():\n        pass\n", limit=1) == [
        ("f", 3),
        ("f.g", 2),
    ]


def test_no_function_over_80_lines():
    files = [p for folder in CHECKED for p in sorted((ROOT / folder).glob("*.py"))]
    assert any(p.parent.name == "solvers" for p in files) and any(
        p.parent.name == "bridge" for p in files
    )
    too_long = [
        f"{p.relative_to(ROOT)}: {name} ({lines} lines)"
        for p in files
        for name, lines in long_functions(p.read_text(encoding="utf-8"))
    ]
    assert not too_long, "split these along their jobs:\n" + "\n".join(too_long)


def test_no_script_folder_module_shadows_a_bundled_add_on() -> None:
    """benchmarks/ and scripts/ go on ``sys.path`` (benchmarks/live.py, the demo): a module
    there named like one of Blender's bundled add-ons is what ``addon_utils.enable`` then
    imports (a benchmarks/rigify.py broke Rigify's meta-rig operator in the playback benchmark)."""
    import importlib.util

    spec = importlib.util.find_spec("bpy")
    assert spec is not None and spec.submodule_search_locations
    bpy_dir = Path(next(iter(spec.submodule_search_locations)))
    add_ons = {p.name.removesuffix(".py") for p in bpy_dir.glob("*/scripts/addons_core/*")}
    assert "rigify" in add_ons
    ours = {p.stem for folder in ("benchmarks", "scripts") for p in (ROOT / folder).glob("*.py")}
    assert not ours & add_ons
