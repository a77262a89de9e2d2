"""Settings flow one way (issue 14): methods declare their parameters once and the Blender
properties, panel, menu, docs table, validation and the live cache key all derive from there;
the package has no import cycle; api.solve_pose with a pole target."""

from __future__ import annotations

import ast
import math
from pathlib import Path
from typing import Any

import bpy
import pytest
from blender_helpers import ROOT, add_goal, chain_bones, make_armature, make_empty

PACKAGE = "jacobian_ik"
SKIP = {".venv", "tests", "benchmarks", "scripts", "docs"}


def _module_files() -> dict[str, Path]:
    """The add-on's modules by dotted name (benchmarks, scripts and tests are not shipped)."""
    out = {}
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT)
        if rel.parts[0] in SKIP or rel.parts[0].startswith("."):
            continue
        parts = [PACKAGE, *rel.with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _imports(name: str, path: Path, modules: set[str]) -> list[tuple[str, bool]]:
    """(imported package module, inside a function) for each import of ``name``'s source,
    except those under ``if TYPE_CHECKING``."""
    tree = ast.parse(path.read_text())
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: list[tuple[str, bool]] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                continue
            nested = in_function or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef)
            if isinstance(child, ast.ImportFrom) and child.level:
                base = package.rsplit(".", child.level - 1)[0] if child.level > 1 else package
                base = f"{base}.{child.module}" if child.module else base
                for alias in child.names:
                    sub = f"{base}.{alias.name}"
                    out.append((sub if sub in modules else base, nested))
            elif isinstance(child, ast.Import | ast.ImportFrom):
                names = [child.module] if isinstance(child, ast.ImportFrom) else []
                names += [a.name for a in child.names] if isinstance(child, ast.Import) else []
                out.extend((n, nested) for n in names if n and n.split(".")[0] == PACKAGE)
            visit(child, nested)

    visit(tree, False)
    return out


def _graph() -> tuple[dict[str, set[str]], dict[str, list[tuple[str, bool]]]]:
    files = _module_files()
    raw = {name: _imports(name, path, set(files)) for name, path in files.items()}
    # the package's register() imports its submodules lazily, after everything has loaded
    graph = {
        n: {m for m, inside in edges if m != n and not (n == PACKAGE and inside)}
        for n, edges in raw.items()
    }
    return graph, raw


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def dfs(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt) :], nxt]
            if nxt not in state and (found := dfs(nxt)):
                return found
        state[node] = 2
        stack.pop()
        return None

    for node in sorted(graph):
        if node not in state and (found := dfs(node)):
            return found
    return None


def test_no_import_cycle_and_the_bridge_never_imports_the_ui() -> None:
    graph, raw = _graph()
    assert f"{PACKAGE}.bridge.settings" in graph and f"{PACKAGE}.properties" in graph
    assert f"{PACKAGE}.bridge.settings" in graph[f"{PACKAGE}.properties"]  # the parser sees edges
    assert _cycle(graph) is None, f"import cycle: {' -> '.join(_cycle(graph) or [])}"
    ui = {f"{PACKAGE}.{m}" for m in ("properties", "live", "panels", "operators", "draw", "api")}
    for name, edges in graph.items():
        if name.startswith((f"{PACKAGE}.bridge", f"{PACKAGE}.solvers")):
            assert not {e for e in edges if e in ui or e.startswith(f"{PACKAGE}.panels")}, name
    assert not [m for m, inside in raw[f"{PACKAGE}.properties"] if inside]


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


def test_declared_parameters_are_blender_properties(addon: Any) -> None:
    from jacobian_ik.bridge.settings import parameter_property
    from jacobian_ik.properties import FLOAT_MAX, METHOD_ITEMS
    from jacobian_ik.solvers import METHODS

    rna = bpy.types.Object.bl_rna.properties["jacobian_ik"].fixed_type.properties
    seen = 0
    for method, cls in METHODS.items():
        for p in cls.parameters:
            prop = rna[parameter_property(method, p.name)]
            assert p.doc in prop.description
            if p.choices:
                assert prop.type == "ENUM"
                assert [i.identifier for i in prop.enum_items] == list(p.choices)
                assert prop.default == p.default
            else:
                assert prop.type == "FLOAT"
                assert prop.hard_min == pytest.approx(p.low)
                high = p.high if math.isfinite(p.high) else FLOAT_MAX
                assert prop.hard_max == pytest.approx(high, rel=1e-6)
                assert prop.default == pytest.approx(p.default, rel=1e-6)
                assert prop.unit == p.unit
            seen += 1
    assert seen >= 20
    items = {i[0]: i for i in METHOD_ITEMS}
    for method, cls in METHODS.items():
        assert items[method.upper()][1:] == (cls.label, cls.summary())
    assert "line search" not in items["STEEPEST_DESCENT"][2]
    assert "acceptance" not in items["LM"][2]


def test_every_setting_field_changes_the_live_cache_key(clean: Any, monkeypatch: Any) -> None:
    from jacobian_ik.bridge import settings

    ob = make_armature("Arm", chain_bones(2))
    props = ob.jacobian_ik
    for field in settings.SETTINGS_FIELDS:
        before = settings.settings_key(props)
        value = getattr(props, field)
        if isinstance(value, bool):
            setattr(props, field, not value)
        elif isinstance(value, str):
            setattr(props, field, "SDLS" if field == "method" else "TRACK")
        else:
            setattr(props, field, value + 1 if isinstance(value, int) else value * 0.5 + 0.25)
        assert settings.settings_key(props) != before, field
    # a setting added to the list reaches the key; before that it does not
    before = settings.settings_key(props)
    props.last_keys += 7
    assert settings.settings_key(props) == before
    monkeypatch.setattr(settings, "SETTINGS_FIELDS", (*settings.SETTINGS_FIELDS, "last_keys"))
    before = settings.settings_key(props)
    props.last_keys += 7
    assert settings.settings_key(props) != before
    # and a method parameter
    before = settings.settings_key(props)
    props.sdls_gamma_max = 0.3
    assert settings.settings_key(props) != before


def test_live_model_is_rebuilt_when_a_listed_setting_changes(clean: Any) -> None:
    from jacobian_ik.bridge.live_model import LiveModel

    ob = make_armature("Arm", chain_bones(2))
    add_goal(ob, "b1", make_empty("t", (0.5, 1.2, 0.3)))
    model = LiveModel(ob)
    assert model.matches(ob, check_ik=False)
    ob.jacobian_ik.tolerance = 1e-3
    assert not model.matches(ob, check_ik=False)


def test_settings_stored_by_older_versions_are_converted(clean: Any) -> None:
    from jacobian_ik.properties import convert_stored

    ob = make_armature("Arm", chain_bones(2))
    props = ob.jacobian_ik
    props["lm_constant_damping"] = 0.05
    props["lm_chan_lawrence_damping"] = 2.0
    props["dls_maciejewski_klein_bound"] = "condition"
    assert convert_stored(props)
    assert props.lm_constant_w_n == pytest.approx(0.05)
    assert props.lm_chan_lawrence_w_n_factor == pytest.approx(2.0)
    assert props.dls_maciejewski_klein_bound == "condition"
    assert props.get("lm_constant_damping") is None
    assert not convert_stored(props)


def test_the_docs_table_is_the_declaration() -> None:
    from jacobian_ik.bridge.settings import parameter_table

    text = (ROOT / "docs" / "methods.md").read_text()
    assert parameter_table() in text, "regenerate docs/methods.md: bridge.settings.parameter_table"


def test_solve_pose_with_a_pole_target(clean: Any) -> None:
    """Issue 10: a goal with a pole target made solve_pose fail with a shape error."""
    from mathutils import Vector

    from jacobian_ik.api import solve_pose

    ob = make_armature("Arm", chain_bones(3))
    target = make_empty("target", (0.0, 1.6, 1.2))
    pole = make_empty("pole", (0.0, 0.5, 3.0))
    add_goal(ob, "b2", target, chain_length=3, pole_target=pole)
    bpy.context.view_layer.update()
    preview = solve_pose(ob, apply=False)
    assert all(v == 0.0 for v in ob.pose.bones["b1"].rotation_quaternion[1:])  # nothing written
    result = solve_pose(ob)
    assert result.converged and preview.converged
    assert max(result.position_error.values()) < 1e-4
    bpy.context.view_layer.update()
    tail = ob.matrix_world @ ob.pose.bones["b2"].tail
    assert (tail - target.matrix_world.translation).length < 1e-4
    # the middle joint bends toward the pole (+Z), not away from it
    knee = ob.matrix_world @ ob.pose.bones["b1"].head
    assert knee.z > 0.0 and isinstance(knee, Vector)
