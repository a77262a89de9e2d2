"""Aim goals: a bone's local axis points at a target (a head looking at a point, a gun barrel).

An aim goal has two rows, the direction error in the plane orthogonal to the aimed axis. With
``a = R_b axis`` the bone's axis in model space, ``p`` the effector point (the ray's origin) and
``d = (t - p) / |t - p|`` the direction to the target ``t``, the task is ``a = d``. Its rows
use a basis ``U = [u, v]`` of the plane orthogonal to ``a`` (u toward d, v = a x u), frozen at
the current pose:

- error ``e = (theta, 0)``: the angle between a and d along u, the geodesic length on the
  sphere (``U^T (d - a) = (sin theta, 0)`` to first order, exact step length for large angles);
- Jacobian ``U^T (da/dq - dd/dq)`` (of ``f(q) = U^T (a(q) - d(q))``, sign flipped so that
  ``J dq = e``): ``da/dq_j = w_j x a`` with ``w_j`` the DOF's angular velocity (the
  orientation rows, Buss 2009 section 2) and ``dd/dq_j = -(I - d d^T) (dp/dq_j) / |t - p|``
  (the origin moves with the neck, so the direction to the target turns).

Every column is checked against finite differences in the tests. The angle is in radians and
an aim goal has converged when it is within the rotation tolerance.
"""

from __future__ import annotations

import numpy as np

from .so3 import Array

AXIS_VECTORS = {
    "X": (1.0, 0.0, 0.0),
    "Y": (0.0, 1.0, 0.0),
    "Z": (0.0, 0.0, 1.0),
    "-X": (-1.0, 0.0, 0.0),
    "-Y": (0.0, -1.0, 0.0),
    "-Z": (0.0, 0.0, -1.0),
}


def _unit(v: Array) -> tuple[Array, Array]:
    n = np.linalg.norm(v, axis=-1)
    return v / np.maximum(n, 1e-300)[..., None], n


def aim_basis(axis: Array, direction: Array) -> tuple[Array, Array, Array]:
    """(u, v, theta) for axes ``a`` and unit directions ``d`` (..., 3): u the unit tangent at a
    toward d (any orthogonal direction when d is parallel to a), v = a x u, theta the angle."""
    along = np.einsum("...i,...i->...", axis, direction)
    side = direction - along[..., None] * axis
    u, n = _unit(side)
    # d (anti)parallel to a: any direction orthogonal to a
    other = np.where(np.abs(axis[..., :1]) < 0.9, [1.0, 0.0, 0.0], [0.0, 1.0, 0.0])
    fallback, _ = _unit(other - np.einsum("...i,...i->...", other, axis)[..., None] * axis)
    u = np.where((n > 1e-12)[..., None], u, fallback)
    v = np.cross(axis, u)
    return u, v, np.arctan2(n, along)


def aim_axes(frames_rot: Array, local_axis: Array) -> Array:
    """(F, E, 3) the aimed axes in model space: bone rotations (F, E, 3, 3) times local axes."""
    return np.einsum("feij,ej->fei", frames_rot, local_axis)


def aim_rows(
    frames_rot: Array,
    points: Array,
    targets: Array,
    local_axis: Array,
    jac: Array | None = None,
) -> tuple[Array, Array, Array | None]:
    """Errors, angles and Jacobian rows of aim goals, all in model space.

    frames_rot (F, E, 3, 3), points (F, E, 3) the rays' origins, targets (F, E, 3), local_axis
    (E, 3) unit axes in the bones' frames, jac (F, E, 6, n) the model-space Jacobian of these
    effectors (position rows at the points). Returns e (F, E, 2), theta (F, E) and rows
    (F, E, 2, n) (None without ``jac``).
    """
    a = aim_axes(frames_rot, local_axis)
    d, dist = _unit(targets - points)
    u, v, theta = aim_basis(a, d)
    e = np.zeros((*theta.shape, 2))
    e[..., 0] = theta
    if jac is None:
        return e, theta, None
    omega = np.swapaxes(jac[:, :, 3:], -1, -2)  # (F, E, n, 3) angular velocity per DOF
    dp = np.swapaxes(jac[:, :, :3], -1, -2)  # (F, E, n, 3) point velocity per DOF
    da = np.cross(omega, a[:, :, None, :])
    dd = -(dp - np.einsum("fenk,fek->fen", dp, d)[..., None] * d[:, :, None, :])
    dd = dd / np.maximum(dist, 1e-300)[:, :, None, None]
    diff = da - dd  # (F, E, n, 3)
    rows = np.stack(
        [np.einsum("fenk,fek->fen", diff, u), np.einsum("fenk,fek->fen", diff, v)], axis=2
    )
    return e, theta, rows
