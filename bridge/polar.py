"""The rotation nearest to a matrix, whether a matrix is scaled, and when a bone is read from its
channels (below ``rig`` and ``full_body``, which both use them)."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from ..solvers.so3 import det3_quick

Array = NDArray[np.float64]


NEAR = 1e-4
"""Matrices within this (relative) of a rotation times a uniform scale, as Blender's float32
matrices are (about 1e-7), take Bjorck's iteration instead of the SVD."""


SCALE_EPS = 1e-4
"""A bone whose 3x3 matrix M has |M^T M - I| above this somewhere is scaled (Blender's float32
matrices carry about 1e-7)."""

CHANNELS_TOLERANCE = 1e-5
"""A bone whose evaluated matrix is its parent's times its rest and channels (``matrix_basis``)
to within this (times 1 + their largest entry) is read from its channels (``rig._start_pose``,
``full_body._exact_offsets``): the evaluated matrices carry float32 round-off of the pose
above."""


def scaled(m: Array) -> NDArray[np.bool_]:
    """Which (..., 3, 3) matrices are not rotations (scaled, sheared): |M^T M - I| > SCALE_EPS."""
    gram = np.einsum("...ki,...kj->...ij", m, m) - np.eye(3)
    return np.asarray(np.abs(gram).max(axis=(-1, -2)) > SCALE_EPS)


def nearest_rotation(m: Array) -> Array:
    """The rotation nearest to each (..., 3, 3) matrix (polar decomposition): scale removed.

    A rotation times a positive uniform scale (what bones and targets nearly always hold) is
    divided by its scale; one that is that to float32 round-off then takes Bjorck and Bowie's
    iteration X <- X (3 I - X^T X) / 2 (quadratic: from 1e-7 to rounding in two steps, at
    half the SVD's cost on a rig's bones); only the others go through the SVD (batched
    LAPACK calls are slow on many small matrices)."""
    m = np.asarray(m, dtype=np.float64)
    gram = m.swapaxes(-1, -2) @ m
    s2 = np.einsum("...ii->...", gram) / 3.0
    dev = np.abs(gram - s2[..., None, None] * _EYE).max(axis=(-2, -1))
    proper = det3_quick(m) > 0.0  # (so not zero: s2 > 0 too)
    easy = proper & (dev <= 1e-12 * s2)
    if easy.all():
        return np.asarray(m / np.sqrt(s2)[..., None, None])
    near = proper & (dev <= NEAR * s2)
    if near.all():
        return _bjorck(m / np.sqrt(s2)[..., None, None])
    out = np.empty_like(m)
    out[easy] = m[easy] / np.sqrt(s2[easy])[:, None, None]
    close = near & ~easy
    out[close] = _bjorck(m[close] / np.sqrt(s2[close])[:, None, None])
    far = ~near
    out[far] = _polar(m[far])
    return out


_EYE, _EYE_15 = np.eye(3), 1.5 * np.eye(3)


def _bjorck(x: Array) -> Array:
    """The orthogonal polar factor of matrices within ``NEAR`` of orthogonal (X^T X - I): two
    steps of X <- X (3 I - X^T X) / 2, each squaring the distance (1e-4 -> 1e-8 -> 1e-16)."""
    for _ in range(2):
        x = x @ (_EYE_15 - 0.5 * (x.swapaxes(-1, -2) @ x))
    return x


def _polar(m: Array) -> Array:
    u, _, vt = np.linalg.svd(m)
    r = u @ vt
    flip = np.linalg.det(r) < 0.0
    if np.any(flip):
        u = u.copy()
        u[flip, :, -1] *= -1.0
        r = u @ vt
    return r
