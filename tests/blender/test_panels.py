"""The sidebar panels draw the goal list, the method's own parameters and the last results."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from blender_helpers import add_goal, chain_bones, make_armature, make_empty


class Recorder:
    """A stand-in for UILayout that records every call."""

    def __init__(self, log: list[tuple[str, tuple[Any, ...]]]) -> None:
        self.__dict__["log"] = log

    def __setattr__(self, name: str, value: Any) -> None:
        pass

    def __getattr__(self, name: str) -> Any:
        def call(*args: Any, **kw: Any) -> Recorder:
            self.log.append((name, args + tuple(kw.values())))  # keywords after the positions
            return self

        return call


def draw(panel: Any, ob: Any) -> list[tuple[str, tuple[Any, ...]]]:
    log: list[tuple[str, tuple[Any, ...]]] = []
    context = SimpleNamespace(object=ob)
    assert panel.poll(context)
    panel.draw(SimpleNamespace(layout=Recorder(log)), context)
    return log


def drawn_props(log: list[tuple[str, tuple[Any, ...]]]) -> list[str]:
    return [args[1] for name, args in log if name == "prop"]


def test_panels_draw(clean: Any) -> None:
    from jacobian_ik import panels

    ob = make_armature("Arm", chain_bones(2))
    add_goal(ob, "b1", make_empty("T", (1.0, 1.0, 0.0)))
    main = draw(panels.VIEW3D_PT_jacobian_ik, ob)
    operators = [args[0] for name, args in main if name == "operator"]
    assert "jacobian_ik.solve" in operators and "jacobian_ik.bake" in operators
    assert any(name == "template_list" for name, _ in main)
    assert "chain_length" in drawn_props(draw(panels.VIEW3D_PT_jacobian_ik_goal, ob))

    ob.jacobian_ik.method = "SDLS"
    props = drawn_props(draw(panels.VIEW3D_PT_jacobian_ik_solver, ob))
    assert "sdls_gamma_max" in props and not any(p.startswith(("dls_", "lm_")) for p in props)
    ob.jacobian_ik.method = "DLS"
    props = drawn_props(draw(panels.VIEW3D_PT_jacobian_ik_solver, ob))
    assert "dls_damping" in props and "sdls_gamma_max" not in props and "track_steps" not in props

    results = draw(panels.VIEW3D_PT_jacobian_ik_results, ob)
    assert ("label",) in [(n,) for n, _ in results]


def test_the_panel_says_while_the_compiled_solver_is_built(
    clean: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from jacobian_ik import panels
    from jacobian_ik.solvers import warmup

    ob = make_armature("Arm", chain_bones(2))
    add_goal(ob, "b1", make_empty("T", (1.0, 1.0, 0.0)))

    def labels() -> int:
        return sum(name == "label" for name, _ in draw(panels.VIEW3D_PT_jacobian_ik, ob))

    monkeypatch.setattr(warmup, "running", lambda: False)
    without = labels()
    monkeypatch.setattr(warmup, "running", lambda: True)
    assert labels() == without + 1


def test_full_body_settings_are_drawn(clean: Any) -> None:
    from jacobian_ik import panels

    ob = make_armature("Arm", chain_bones(2))
    goal = add_goal(ob, "b1", make_empty("T", (1.0, 1.0, 0.0)))
    props = drawn_props(draw(panels.VIEW3D_PT_jacobian_ik_goal, ob))
    assert {"type", "support", "rotation_weight"} <= set(props) and "aim_axis" not in props
    goal.type = "AIM"
    props = drawn_props(draw(panels.VIEW3D_PT_jacobian_ik_goal, ob))
    assert "aim_axis" in props and "rotation_weight" not in props
    props = drawn_props(draw(panels.VIEW3D_PT_jacobian_ik_solver, ob))
    assert {"move_root", "balance"} <= set(props)
    assert "root_stiffness" not in props and "balance_weight" not in props
    ob.jacobian_ik.move_root = ob.jacobian_ik.balance = True
    props = drawn_props(draw(panels.VIEW3D_PT_jacobian_ik_solver, ob))
    assert {"root_stiffness", "balance_weight"} <= set(props)
    goal.rotation_error = 0.001  # an aim goal's line shows its angle

    def labels() -> int:
        return sum(name == "label" for name, _ in draw(panels.VIEW3D_PT_jacobian_ik_results, ob))

    ob.jacobian_ik.last_frames, ob.jacobian_ik.last_balance = 1, -1.0  # not measured
    without = labels()
    ob.jacobian_ik.last_balance = 0.25
    assert labels() == without + 1  # the centre of mass's distance


def test_the_solver_panel_says_which_methods_are_not_compiled(
    clean: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from jacobian_ik import panels
    from jacobian_ik.solvers import kernel

    ob = make_armature("Arm", chain_bones(2))
    add_goal(ob, "b1", make_empty("T", (1.0, 1.0, 0.0)))
    monkeypatch.setattr(kernel, "enabled", lambda: True)

    def hint(method: str) -> bool:
        ob.jacobian_ik.method = method
        log = draw(panels.VIEW3D_PT_jacobian_ik_solver, ob)
        return any(name == "label" and "Not compiled" in str(args) for name, args in log)

    assert [hint(m) for m in ("LM", "DLS", "LM_CONSTANT", "LM_CHAN_LAWRENCE")] == [False] * 4
    assert hint("SDLS") and hint("TRANSPOSE") and hint("DLS_OPTIMAL")
    monkeypatch.setattr(kernel, "enabled", lambda: False)  # without numba every method is numpy
    assert not hint("SDLS")
