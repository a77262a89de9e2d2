"""Solver settings from an armature's ``jacobian_ik`` properties (no bpy: pure names and values).

``SETTINGS_FIELDS`` is the one list of the stored settings a solve reads (besides the method's
own parameters, named by ``parameter_property``); ``settings_key`` (the live cache key) is
derived from it, so a setting added there invalidates live models too.
"""

from __future__ import annotations

from typing import Any

from ..solvers import METHODS, Settings
from ..solvers.methods import Param

SETTINGS_FIELDS = (
    "method",
    "mode",
    "track_steps",
    "max_iterations",
    "tolerance",
    "clamp_distance",
    "max_step",
    "rest_weight",
    "max_stretch",
    "move_root",
    "root_stiffness",
    "balance",
    "balance_weight",
)
"""The armature's stored solver settings (``ob.jacobian_ik.<field>``) that a solve reads, in the
panel's order (the panel draws them from here, the method's parameters after ``method``)."""

SHOWN_IF = {"track_steps": ("mode", "TRACK"), "root_stiffness": ("move_root", True)}
SHOWN_IF["balance_weight"] = ("balance", True)
"""Fields the panel shows only when another field has a value."""


def parameter_property(method: str, param: str) -> str:
    """The settings property holding ``param`` of solver method ``method`` (e.g. "dls_damping")."""
    return f"{method}_{param}"


def method_name(method_id: str) -> str:
    """The solver's method name of an enum identifier ('DLS_OPTIMAL' -> 'dls_optimal')."""
    return method_id.lower()


def method_params(method_id: str) -> tuple[Param, ...]:
    """The method's declared parameters (empty for an unknown method)."""
    cls = METHODS.get(method_name(method_id))
    return () if cls is None else cls.parameters


def method_parameters(method_id: str) -> list[str]:
    """The parameter names the method uses (empty for an unknown method)."""
    return [p.name for p in method_params(method_id)]


def method_properties(method_id: str) -> list[str]:
    """The settings properties holding the method's parameters."""
    method = method_name(method_id)
    return [parameter_property(method, p) for p in method_parameters(method_id)]


def settings_key(props: Any) -> tuple[Any, ...]:
    """The stored settings a solve reads, as a tuple (cheaper to compare than ``Settings``)."""
    return (
        *(getattr(props, name) for name in SETTINGS_FIELDS),
        *(getattr(props, name) for name in method_properties(props.method)),
    )


def solver_settings(props: Any, mode: str | None = None) -> Settings:
    """``Settings`` for the solver; ``mode`` ('CONVERGE'/'TRACK') overrides the stored mode."""
    method = method_name(props.method)
    params = {
        name: getattr(props, parameter_property(method, name))
        for name in method_parameters(props.method)
    }
    return Settings(
        method=method,
        mode=(mode or props.mode).lower(),
        max_iterations=props.max_iterations,
        tolerance=props.tolerance,
        clamp_distance=props.clamp_distance or None,
        max_step=props.max_step or None,
        track_steps=props.track_steps,
        params=params,
        # "stay near the rest pose": a secondary goal in the null space of the goals
        nullspace="exact" if props.rest_weight > 0.0 else "none",
        rest_weight=props.rest_weight,
    )


def parameter_table() -> str:
    """The methods' parameters as a markdown table (docs/methods.md is this, tested)."""
    lines = [
        "| method (panel) | parameter (property) | default | range | meaning |",
        "| --- | --- | --- | --- | --- |",
    ]
    for name, cls in METHODS.items():
        if not cls.parameters:
            lines.append(f"| `{name}` ({cls.label}) | none | | | |")
        for p in cls.parameters:
            default = p.default if isinstance(p.default, str) else f"{p.default:.6g}"
            lines.append(
                f"| `{name}` ({cls.label}) | `{p.name}` (`{parameter_property(name, p.name)}`) "
                f"| {default} | {p.range_text()} | {p.doc.replace('|', chr(92) + '|')} |"
            )
    return "\n".join(lines) + "\n"
