"""Solver settings from an armature's ``jacobian_ik`` properties."""

from __future__ import annotations

from typing import Any

from ..properties import parameter_property
from ..solvers import METHODS, Settings


def method_name(method_id: str) -> str:
    """The solver's method name of an enum identifier ('DLS_OPTIMAL' -> 'dls_optimal')."""
    return method_id.lower()


def method_parameters(method_id: str) -> list[str]:
    """The parameter names the method uses (empty for an unknown method)."""
    cls = METHODS.get(method_name(method_id))
    return [] if cls is None else list(cls.defaults)


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
